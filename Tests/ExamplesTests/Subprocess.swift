import Foundation
import Synchronization
import Testing

/// A child process with captured output and a hard deadline.
///
/// Output is drained by one thread per pipe into buffers behind a lock, so a child never
/// blocks on a full pipe and tests can wait for a line with a timeout. Every wait has a
/// deadline; a child that outlives it is killed (SIGKILL) and the test records an issue.
///
/// `@unchecked Sendable`: `Process` is not marked Sendable; this type only reads its
/// thread-safe state (`isRunning`, `processIdentifier`, termination) after `run()`.
final class Subprocess: @unchecked Sendable {
    let name: String
    private let process = Process()
    private let output = Mutex<(stdout: Data, stderr: Data, openPipes: Int)>((Data(), Data(), 2))
    /// When the child is killed regardless of what the test is doing.
    let deadline: ContinuousClock.Instant

    /// Starts `executable` with `arguments`. `environment` entries are added to (or, with
    /// a `nil` value, removed from) this process's environment.
    init(
        _ executable: String, _ arguments: [String], environment: [String: String?] = [:],
        name: String? = nil, hardTimeout: Duration = .seconds(60)
    ) throws {
        self.name = name ?? (executable as NSString).lastPathComponent
        self.deadline = .now + hardTimeout
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        var env = ProcessInfo.processInfo.environment
        for (key, value) in environment { env[key] = value }
        process.environment = env
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        process.standardInput = FileHandle.nullDevice
        try process.run()
        drain(out.fileHandleForReading, isStandardError: false)
        drain(err.fileHandleForReading, isStandardError: true)
        // The hard deadline holds even if the test forgets to wait.
        let pid = process.processIdentifier
        let watchdog = Thread { [weak self] in
            while let self, self.process.isRunning {
                if ContinuousClock.now >= self.deadline {
                    kill(pid, SIGKILL)
                    return
                }
                Thread.sleep(forTimeInterval: 0.05)
            }
        }
        watchdog.start()
    }

    deinit {
        killIfRunning()
    }

    private func drain(_ handle: FileHandle, isStandardError: Bool) {
        let thread = Thread { [self] in
            while true {
                let chunk = handle.availableData
                if chunk.isEmpty { break }
                output.withLock { if isStandardError { $0.stderr.append(chunk) } else { $0.stdout.append(chunk) } }
            }
            output.withLock { $0.openPipes -= 1 }
        }
        thread.start()
    }

    var pid: Int32 { process.processIdentifier }
    var isRunning: Bool { process.isRunning }
    var stdout: String { String(decoding: output.withLock { $0.stdout }, as: UTF8.self) }
    var stderr: String { String(decoding: output.withLock { $0.stderr }, as: UTF8.self) }

    /// The first line of standard output that contains `marker`, once it arrives.
    /// - Throws: if the child exits first or `timeout` passes.
    func waitForLine(containing marker: String, timeout: Duration = .seconds(20)) async throws -> String {
        let until = min(ContinuousClock.now + timeout, deadline)
        while true {
            let lines = stdout.split(separator: "\n", omittingEmptySubsequences: false)
            // Only complete lines (the last element is what follows the last newline).
            if let line = lines.dropLast().first(where: { $0.contains(marker) }) { return String(line) }
            if !isRunning, output.withLock({ $0.openPipes == 0 }) {
                throw SubprocessFailure("\(name) exited before printing '\(marker)'\n\(report)")
            }
            if ContinuousClock.now >= until {
                throw SubprocessFailure("\(name) printed no line with '\(marker)' within \(timeout)\n\(report)")
            }
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    /// How the child ended.
    enum Ending: Equatable, CustomStringConvertible {
        case exit(Int32)
        case signal(Int32)
        var description: String {
            switch self {
            case .exit(let status): "exit \(status)"
            case .signal(let signal): "killed by signal \(signal)"
            }
        }
    }

    /// Waits for the child to end; past `timeout` (or the hard deadline) it is killed
    /// with SIGKILL, and the test records an issue. Output is complete on return.
    @discardableResult
    func wait(timeout: Duration = .seconds(60)) async -> Ending {
        let until = min(ContinuousClock.now + timeout, deadline)
        while process.isRunning {
            if ContinuousClock.now >= until {
                kill(process.processIdentifier, SIGKILL)
                Issue.record("\(name) did not end within \(timeout); killed it\n\(report)")
                process.waitUntilExit()
                break
            }
            try? await Task.sleep(for: .milliseconds(10))
        }
        process.waitUntilExit()
        // Let the drain threads reach end of file (the pipes close with the child,
        // unless a grandchild holds them; then give up after a moment).
        let drained = ContinuousClock.now + .seconds(5)
        while output.withLock({ $0.openPipes > 0 }), ContinuousClock.now < drained {
            try? await Task.sleep(for: .milliseconds(5))
        }
        switch process.terminationReason {
        case .exit: return .exit(process.terminationStatus)
        case .uncaughtSignal: return .signal(process.terminationStatus)
        @unknown default: return .exit(process.terminationStatus)
        }
    }

    /// Sends `signal` (if the child still runs) and waits for it to end.
    @discardableResult
    func stop(with signal: Int32 = SIGTERM, timeout: Duration = .seconds(20)) async -> Ending {
        if process.isRunning { kill(process.processIdentifier, signal) }
        return await wait(timeout: timeout)
    }

    /// The child's process id.
    var processIdentifier: Int32 { process.processIdentifier }

    /// Sends `signal` to the child if it still runs, without waiting.
    func send(_ signal: Int32) {
        if process.isRunning { kill(process.processIdentifier, signal) }
    }

    /// Kills the child if it still runs; for `defer`.
    func killIfRunning() {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
    }

    /// Both outputs, for failure messages.
    var report: String {
        "--- \(name) stdout ---\n\(stdout)--- \(name) stderr ---\n\(stderr)---"
    }
}

struct SubprocessFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// Where the example executables are: next to the test bundle (the build products
/// directory, whatever `--scratch-path` or configuration built them), or where
/// `SWITCHYARD_EXAMPLES_BIN` points.
enum Products {
    static let directory: String? = {
        let fileManager = FileManager.default
        var candidates: [String] = []
        if let override = ProcessInfo.processInfo.environment["SWITCHYARD_EXAMPLES_BIN"] {
            candidates.append(override)
        }
        if let exe = try? fileManager.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
            candidates.append((exe as NSString).deletingLastPathComponent)
        }
        if let first = CommandLine.arguments.first, first.contains("/") {
            candidates.append(((first as NSString).standardizingPath as NSString).deletingLastPathComponent)
        }
        candidates.append(Bundle.main.bundlePath)
        candidates.append(fileManager.currentDirectoryPath + "/.build/debug")
        // The test binary may sit inside a bundle directory (`*.xctest/...`): walk up.
        var expanded: [String] = []
        for candidate in candidates {
            var path = candidate
            for _ in 0..<4 {
                expanded.append(path)
                path = (path as NSString).deletingLastPathComponent
                if path == "/" || path.isEmpty { break }
            }
        }
        return expanded.first { fileManager.isExecutableFile(atPath: $0 + "/echo-server") && fileManager.isExecutableFile(atPath: $0 + "/echo-client") }
    }()

    static func path(_ name: String) throws -> String {
        guard let directory else {
            throw SubprocessFailure("""
                cannot find the \(name) executable next to the tests; build the examples \
                (swift build --product echo-server; swift build --product echo-client) or \
                set SWITCHYARD_EXAMPLES_BIN to the directory that holds them
                """)
        }
        return directory + "/" + name
    }
}

/// python3, found on PATH.
enum Python {
    static let path: String? = {
        let paths = (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":")
        return paths.map { "\($0)/python3" }.first { FileManager.default.isExecutableFile(atPath: $0) }
    }()

    /// Runs `script` (given as `-c`) with `arguments`.
    static func start(_ script: String, _ arguments: [String], name: String) throws -> Subprocess {
        guard let path else { throw SubprocessFailure("python3 is not on PATH; these tests need a peer Switchyard did not write") }
        return try Subprocess(path, ["-u", "-c", script] + arguments, name: name)
    }
}
