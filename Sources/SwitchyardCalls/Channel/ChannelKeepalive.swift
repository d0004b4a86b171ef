import Synchronization

/// A channel's keepalive across its connections (``ChannelConfiguration/keepalive``):
/// the configured ``Keepalive``, with its `time` doubled each time a server closed a
/// connection of the channel with GOAWAY `ENHANCE_YOUR_CALM`, `too_many_pings`. gRPC's
/// A8 asks for exactly that: the doubled time is used for the channel's new
/// connections, so a client that pinged too often for its server settles on a rate the
/// server accepts instead of being closed again and again.
final class ChannelKeepalive: Sendable {
    private let current: Mutex<Keepalive>

    init(_ keepalive: Keepalive) {
        current = Mutex(keepalive)
    }

    /// What the channel's next connection uses.
    var keepalive: Keepalive { current.withLock { $0 } }

    /// A server said `too_many_pings` to a connection that pinged every `time`: new
    /// connections ping every `2 × time` (or more, if another connection doubled it
    /// further already).
    func peerSaidTooManyPings(toConnectionPingingEvery time: Duration) {
        current.withLock { keepalive in
            let doubled = time * 2
            if let now = keepalive.time, now >= doubled { return }
            keepalive.time = doubled
        }
    }
}
