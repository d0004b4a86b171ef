import Synchronization
import Switchyard

/// A call's deadline (``CallConfiguration/timeout``): counted from the moment the channel is
/// asked for the call, connect included. A connect still under way when it passes fails
/// with `deadlineExceeded`, reason `timed out`; a call still open then is ended with that
/// error (its stream reset, so the peer's call ends `cancelled`). A call that ended
/// first keeps its own status.
///
/// One timer task per call that has a deadline (none for those without), cancelled when
/// the call ends; it holds the call only until then.
final class CallDeadline: Sendable {
    let instant: ContinuousClock.Instant
    let timeout: Duration
    private let timer = Mutex<Timer>(.unarmed)

    private enum Timer {
        case unarmed
        case armed(Task<Void, Never>)
        case disarmed
    }

    init(timeout: Duration) {
        self.timeout = timeout
        self.instant = ContinuousClock.now + timeout
    }

    /// The error a call past its deadline ends with.
    var error: TransportError {
        TransportError(code: .deadlineExceeded, reason: .timedOut, message: "the call's deadline passed (timeout \(timeout))")
    }

    /// How long a connect may take within the deadline: the rest of it, or `limit` if
    /// that is sooner.
    func connectTimeout(within limit: Duration) -> Duration {
        min(limit, max(.zero, instant - ContinuousClock.now))
    }

    /// Whether the deadline has passed.
    var hasPassed: Bool { ContinuousClock.now >= instant }

    /// Ends `call` with ``error`` when the deadline passes, unless ``disarm()`` came first.
    func arm(_ call: Call) {
        timer.withLock { timer in
            guard case .unarmed = timer else { return }
            let error = self.error
            let task = Task { [instant] in
                do {
                    try await Task.sleep(until: instant, clock: .continuous)
                } catch {
                    return
                }
                call.terminate(with: error)
            }
            timer = .armed(task)
        }
    }

    /// The call ended: the timer lets go of it.
    func disarm() {
        timer.withLock { timer in
            if case .armed(let task) = timer { task.cancel() }
            timer = .disarmed
        }
    }
}
