import Glibc
import Switchyard
import Synchronization

extension ConformanceContext {
    /// Waits until everything already queued on `loop` has run (a hop there and back).
    /// Work a caller handed to a connection from off its loop (a `stopReading()`, a
    /// write) is queued in call order, so after this it has taken effect.
    func barrier(on loop: any TransportEventLoop, _ what: String, file: String = #fileID, line: Int = #line) async throws {
        try await within(seconds: 5, "a hop to the event loop (\(what))", file: file, line: line) {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                loop.execute { continuation.resume() }
            }
        }
    }

    /// Reads once from `connection` and fails unless the read ends the stream (`nil`) or
    /// throws `unavailable`/`reset`; returns which of the two it was.
    @discardableResult
    func expectEndOfStreamOrReset(
        _ connection: AsyncConnection, _ what: String, seconds: Double = 10, file: String = #fileID, line: Int = #line
    ) async throws -> String {
        let outcome: Result<[UInt8]?, any Error> = try await within(seconds: seconds, what, file: file, line: line) {
            do { return .success(try await connection.read()) } catch { return .failure(error) }
        }
        switch outcome {
        case .success(nil):
            return "end of stream"
        case .success(let bytes?):
            throw failure("\(what): expected end of stream or unavailable (reset), received \(bytes.count) bytes", file: file, line: line)
        case .failure(let error):
            try expectError(error, code: .unavailable, reason: .reset, "\(what) (expected end of stream or unavailable (reset))", file: file, line: line)
            return "unavailable (reset)"
        }
    }

    /// Wraps an unexpected ``TransportError`` from a step in a failure naming the step.
    func step<T: Sendable>(
        _ what: String, seconds: Double = 30, file: String = #fileID, line: Int = #line,
        _ body: @escaping @Sendable () async throws -> T
    ) async throws -> T {
        do {
            return try await within(seconds: seconds, what, file: file, line: line, body)
        } catch let error as TransportError {
            throw failure("\(what) failed: \(error)", file: file, line: line)
        }
    }
}

extension ConformanceContext {
    /// ``step(_:seconds:file:line:_:)`` for a step whose parts come in milliseconds: it
    /// reports what it has seen to `progress`, and fails once that did not move for
    /// ``quietLimit`` (quoting it), or after `seconds` in all.
    func step<T: Sendable>(
        _ what: String, seconds: Double = 30, progress: WaitProgress, file: String = #fileID, line: Int = #line,
        _ body: @escaping @Sendable () async throws -> T
    ) async throws -> T {
        do {
            return try await within(seconds: seconds, what, progress: progress, file: file, line: line, body)
        } catch let error as TransportError {
            throw failure("\(what) failed: \(error); \(progress.snapshot.seen)", file: file, line: line)
        }
    }
}

/// Write completions, recorded in the order they ran, from any thread.
final class CompletionLog: Sendable {
    struct Entry: Sendable {
        var index: Int
        var error: TransportError?
    }
    private let entries = Mutex<[Entry]>([])
    private let bytes = Mutex<(completed: Int, last: ContinuousClock.Instant)>((0, KitClock.now))

    init() {}

    func record(_ index: Int, byteCount: Int = 0, _ error: TransportError?) {
        entries.withLock { $0.append(Entry(index: index, error: error)) }
        let now = KitClock.now
        if error == nil {
            bytes.withLock { $0.completed += byteCount; $0.last = now }
        } else {
            bytes.withLock { $0.last = now }
        }
    }

    var all: [Entry] { entries.withLock { $0 } }
    var count: Int { entries.withLock { $0.count } }
    /// Bytes whose write completed without an error.
    var completedBytes: Int { bytes.withLock { $0.completed } }
    /// When the last completion ran.
    var lastCompletion: ContinuousClock.Instant { bytes.withLock { $0.last } }
}

extension ConformanceContext {
    /// Waits `duration` and fails if the process used half a core or more meanwhile: a
    /// busy loop while `what` (everything waits, so a backend should use next to none).
    /// In virtual time (a simulated network) there is no wall-clock time to hold the CPU
    /// to: it waits the duration and checks nothing.
    func expectNoBusyLoop(for duration: Duration, while what: String, file: String = #fileID, line: Int = #line) async throws {
        if KitClock.simulatedNetwork != nil {
            try await KitClock.sleep(for: duration)
            return
        }
        let cpuBefore = processCPUTime()
        let wallBefore = ContinuousClock.now
        try await Task.sleep(for: duration)
        let cpu = processCPUTime() - cpuBefore
        let wall = ContinuousClock.now - wallBefore
        try expect(cpu < wall * 0.5, "the process used \(cpu) of CPU in \(wall) while \(what): a busy loop", file: file, line: line)
    }
}

/// CPU time (user + system) the process has used.
func processCPUTime() -> Duration {
    var usage = rusage()
    getrusage(Int32(RUSAGE_SELF.rawValue), &usage)
    func duration(_ time: timeval) -> Duration {
        .seconds(Int64(time.tv_sec)) + .microseconds(Int64(time.tv_usec))
    }
    return duration(usage.ru_utime) + duration(usage.ru_stime)
}

/// Whether this host can bind the IPv6 loopback address (containers often cannot).
func hostHasIPv6Loopback() -> Bool {
    let fd = socket(AF_INET6, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { return false }
    defer { close(fd) }
    var address = sockaddr_in6()
    address.sin6_family = sa_family_t(AF_INET6)
    address.sin6_addr = in6addr_loopback
    return withUnsafePointer(to: &address) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in6>.size)) == 0
        }
    }
}
