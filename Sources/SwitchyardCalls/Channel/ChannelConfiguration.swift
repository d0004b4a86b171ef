public import Switchyard

/// How a ``CallChannel`` uses its connection.
public struct ChannelConfiguration: Sendable, Hashable {
    /// Calls that may wait for the server's stream limit (`SETTINGS_MAX_CONCURRENT_STREAMS`)
    /// on one connection; a call beyond them ends at once with `resourceExhausted`,
    /// reason `stream refused`. Default 1,000.
    public var maximumWaitingCalls: Int
    /// The request's `:authority`; nil for the target's `host:port` (`localhost` for a
    /// Unix-domain path).
    public var authority: String?
    /// The request's `:scheme`: `http`, or `https` for a transport that speaks TLS.
    public var scheme: String
    /// How the channel spaces its attempts to connect after one failed (gRPC's connection
    /// backoff: 1 s, then × 1.6 with ±20 % jitter up to 120 s). Each attempt may take
    /// the larger of its backoff and ``ConnectionBackoff/minimumConnectTimeout``, but no
    /// more than the channel's `ConnectOptions.timeout`.
    public var backoff: ConnectionBackoff
    /// How long the channel's connection may go without calls before the channel closes
    /// it and goes `idle` (the next call connects again); nil: never. Default 30
    /// minutes, gRPC's.
    public var idleTimeout: Duration?

    /// Keepalive pings on the channel's connection (gRPC's A8); nil (the default), or a
    /// ``Keepalive`` whose `time` is nil: none.
    ///
    /// With ``Keepalive/time`` set, the connection sends a PING after going that long
    /// without reading anything (while a call is open, or always with
    /// ``Keepalive/permitWithoutCalls``). If nothing is read within
    /// ``Keepalive/timeout`` after it, the connection is closed and every call on it ends
    /// `unavailable`, reason `stalled` (the message says it was keepalive); the next call
    /// connects afresh. This finds a dead path with no data in flight, where a write
    /// would show nothing. A server that finds the pings too frequent closes the
    /// connection with GOAWAY `ENHANCE_YOUR_CALM`, `too_many_pings`: the channel's new
    /// connections then ping half as often (twice the `time`), each time it happens.
    /// The server must permit the rate (its `KeepaliveEnforcement`; gRPC servers allow
    /// one ping per 5 minutes by default, and none without a call open).
    public var keepalive: Keepalive?

    /// Bytes of a call's request (its metadata and messages, as written) the channel keeps
    /// until the server's first frame for the call, so that the call can be retried
    /// transparently (gRPC's A6): default 256 KiB, gRPC's per-call retry buffer; 0 turns
    /// transparent retry off.
    ///
    /// A call whose stream the server refused (RST_STREAM `REFUSED_STREAM`), or whose
    /// stream is above the last stream of a GOAWAY, never reached the server's
    /// application. If the call received nothing from the server, it starts again once on
    /// a stream of the channel's connection (a new one if that one is going away), its
    /// metadata and messages sent again; its handler sees nothing of it. A call that wrote
    /// more than this before the server's first frame is not retried (its bytes are let go
    /// of at once) and ends as it would without retry: `unavailable`, reason
    /// `stream refused`. Set it on the configuration: the initializer leaves the default.
    public var retryBufferSize: Int

    public init(
        maximumWaitingCalls: Int = 1000, authority: String? = nil, scheme: String = "http",
        backoff: ConnectionBackoff = ConnectionBackoff(), idleTimeout: Duration? = .seconds(30 * 60), keepalive: Keepalive? = nil
    ) {
        self.maximumWaitingCalls = maximumWaitingCalls
        self.authority = authority
        self.scheme = scheme
        self.backoff = backoff
        self.idleTimeout = idleTimeout
        self.keepalive = keepalive
        self.retryBufferSize = 256 * 1024
    }

    /// Checks the values; every call of a channel made with values out of range fails
    /// with the error, before any connect.
    /// - Throws: `invalidArgument`, reason `invalid option`: a ``backoff`` that
    ///   ``ConnectionBackoff/validate()`` rejects, an ``idleTimeout`` that is not
    ///   positive, a ``maximumWaitingCalls`` or a ``retryBufferSize`` below 0, a
    ///   ``keepalive`` out of range (``Keepalive/validate()``).
    public func validate() throws(TransportError) {
        try backoff.validate()
        try keepalive?.validate()
        if let idleTimeout, idleTimeout <= .zero {
            throw TransportError(
                code: .invalidArgument, reason: .invalidOption,
                message: "invalid channel idleTimeout \(idleTimeout) (it must be positive; nil for never)")
        }
        guard maximumWaitingCalls >= 0 else {
            throw TransportError(
                code: .invalidArgument, reason: .invalidOption,
                message: "invalid maximumWaitingCalls \(maximumWaitingCalls) (0 or more)")
        }
        guard retryBufferSize >= 0 else {
            throw TransportError(
                code: .invalidArgument, reason: .invalidOption,
                message: "invalid retryBufferSize \(retryBufferSize) (0 or more; 0 turns transparent retry off)")
        }
    }
}
