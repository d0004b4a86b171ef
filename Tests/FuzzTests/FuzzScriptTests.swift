import Foundation
import Subprocess
import Testing

/// Runs `scripts/fuzz` (libFuzzer on its seven targets: the frame decoder, the
/// reachability probe's response parser, the netlink parser and tables, the endpoint
/// parser, the transfer protocol's messages, HPACK's decoder and HTTP/2's frame decoder;
/// see Fuzz/*.swift) for a bounded time, from the seeds checked in under Fuzz/Corpus, and
/// expects it to find nothing.
@Suite struct FuzzScriptTests {
    /// The repository root: this file is `<root>/Tests/FuzzTests/FuzzScriptTests.swift`.
    static let root = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// Shared by the targets: 10 s each.
    static let fuzzSeconds = 70
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

        // swift-subprocess starts the script in a process group of its own; past the
        // hard timeout the run is cancelled, and its teardown kills the whole group (the
        // script and the fuzzer under it).
        var platformOptions = PlatformOptions()
        platformOptions.processGroupID = 0
        platformOptions.teardownSequence = [.send(signal: .kill, toProcessGroup: true, allowedDurationToNextStep: .seconds(2))]
        let configuration = Configuration(
            executable: .path(.init(script)), arguments: [],
            environment: .inherit.updating(["FUZZ_SECONDS": String(Self.fuzzSeconds)]),
            workingDirectory: .init(Self.root.path), platformOptions: platformOptions)
        let logDescriptor = log.fileDescriptor
        let status: TerminationStatus? = try await withThrowingTaskGroup(of: TerminationStatus?.self) { group in
            group.addTask {
                try await run(
                    configuration, input: .none,
                    output: .fileDescriptor(.init(rawValue: logDescriptor), closeAfterSpawningProcess: false),
                    error: .combinedWithOutput
                ).terminationStatus
            }
            group.addTask {
                try await Task.sleep(for: Self.hardTimeout)
                return nil
            }
            let first = try await group.next() ?? nil
            group.cancelAll()
            return first
        }

        let output = (try? String(contentsOf: logURL, encoding: .utf8)) ?? "(no output)"
        #expect(status != nil, "scripts/fuzz ran past \(Self.hardTimeout); killed it\n\(output)")
        if let status {
            #expect(status == .exited(0), "scripts/fuzz ended with \(status)\n\(output)")
        }
        // The final stats line, for the test log.
        if let stats = output.split(separator: "\n").last(where: { $0.hasPrefix("#") && $0.contains("DONE") }) {
            print("fuzz: \(stats)")
        }
    }
}
