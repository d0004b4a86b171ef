/// A server connection's maximum idle time and age (``CallServerConfiguration``, gRPC's
/// A9), without clocks or I/O: the driver asks at the instants it is told, and does what
/// it answers.
///
/// - Serving: past the age deadline, or with no call open for the maximum idle time,
///   the answer is a graceful GOAWAY (open calls go on, new ones are refused). While a
///   call is open the driver looks again one idle period later: a connection that went
///   idle after that look cannot reach its idle deadline before the next one.
/// - Going away: the GOAWAY's PING round trip lets requests already in flight arrive; a
///   client that never answers it (a dead path) would hold the drain forever, so one
///   ping timeout later the answer is to say GOAWAY again, which ends the round trip
///   (`H2Connection` then refuses streams above the last it took, and closes once none is
///   open). Past the grace, the answer is to close, ending the calls still open.
package struct ServerConnectionLifetime: Sendable {
    package enum Reason: Sendable, Hashable {
        /// No call open for the maximum idle time.
        case idle
        /// The connection reached its maximum age.
        case age
    }

    package enum Action: Sendable, Hashable {
        /// Nothing to do now; look again at `until` (nil: no timer needed).
        case wait(until: ContinuousClock.Instant?)
        /// Begin a graceful GOAWAY now, then look again at `until`.
        case goAway(Reason, until: ContinuousClock.Instant?)
        /// The GOAWAY's PING went unanswered: say GOAWAY again (the final one), then look
        /// again at `until`.
        case finishGoAway(until: ContinuousClock.Instant?)
        /// The grace is over: close the connection, ending its calls.
        case close
    }

    private let maximumIdle: Duration?
    private let ageDeadline: ContinuousClock.Instant?
    private let grace: Duration?
    private let pingTimeout: Duration
    private var phase: Phase = .serving

    private enum Phase: Sendable {
        case serving
        case goingAway(finishAt: ContinuousClock.Instant?, closeAt: ContinuousClock.Instant?)
        case done
    }

    /// A connection opened at `opened`, that may idle `maximumIdle` and live `maximumAge`
    /// (jitter already applied), with `grace` for its calls after a GOAWAY and
    /// `pingTimeout` for the GOAWAY's PING.
    package init(
        maximumIdle: Duration?, maximumAge: Duration?, grace: Duration?, pingTimeout: Duration, opened: ContinuousClock.Instant
    ) {
        self.maximumIdle = maximumIdle
        self.ageDeadline = maximumAge.map { opened + $0 }
        self.grace = grace
        self.pingTimeout = pingTimeout
    }

    /// Whether there is anything to watch at all.
    package var isActive: Bool { maximumIdle != nil || ageDeadline != nil }

    /// What to do at `now`; `idleSince` is since when no stream has been open (nil while
    /// one is).
    package mutating func check(now: ContinuousClock.Instant, idleSince: ContinuousClock.Instant?) -> Action {
        switch phase {
        case .done:
            return .wait(until: nil)
        case .goingAway(let finishAt, let closeAt):
            if let closeAt, now >= closeAt {
                phase = .done
                return .close
            }
            if let finishAt, now >= finishAt {
                phase = .goingAway(finishAt: nil, closeAt: closeAt)
                return .finishGoAway(until: closeAt)
            }
            return .wait(until: earliest(finishAt, closeAt))
        case .serving:
            let reason: Reason
            if let ageDeadline, now >= ageDeadline {
                reason = .age
            } else if let maximumIdle, let idleSince, now >= idleSince + maximumIdle {
                reason = .idle
            } else {
                let idleCheck = maximumIdle.map { idle in idleSince.map { $0 + idle } ?? now + idle }
                return .wait(until: earliest(ageDeadline, idleCheck))
            }
            let finishAt = now + pingTimeout
            let closeAt = grace.map { now + $0 }
            phase = .goingAway(finishAt: finishAt, closeAt: closeAt)
            return .goAway(reason, until: earliest(finishAt, closeAt))
        }
    }

    private func earliest(_ a: ContinuousClock.Instant?, _ b: ContinuousClock.Instant?) -> ContinuousClock.Instant? {
        switch (a, b) {
        case (let a?, let b?): min(a, b)
        case (let a?, nil): a
        case (nil, let b): b
        }
    }
}
