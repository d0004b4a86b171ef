/// What a server accepts of a client's pings (gRPC's A8 and grpc-core's
/// `GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS` and `..._MAX_PING_STRIKES`):
/// while the server has sent no headers or data since the last ping, a ping sooner than
/// ``minimumPingInterval`` after the previous one, or any ping while no call is open and
/// ``permitWithoutCalls`` is false, is a strike; more than ``maximumPingStrikes`` strikes
/// and the server closes the connection with GOAWAY `ENHANCE_YOUR_CALM`, debug data
/// `too_many_pings`. Sending headers or data clears the strikes.
public struct KeepaliveEnforcement: Sendable, Hashable {
    /// The least time between two pings while the server sends nothing. Default 5 minutes.
    public var minimumPingInterval: Duration
    /// Whether pings are welcome while no call is open. Default false.
    public var permitWithoutCalls: Bool
    /// Strikes tolerated; the next one closes the connection. 0: any number. Default 2.
    public var maximumPingStrikes: Int

    public init(minimumPingInterval: Duration = .seconds(300), permitWithoutCalls: Bool = false, maximumPingStrikes: Int = 2) {
        self.minimumPingInterval = minimumPingInterval
        self.permitWithoutCalls = permitWithoutCalls
        self.maximumPingStrikes = maximumPingStrikes
    }

    /// The debug data of the GOAWAY that closes a connection for too many pings, as gRPC
    /// peers send and recognise it.
    package static let tooManyPings: [UInt8] = Array("too_many_pings".utf8)
}

/// ``KeepaliveEnforcement`` on one connection, without clocks or I/O.
package struct PingStrikes: Sendable {
    package let policy: KeepaliveEnforcement
    private var strikes = 0
    private var lastPing: ContinuousClock.Instant?

    package init(_ policy: KeepaliveEnforcement) { self.policy = policy }

    /// A ping arrived at `now` with `openCalls` calls open. Returns true when the
    /// connection must be closed (GOAWAY `ENHANCE_YOUR_CALM`, `too_many_pings`).
    package mutating func pingReceived(now: ContinuousClock.Instant, openCalls: Int) -> Bool {
        defer { lastPing = now }
        let allowed: Bool
        if openCalls == 0 && !policy.permitWithoutCalls {
            // grpc-core allows one such ping every two hours.
            allowed = lastPing.map { now - $0 >= .seconds(7200) } ?? true
        } else {
            allowed = lastPing.map { now - $0 >= policy.minimumPingInterval } ?? true
        }
        guard !allowed else { return false }
        strikes += 1
        return policy.maximumPingStrikes > 0 && strikes > policy.maximumPingStrikes
    }

    /// The server sent headers or data: the client's pings are welcome again.
    package mutating func didSendHeadersOrData() {
        strikes = 0
        lastPing = nil
    }
}
