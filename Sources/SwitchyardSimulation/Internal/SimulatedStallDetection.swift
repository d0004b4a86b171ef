import DequeModule
import SwitchyardBackendKit

/// The kernel's stall detection on one end of a simulated connection, as a transport
/// made with a stall timeout (`TransportConfiguration/stallTimeout`) sets it on a real
/// socket (`StallSettings`): `TCP_USER_TIMEOUT` and keepalive, in virtual time.
///
/// - Bytes sent are acknowledged by the peer's end when they arrive (an
///   `SimulatedSegment/ack(_:)`, which travels the link and can vanish like any
///   segment). Bytes unacknowledged for the stall timeout end the connection as
///   stalled (`TCP_USER_TIMEOUT`).
/// - With nothing unacknowledged, a connection that heard nothing from its peer for the
///   keepalive idle time sends a probe (`SimulatedSegment/probe`), which the peer's end
///   answers with an empty acknowledgement; then one every keepalive interval. Once the
///   probes went unanswered `keepaliveCount` times, or for the stall timeout since the
///   peer was last heard (the kernel's user timeout bounds keepalive too), the
///   connection ends as stalled.
///
/// A value type the connection owns and calls on its loop; it decides, the connection
/// sends and schedules.
struct SimulatedStallDetector {
    /// What the connection does after a check.
    enum Step: Equatable {
        /// Nothing now; check again at this virtual time.
        case wait(until: Duration)
        /// Send a probe now; check again at this virtual time.
        case probe(thenCheckAt: Duration)
        /// End the connection as stalled; the text says which detector found it.
        case stalled(String)
    }

    let settings: StallSettings
    /// When the peer was last heard from (any segment).
    private var lastHeard: Duration
    /// The bytes sent and not yet acknowledged, as (stream offset of their end, when
    /// they were sent), oldest first.
    private var outstanding = Deque<(end: Int, sentAt: Duration)>()
    private var sentBytes = 0
    private var acknowledgedBytes = 0
    private var probesUnanswered = 0
    private var lastProbeAt: Duration = .zero

    init(settings: StallSettings, openedAt now: Duration) {
        self.settings = settings
        self.lastHeard = now
    }

    /// `count` bytes were sent at `now`.
    mutating func sent(_ count: Int, at now: Duration) {
        sentBytes += count
        outstanding.append((sentBytes, now))
    }

    /// A segment arrived from the peer at `now`: it is alive.
    mutating func heard(at now: Duration) {
        lastHeard = now
        probesUnanswered = 0
    }

    /// The peer acknowledged `count` more bytes (in order, as they were sent).
    mutating func acknowledged(_ count: Int) {
        acknowledgedBytes += count
        while let first = outstanding.first, first.end <= acknowledgedBytes { outstanding.removeFirst() }
    }

    /// What is due at `now`.
    mutating func check(at now: Duration) -> Step {
        if let oldest = outstanding.first?.sentAt {
            let deadline = oldest + settings.timeout
            if now >= deadline {
                return .stalled(
                    "\(sentBytes - acknowledgedBytes) bytes unacknowledged for \(settings.timeout) (the stall timeout: TCP_USER_TIMEOUT)")
            }
            return .wait(until: deadline)
        }
        let idle = Duration.seconds(Int64(settings.keepaliveIdle))
        let interval = Duration.seconds(Int64(settings.keepaliveInterval))
        let nextProbe = probesUnanswered == 0 ? lastHeard + idle : lastProbeAt + interval
        guard now >= nextProbe else { return .wait(until: nextProbe) }
        if probesUnanswered > 0
            && (probesUnanswered >= Int(settings.keepaliveCount) || now - lastHeard >= settings.timeout)
        {
            return .stalled(
                "\(probesUnanswered) keepalive probes unanswered, nothing heard for \(now - lastHeard) (stall timeout \(settings.timeout))")
        }
        probesUnanswered += 1
        lastProbeAt = now
        return .probe(thenCheckAt: now + interval)
    }
}
