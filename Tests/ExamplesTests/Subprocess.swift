import Foundation
import Subprocess
import Synchronization
import Testing

/// A child process with captured output and a hard deadline, on swift-subprocess.
///
/// swift-subprocess does the process work: spawning, the pipes, draining standard output
/// and standard error as they come (``Execution/standardOutput``), signals through the
/// child's pidfd (no race with a reused pid), reaping, the exit status, and ending the
/// reads when the child exits even if a grandchild still holds its pipes. Its `run` is
/// scoped, though (the child lives within one async call), and a test here holds a
/// child as an object: starts it in a synchronous `init`, signals it mid-run, reads its
/// output while it runs, and stops it later. So this type runs `run` in a task of its
/// own and keeps, as its own code, only what that scope does not give:
/// - the output gathered so far (``stdout``, ``stderr``, ``waitForLine(containing:timeout:)``),
///   read while the child runs;
/// - signals asked for from outside the scope (``send(_:)``), queued until the child has
///   started and passed to ``Execution/send(signal:toProcessGroup:)`` within it;
/// - whether the child still runs (``isRunning``), from its pidfd: swift-subprocess
///   waits for the exit inside `run` only, and `isRunning` is synchronous;
/// - the hard deadline (SIGKILL past it) and the waits with a timeout.
///
/// Every wait has a deadline; a child that outlives it is killed (SIGKILL) and the test
/// records an issue.
final class Subprocess: Sendable {
    let name: String
    /// When the child is killed regardless of what the test is doing.
    let deadline: ContinuousClock.Instant
    private let child: Child

    /// Starts `executable` with `arguments`. `environment` entries are added to (or, with
    /// a `nil` value, removed from) this process's environment.
    /// - Throws: if `executable` is not an executable file. The child starts in the
    ///   background: everything else waits for it (``pid`` at most until it is started).
    ///   `init` does not wait itself: swift-subprocess spawns in an async call, and a
    ///   synchronous `init` blocking on it could hold the threads (two on a two-core
    ///   machine) that the spawn needs.
    init(
        _ executable: String, _ arguments: [String], environment: [String: String?] = [:],
        name: String? = nil, hardTimeout: Duration = .seconds(60)
    ) throws {
        self.name = name ?? (executable as NSString).lastPathComponent
        self.deadline = .now + hardTimeout
        guard FileManager.default.isExecutableFile(atPath: executable) else {
            throw SubprocessFailure("cannot start \(self.name): \(executable) is not an executable file")
        }
        var updates: [Environment.Key: String?] = [:]
        for (key, value) in environment {
            guard let key = Environment.Key(rawValue: key) else { throw SubprocessFailure("bad environment name '\(key)'") }
            updates[key] = value
        }
        let child = Child()
        self.child = child
        let deadline = self.deadline
        // Not a child of the test's task: the process outlives any one call of the test.
        Task.detached {
            await child.run(
                Configuration(
                    executable: .path(.init(executable)), arguments: Arguments(arguments),
                    environment: Environment.inherit.updating(updates)),
                deadline: deadline)
        }
    }

    deinit {
        killIfRunning()
    }

    /// The child's process id, once it has started (this waits for that, which takes
    /// moments after `init`); -1 if it could not be started.
    var pid: Int32 {
        while true {
            if let pid = child.state.withLock({ $0.pid ?? ($0.ending == nil ? nil : -1) }) { return pid }
            usleep(1000)
        }
    }

    var isRunning: Bool { child.isRunning }
    var stdout: String { String(decoding: child.state.withLock { $0.stdout }, as: UTF8.self) }
    var stderr: String { String(decoding: child.state.withLock { $0.stderr }, as: UTF8.self) }

    /// The first line of standard output that contains `marker`, once it arrives.
    /// - Throws: if the child exits first or `timeout` passes.
    func waitForLine(containing marker: String, timeout: Duration = .seconds(20)) async throws -> String {
        let until = min(ContinuousClock.now + timeout, deadline)
        while true {
            // Whether the output was complete before it was read: then a missing line is missing.
            let ended = child.state.withLock { $0.ending != nil }
            let lines = stdout.split(separator: "\n", omittingEmptySubsequences: false)
            // Only complete lines (the last element is what follows the last newline).
            if let line = lines.dropLast().first(where: { $0.contains(marker) }) { return String(line) }
            if ended {
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
    /// A child that could not be started ends `exit(127)`, with an issue recorded.
    @discardableResult
    func wait(timeout: Duration = .seconds(60)) async -> Ending {
        let until = min(ContinuousClock.now + timeout, deadline)
        var killed = false
        while true {
            let (ending, failure) = child.state.withLock { ($0.ending, $0.startFailure) }
            if let ending {
                if let failure { Issue.record("\(name) could not be started: \(failure)") }
                return ending
            }
            if !killed, ContinuousClock.now >= until {
                killed = true
                child.send(SIGKILL)
                Issue.record("\(name) did not end within \(timeout); killed it\n\(report)")
            }
            try? await Task.sleep(for: .milliseconds(10))
        }
    }

    /// Sends `signal` (if the child still runs) and waits for it to end.
    @discardableResult
    func stop(with signal: Int32 = SIGTERM, timeout: Duration = .seconds(20)) async -> Ending {
        child.send(signal)
        return await wait(timeout: timeout)
    }

    /// The child's process id.
    var processIdentifier: Int32 { pid }

    /// Sends `signal` to the child if it still runs, without waiting. Before the child
    /// has started, the signal waits for it (signals keep their order).
    func send(_ signal: Int32) {
        child.send(signal)
    }

    /// Kills the child if it still runs; for `defer`.
    func killIfRunning() {
        child.send(SIGKILL)
    }

    /// Both outputs, for failure messages.
    var report: String {
        "--- \(name) stdout ---\n\(stdout)--- \(name) stderr ---\n\(stderr)---"
    }

    /// The child as the task that runs it and the test's calls share it.
    private final class Child: Sendable {
        struct State {
            var stdout: [UInt8] = []
            var stderr: [UInt8] = []
            var pid: Int32?
            /// Sends a signal within `run`'s scope; nil before the child starts and once
            /// it has exited.
            var signal: (@Sendable (Int32) -> Void)?
            /// Whether the child has exited; nil while `signal` is nil.
            var hasExited: (@Sendable () -> Bool)?
            /// Signals asked for before the child started.
            var pending: [Int32] = []
            var exited = false
            /// Set once `run` has returned: the output is complete.
            var ending: Ending?
            var startFailure: String?
        }

        let state = Mutex(State())

        var isRunning: Bool {
            // Checked outside the lock: it may not block on it, and it is safe to call
            // late (a pidfd stays open until `run` returns).
            let (exited, check) = state.withLock { ($0.exited || $0.ending != nil, $0.hasExited) }
            if exited { return false }
            return !(check?() ?? false)
        }

        func send(_ signal: Int32) {
            state.withLock { state in
                if let send = state.signal {
                    send(signal)
                } else if state.pid == nil, state.ending == nil {
                    state.pending.append(signal)
                }
            }
        }

        func run(_ configuration: Configuration, deadline: ContinuousClock.Instant) async {
            do {
                let result = try await runSubprocess(configuration) { execution in
                    let identifier = execution.processIdentifier
                    let hasExited: @Sendable () -> Bool = { Self.hasExited(identifier) }
                    let pending = state.withLock { state in
                        state.pid = identifier.value
                        state.signal = { signal in try? execution.send(signal: Signal(rawValue: signal)) }
                        state.hasExited = hasExited
                        defer { state.pending = [] }
                        return state.pending
                    }
                    for signal in pending { try? execution.send(signal: Signal(rawValue: signal)) }
                    await withTaskGroup(of: Void.self) { group in
                        group.addTask { await self.drain(execution.standardOutput, isStandardError: false) }
                        group.addTask { await self.drain(execution.standardError, isStandardError: true) }
                        // The hard deadline holds even if the test forgets to wait.
                        var killed = false
                        while !hasExited() {
                            if !killed, ContinuousClock.now >= deadline {
                                killed = true
                                try? execution.send(signal: .kill)
                            }
                            try? await Task.sleep(for: .milliseconds(10))
                        }
                        state.withLock { state in
                            state.exited = true
                            state.signal = nil
                            state.hasExited = nil
                        }
                    }
                }
                state.withLock { state in
                    switch result.terminationStatus {
                    case .exited(let code): state.ending = .exit(code)
                    case .signaled(let signal): state.ending = .signal(signal)
                    }
                }
            } catch {
                state.withLock { state in
                    state.startFailure = "\(error)"
                    state.exited = true
                    state.signal = nil
                    state.hasExited = nil
                    state.ending = .exit(127)
                }
            }
        }

        private func drain(_ output: SubprocessOutputSequence, isStandardError: Bool) async {
            func append(_ bytes: some Sequence<UInt8>) {
                state.withLock { if isStandardError { $0.stderr += bytes } else { $0.stdout += bytes } }
            }
            do {
                for try await chunk in output {
                    chunk.withUnsafeBytes { append($0) }
                }
            } catch {
                append("\n[reading the output failed: \(error)]\n".utf8)
            }
        }

        /// Whether the child has exited, without reaping it: its pidfd is readable then.
        /// Without a pidfd (kernels before 5.3), `waitid` with `WNOWAIT` tells.
        private static func hasExited(_ identifier: ProcessIdentifier) -> Bool {
            if identifier.processDescriptor >= 0 {
                var entry = pollfd(fd: identifier.processDescriptor, events: Int16(POLLIN), revents: 0)
                return poll(&entry, 1, 0) == 1
            }
            var info = siginfo_t()
            let rc = waitid(P_PID, id_t(identifier.value), &info, WEXITED | WNOHANG | WNOWAIT)
            return rc != 0 || info._sifields._sigchld.si_pid != 0
        }
    }
}

/// swift-subprocess's `run`, under a name that the type `Subprocess` (which shadows the
/// module's name in this target) does not hide.
private func runSubprocess<Result>(
    _ configuration: Configuration,
    body: (Execution<NoInput, SequenceOutput, SequenceOutput>) async throws -> Result
) async throws -> ExecutionResult<Result, SequenceOutput, SequenceOutput> {
    try await run(configuration, input: .none, output: .sequence, error: .sequence, body: body)
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
