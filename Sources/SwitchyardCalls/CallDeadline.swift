import Synchronization
import Switchyard

/// A call's deadline, on either side; the one rule for both: a call still open when its
/// deadline passes ends with `deadlineExceeded`, reason `timed out`; a call that ended
/// first keeps its own status.
///
/// - Client (``CallConfiguration/timeout``): counted from the moment the channel is asked
///   for the call, connect included. A connect still under way when it passes fails with
///   that error; a call still open is ended with it and its stream reset, so the peer's
///   call ends `cancelled` (`Call.terminate(with:)`).
/// - Server (ServerDeadline.swift): counted from the arrival of a request that carried
///   `grpc-timeout`; the call still open ends with the status `deadlineExceeded` sent to
///   the client (`Call.expire(with:)`).
///
/// One timer task per call that has a deadline (none for those without, and nothing per
/// message), on the call's loop (the task's executor, as `ConnectionTimer`'s), cancelled
/// when the call ends; it holds the call only until then.
final class CallDeadline: Sendable {
    let instant: ContinuousClock.Instant
    let timeout: Duration
    /// The clock the deadline is on: the transport's.
    let clock: any TransportClock
    private let timer = Mutex<Timer>(.unarmed)

    private enum Timer {
        case unarmed
        case armed(Task<Void, Never>)
        case disarmed
    }

    /// A deadline `timeout` from now on `clock`.
    init(timeout: Duration, clock: any TransportClock) {
        self.timeout = timeout
        self.clock = clock
        self.instant = clock.now + timeout
    }

    /// The error a call past its deadline ends with.
    var error: TransportError {
        TransportError(code: .deadlineExceeded, reason: .timedOut, message: "the call's deadline passed (timeout \(timeout))")
    }

    /// How long a connect may take within the deadline: the rest of it, or `limit` if
    /// that is sooner.
    func connectTimeout(within limit: Duration) -> Duration {
        min(limit, max(.zero, instant - clock.now))
    }

    /// Whether the deadline has passed.
    var hasPassed: Bool { clock.now >= instant }

    /// Ends `call` with ``error`` when the deadline passes, unless ``disarm()`` came first:
    /// a client's call with `Call.terminate(with:)`, a server's with `Call.expire(with:)`.
    func arm(_ call: Call) {
        timer.withLock { timer in
            guard case .unarmed = timer else { return }
            let error = self.error
            let task = Task(executorPreference: call.eventLoop) { [instant, clock] in
                do {
                    try await clock.sleep(until: instant)
                } catch {
                    return
                }
                if call.role == .client {
                    call.terminate(with: error)
                } else {
                    call.expire(with: error)
                }
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
