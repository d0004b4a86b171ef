import Foundation
import Testing

/// Runs `scripts/fuzz` (libFuzzer on its five targets: the frame decoder, the
/// reachability probe's response parser, the netlink parser and tables, the endpoint
/// parser and the transfer protocol's messages; see Fuzz/*.swift) for a bounded time,
/// from the seeds checked in under Fuzz/Corpus, and expects it to find nothing.
@Suite struct FuzzScriptTests {
    /// The repository root: this file is `<root>/Tests/FuzzTests/FuzzScriptTests.swift`.
    static let root = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// Shared by the targets: 10 s each.
    static let fuzzSeconds = 50
    /// Past this the script (and the fuzzer under it) is killed and the test fails.
    static let hardTimeout: Duration = .seconds(480)

    static func executable(named name: String) -> String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        for directory in path.split(separator: ":") {
            let candidate = "\(directory)/\(name)"
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        return nil
    }

    @Test("every fuzz target runs briefly and finds nothing", .timeLimit(.minutes(10)))
    func fuzzingFindsNothing() async throws {
        guard Self.executable(named: "swiftc") != nil else {
            print("skipped: swiftc is not on PATH, so the fuzzer cannot be built")
            return
        }
        let script = Self.root.appendingPathComponent("scripts/fuzz").path
        #expect(FileManager.default.isExecutableFile(atPath: script), "\(script) is missing or not executable")

        let logURL = FileManager.default.temporaryDirectory
            .appendingPathComponent("switchyard-fuzz-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).log")
        _ = FileManager.default.createFile(atPath: logURL.path, contents: nil)
        defer { try? FileManager.default.removeItem(at: logURL) }
        let log = try FileHandle(forWritingTo: logURL)
        defer { try? log.close() }

        let process = Process()
        process.executableURL = URL(fileURLWithPath: script)
        process.currentDirectoryURL = Self.root
        var environment = ProcessInfo.processInfo.environment
        environment["FUZZ_SECONDS"] = String(Self.fuzzSeconds)
        process.environment = environment
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = log
        process.standardError = log
        try process.run()
        let pid = process.processIdentifier
        // Foundation starts the child in its own process group; if so, a timeout kills the
        // whole group (the script and the fuzzer under it), else the script alone (the
        // fuzzer then still ends by itself: the script bounds it with -max_total_time and
        // timeout(1)).
        let ownGroup = getpgid(pid) == pid

        let deadline = ContinuousClock.now + Self.hardTimeout
        var timedOut = false
        while process.isRunning {
            if ContinuousClock.now >= deadline {
                timedOut = true
                if ownGroup { kill(-pid, SIGKILL) }
                kill(pid, SIGKILL)
                break
            }
            try await Task.sleep(for: .milliseconds(200))
        }
        process.waitUntilExit()

        let output = (try? String(contentsOf: logURL, encoding: .utf8)) ?? "(no output)"
        #expect(!timedOut, "scripts/fuzz ran past \(Self.hardTimeout); killed it\n\(output)")
        #expect(process.terminationReason == .exit && process.terminationStatus == 0,
                "scripts/fuzz ended with status \(process.terminationStatus) (\(process.terminationReason == .exit ? "exit" : "signal"))\n\(output)")
        // The final stats line, for the test log.
        if let stats = output.split(separator: "\n").last(where: { $0.hasPrefix("#") && $0.contains("DONE") }) {
            print("fuzz: \(stats)")
        }
    }
}
