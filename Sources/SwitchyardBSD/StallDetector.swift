package import SwitchyardBackendKit
import SwitchyardPosix

/// The decision of the BSD backend's stall monitor for one connection: a pure state
/// machine, fed TCP_INFO snapshots and the time, that says when bytes in flight stopped
/// draining for longer than the stall timeout. It does no I/O and reads no clock: the
/// caller (``StallMonitor``) passes both in, so it is tested without sockets.
///
/// **The rule.** Data is *outstanding* while the kernel holds bytes sent and not
/// acknowledged (`tcpi_unacked`), or holds bytes it does not send although the peer's
/// window is open (`tcpi_notsent_bytes`, or the connection's own queue, with
/// `tcpi_snd_wnd` > 0: after a link went down the kernel cannot transmit at all). Bytes
/// held back by a *closed* (or unreported) peer window are flow control, not a stall: a
/// live peer answers the kernel's zero-window probes, and a dead one is caught by
/// `TCP_USER_TIMEOUT`, which bounds unanswered probes too. While data is outstanding,
/// the connection is *waiting* since the later of
/// - the last acknowledgement from the peer (`tcpi_last_ack_recv`; answers to window
///   and keepalive probes count), and
/// - the moment the outstanding data began, estimated as the earlier of the first
///   observation that saw it and the last time new data was sent
///   (`tcpi_last_data_sent`; a write after a long quiet period is not taken for a
///   stall just because the last acknowledgement is old).
///
/// It is stalled once it has been waiting for the stall timeout. Since the monitor
/// observes periodically, it decides at most one sweep interval after the bound.
///
/// States and their legal transitions:
/// - ``State/idle``: nothing outstanding at the last observation. → `waiting` when data
///   is outstanding; stays `idle` otherwise.
/// - ``State/waiting(firstSeen:)``: data outstanding since (at least) `firstSeen`. →
///   `idle` when it drained; → `stalled` (returning ``Action/stall(waited:)``) when no
///   acknowledgement came for the stall timeout; stays `waiting` otherwise.
/// - ``State/stalled``: terminal. Every later observation returns ``Action/none``.
package struct StallDetector: Sendable {
    package enum State: Sendable, Hashable {
        case idle
        case waiting(firstSeen: ContinuousClock.Instant)
        case stalled
    }

    /// What the caller must do after an observation.
    package enum Action: Sendable, Hashable {
        /// Nothing.
        case none
        /// End the connection: `unavailable`, reason `stalled`. `waited` is how long
        /// outstanding data went without an acknowledgement.
        case stall(waited: Duration)
    }

    /// The stall timeout.
    package let timeout: Duration
    package private(set) var state = State.idle

    package init(timeout: Duration) {
        self.timeout = timeout
    }

    /// Whether the next sweep must read TCP_INFO. An idle connection that wrote nothing
    /// since the last observation cannot have data outstanding (the kernel only gets
    /// bytes from its writes), so the sweep skips the system call for it.
    package func needsObservation(wroteSinceLastObservation: Bool) -> Bool {
        switch state {
        case .idle: wroteSinceLastObservation
        case .waiting: true
        case .stalled: false
        }
    }

    /// Feeds one observation: the kernel's view `info`, the bytes the connection still
    /// queues itself, and the time `now` at which `info` was read.
    package mutating func observe(_ info: TCPInfo, queuedBytes: Int, at now: ContinuousClock.Instant) -> Action {
        if case .stalled = state { return .none }
        let held = info.notSentBytes > 0 || queuedBytes > 0
        let windowOpen = (info.peerWindow ?? 0) > 0
        let outstanding = info.unackedSegments > 0 || (held && windowOpen)
        guard outstanding else {
            state = .idle
            return .none
        }
        let firstSeen: ContinuousClock.Instant
        if case .waiting(let since) = state {
            firstSeen = since
        } else {
            firstSeen = now
            state = .waiting(firstSeen: now)
        }
        let lastAck = now - .milliseconds(Int64(info.millisecondsSinceAckReceived))
        let lastSent = now - .milliseconds(Int64(info.millisecondsSinceDataSent))
        let waitingSince = max(lastAck, min(firstSeen, lastSent))
        let waited = waitingSince.duration(to: now)
        guard waited >= timeout else { return .none }
        state = .stalled
        return .stall(waited: waited)
    }
}
