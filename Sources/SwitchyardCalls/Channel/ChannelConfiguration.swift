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

    public init(maximumWaitingCalls: Int = 1000, authority: String? = nil, scheme: String = "http") {
        self.maximumWaitingCalls = maximumWaitingCalls
        self.authority = authority
        self.scheme = scheme
    }
}
