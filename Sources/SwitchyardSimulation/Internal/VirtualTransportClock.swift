import Switchyard
import Synchronization

/// A simulated network's `TransportClock`, which its transports and loops hand to the code
/// above them (channels, call servers, TLS): the network's virtual time, its seeded
/// generator, and its own loop as the executor of the tasks that code starts. Deadlines,
/// keepalive, backoff and idle timers thus pass in virtual time, their jitter replays
/// from the seed, and (driven by hand) their tasks run on the network's one thread, in
/// the clock's order.
///
/// Its instants are `ContinuousClock` instants, as every clock's: the moment the network
/// was made (`VirtualClock/origin`) plus the virtual time since.
struct VirtualTransportClock: TransportClock {
    let clock: VirtualClock
    /// Where sleeps wake: the network's own loop, which stops only with the network, so no
    /// sleep is dropped with a transport's loop.
    let timerLoop: SimulatedEventLoop
    /// Where the tasks that code starts run.
    let executor: SimulatedEventLoop

    var now: ContinuousClock.Instant { clock.origin + clock.now }

    func sleep(until deadline: ContinuousClock.Instant) async throws {
        let wake = SleepWake()
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                guard wake.wait(with: continuation) else { return }
                let timer = clock.enqueueTimer({ wake.resume(with: .success(())) }, on: timerLoop, at: deadline - clock.origin)
                if let timer {
                    wake.timer(timer)
                } else {
                    // The network is gone: nothing will ever wake the sleeper.
                    wake.resume(with: .failure(CancellationError()))
                }
            }
        } onCancel: {
            if let timer = wake.resume(with: .failure(CancellationError())) { clock.cancelTimer(timer) }
        }
    }

    func random(in range: ClosedRange<Double>) -> Double {
        clock.random(in: range)
    }

    var taskExecutor: (any TaskExecutor)? { executor }
}

/// One sleep's wake-up: resumed once, by its timer or by the task's cancellation, which
/// may come first (even before the continuation exists).
private final class SleepWake: Sendable {
    private enum State {
        case idle
        case waiting(CheckedContinuation<Void, any Error>, timer: UInt64?)
        case cancelled
        case resumed
    }
    private let state = Mutex(State.idle)

    /// Takes the continuation; false (it is resumed with `CancellationError`) if the task
    /// was cancelled already.
    func wait(with continuation: CheckedContinuation<Void, any Error>) -> Bool {
        let cancelled: Bool = state.withLock { state in
            guard case .idle = state else { return true }
            state = .waiting(continuation, timer: nil)
            return false
        }
        if cancelled { continuation.resume(throwing: CancellationError()) }
        return !cancelled
    }

    /// The timer that will wake the sleeper.
    func timer(_ number: UInt64) {
        state.withLock { state in
            if case .waiting(let continuation, nil) = state { state = .waiting(continuation, timer: number) }
        }
    }

    /// Resumes the sleeper with `result` unless it was resumed; returns its timer, to
    /// cancel.
    @discardableResult
    func resume(with result: Result<Void, any Error>) -> UInt64? {
        let taken: (CheckedContinuation<Void, any Error>, UInt64?)? = state.withLock { state in
            switch state {
            case .idle:
                state = .cancelled
                return nil
            case .waiting(let continuation, let timer):
                state = .resumed
                return (continuation, timer)
            case .cancelled, .resumed:
                return nil
            }
        }
        guard let (continuation, timer) = taken else { return nil }
        continuation.resume(with: result)
        return timer
    }
}
