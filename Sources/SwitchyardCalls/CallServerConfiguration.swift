public import Switchyard

/// How a ``CallServer`` manages its clients' connections: what it accepts of their
/// keepalive pings, whether it pings them, how long a connection may live or idle, and
/// which algorithms it may compress responses with.
///
/// The defaults are gRPC's: pings from clients enforced as grpc-core does (one per
/// 5 minutes at most, none while no call is open), no pings of the server's own, no
/// maximum age or idle time, responses uncompressed.
public struct CallServerConfiguration: Sendable, Hashable {
    /// What the server accepts of a client's pings (gRPC's A8). A client that pings more
    /// often than ``KeepaliveEnforcement/minimumPingInterval`` while the server sends
    /// nothing (or at all while no call is open, unless
    /// ``KeepaliveEnforcement/permitWithoutCalls``) collects strikes; past
    /// ``KeepaliveEnforcement/maximumPingStrikes`` the connection is closed with GOAWAY
    /// `ENHANCE_YOUR_CALM`, debug data `too_many_pings` (gRPC clients then ping half as
    /// often), and its calls end `unavailable`, reason `closed`, on both sides. Default:
    /// ``KeepaliveEnforcement/init(minimumPingInterval:permitWithoutCalls:maximumPingStrikes:)``'s
    /// defaults (5 minutes, not without calls, 2 strikes).
    public var keepaliveEnforcement: KeepaliveEnforcement
    /// The server's own keepalive pings to its clients, as a channel's
    /// (``ChannelConfiguration/keepalive``): a PING after ``Keepalive/time`` without
    /// reading from the client; nothing read within ``Keepalive/timeout`` after it, and
    /// the connection is closed, its calls ending `unavailable`, reason `stalled`. Nil
    /// (the default): none. The clients must permit the rate (gRPC clients accept any).
    public var keepalive: Keepalive?
    /// How long a connection may have no call open before the server sends it GOAWAY
    /// (gRPC's `MAX_CONNECTION_IDLE`, A9); the client makes a new connection for its next
    /// call. Nil (the default): no limit.
    public var maximumConnectionIdle: Duration?
    /// How long a connection may live before the server sends it GOAWAY (gRPC's
    /// `MAX_CONNECTION_AGE`, A9), give or take 10 % of random jitter so that clients
    /// connected together do not all reconnect together. Its open calls go on (see
    /// ``maximumConnectionAgeGrace``); new ones go to a new connection. Nil (the
    /// default): no limit.
    public var maximumConnectionAge: Duration?
    /// How long after a GOAWAY for ``maximumConnectionAge`` or ``maximumConnectionIdle``
    /// the calls still open may go on: past it the connection is closed and they end
    /// (`unavailable` at the client, reason `closed`). Nil (the default): as long as
    /// they take (gRPC's `MAX_CONNECTION_AGE_GRACE`, infinite by default).
    public var maximumConnectionAgeGrace: Duration?
    /// The algorithms the server may compress responses with, in its order of
    /// preference: a call's responses are compressed with the first of them that its
    /// client listed in `grpc-accept-encoding`, and its response headers say so in
    /// `grpc-encoding`; a client that listed none of them gets them as they are. Each
    /// message that would not get smaller goes out as it is (compressed flag 0). Default
    /// empty: no response is compressed. Requests compressed with gzip are read whatever
    /// this says. (Set it on the value; the initializer keeps its parameters.)
    public var responseCompression: [CallCompression] = []

    public init(
        keepaliveEnforcement: KeepaliveEnforcement = KeepaliveEnforcement(), keepalive: Keepalive? = nil,
        maximumConnectionIdle: Duration? = nil, maximumConnectionAge: Duration? = nil, maximumConnectionAgeGrace: Duration? = nil
    ) {
        self.keepaliveEnforcement = keepaliveEnforcement
        self.keepalive = keepalive
        self.maximumConnectionIdle = maximumConnectionIdle
        self.maximumConnectionAge = maximumConnectionAge
        self.maximumConnectionAgeGrace = maximumConnectionAgeGrace
    }

    /// Checks the values.
    /// - Throws: `invalidArgument`, reason `invalid option`, for a duration that is not
    ///   positive (the minimum ping interval may be zero), a negative number of strikes,
    ///   or a keepalive out of range (``Keepalive/validate()``).
    public func validate() throws(TransportError) {
        func invalid(_ message: String) -> TransportError {
            TransportError(code: .invalidArgument, reason: .invalidOption, message: message)
        }
        if keepaliveEnforcement.minimumPingInterval < .zero {
            throw invalid("invalid minimum ping interval \(keepaliveEnforcement.minimumPingInterval) (it must not be negative)")
        }
        if keepaliveEnforcement.maximumPingStrikes < 0 {
            throw invalid("invalid maximum ping strikes \(keepaliveEnforcement.maximumPingStrikes) (it must not be negative; 0 for any number)")
        }
        try keepalive?.validate()
        for (name, value) in [
            ("maximum connection idle", maximumConnectionIdle), ("maximum connection age", maximumConnectionAge),
            ("maximum connection age grace", maximumConnectionAgeGrace),
        ] {
            if let value, value <= .zero { throw invalid("invalid \(name) \(value) (it must be positive; nil for none)") }
        }
    }
}
