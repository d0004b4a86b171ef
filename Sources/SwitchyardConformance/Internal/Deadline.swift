import Switchyard
import Synchronization

/// How long, in seconds, a wait for what comes in milliseconds (the next bytes of an
/// echo, the next event of a call, a callback) may see nothing move before it fails and
/// says how far it got. Generous for a debug build under a sanitizer on a busy machine;
/// a backend that loses bytes fails in about this time, not in a scenario's whole time
/// limit.
let quietLimit: Double = 2

/// Runs `body` in its own task and returns its result, or returns `onTimeout()`'s error
/// once `limit` passes, whichever comes first.
///
/// Unlike a task group, this never waits for `body` to finish: a body stuck on a
/// continuation that ignores cancellation is cancelled and abandoned, so the caller
/// cannot hang. (The kit then shuts the transports down, which ends what is stuck.)
///
/// Its timer is one sleep, not a watchdog that wakes every few milliseconds: a scenario
/// runs inside one of these for its whole time limit, and some (descriptor exhaustion)
/// must leave the runtime's thread pool idle while the process has no descriptor to spare
/// (libdispatch, woken then, can crash the process when it cannot open a file).
func raceAgainstDeadline<T: Sendable>(
    _ limit: Duration, clock: any TransportClock = KitClock.current,
    onTimeout: @escaping @Sendable () -> any Error,
    _ body: @escaping @Sendable () async throws -> T
) async throws -> T {
    try await race(body, on: clock.taskExecutor) {
        try? await clock.sleep(for: limit)
        return Task.isCancelled ? nil : onTimeout()
    }
}

/// Runs `body` in its own task and returns its result, or the error `check` returns
/// first: the watchdog asks it every few milliseconds, with the time, whether the wait
/// is over (for a wait that ends when nothing has moved for a while, ``WaitProgress``).
/// A body that does not finish is cancelled and abandoned, as in ``raceAgainstDeadline``.
/// For the short waits of a scenario's steps only, never around a window out of
/// descriptors (see ``raceAgainstDeadline``).
func raceAgainstWatchdog<T: Sendable>(
    _ check: @escaping @Sendable (ContinuousClock.Instant) -> (any Error)?,
    _ body: @escaping @Sendable () async throws -> T
) async throws -> T {
    try await race(body, on: KitClock.taskExecutor) {
        while !Task.isCancelled {
            if let error = check(KitClock.now) { return error }
            try? await KitClock.sleep(for: watchdogInterval)
        }
        return nil
    }
}

/// Runs `body` and `timer` in tasks of their own; returns `body`'s result, or fails with
/// the error `timer` returns (`nil`: it was cancelled), whichever comes first. The loser
/// is cancelled; a `body` that ignores cancellation is abandoned, never awaited.
private func race<T: Sendable>(
    _ body: @escaping @Sendable () async throws -> T, on executor: (any TaskExecutor)?,
    timer: @escaping @Sendable () async -> (any Error)?
) async throws -> T {
    let gate = ResumeOnce<T>()
    let work = Task(executorPreference: executor) { try await body() }
    return try await withTaskCancellationHandler {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            gate.install(continuation)
            let timing = Task(executorPreference: executor) {
                if let error = await timer(), gate.resume(with: .failure(error)) { work.cancel() }
            }
            Task(executorPreference: executor) {
                let result = await work.result
                timing.cancel()
                gate.resume(with: result)
            }
        }
    } onCancel: {
        work.cancel()
    }
}

/// How often a watchdog looks: far below every bound the kit waits with.
private let watchdogInterval: Duration = .milliseconds(10)

/// What a wait has seen so far, and when that last changed: the wait fails once it has
/// not changed for its quiet limit, and its failure quotes it ("99 of 100 bytes arrived").
final class WaitProgress: Sendable {
    private let state: Mutex<(seen: String, changed: ContinuousClock.Instant)>

    init(_ seen: String) {
        state = Mutex((seen, KitClock.now))
    }

    /// Something moved: `seen` says what the wait has seen now.
    func advance(_ seen: String) {
        let now = KitClock.now
        state.withLock { $0 = (seen, now) }
    }

    /// What was seen, and when it last changed.
    var snapshot: (seen: String, changed: ContinuousClock.Instant) {
        state.withLock { $0 }
    }
}

/// A continuation that is resumed by whichever party comes first.
private final class ResumeOnce<T: Sendable>: Sendable {
    private let continuation = Mutex<CheckedContinuation<T, any Error>?>(nil)

    func install(_ continuation: CheckedContinuation<T, any Error>) {
        self.continuation.withLock { $0 = continuation }
    }

    /// Resumes the continuation if no one has; returns whether this call did.
    @discardableResult
    func resume(with result: Result<T, any Error>) -> Bool {
        let taken = continuation.withLock { current in
            let taken = current
            current = nil
            return taken
        }
        taken?.resume(with: result)
        return taken != nil
    }
}
