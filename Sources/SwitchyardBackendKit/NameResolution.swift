public import Switchyard

/// The name-resolution rules every backend keeps, written once.
///
/// - An endpoint of another network never reaches a socket: a path endpoint
///   (`Endpoint(unixPath:)`) at a backend of hosts and ports is refused at once
///   with `invalidArgument`, reason `invalid address`, naming it (``checkHostAndPort(_:)``).
/// - IP literals never reach a resolver.
/// - Names under the special-use `.invalid` top-level domain fail at once without a
///   query, as RFC 6761 section 6.4 asks of resolver libraries: `unavailable`, reason
///   `name resolution`.
/// - `localhost` and names under `.localhost` are the loopback addresses, `127.0.0.1`
///   then `::1`, without a query (RFC 6761 section 6.3; ``isLocalhost(_:)``).
/// - Any other failure to resolve fails the connect at once with the same code and
///   reason (never after a timeout).
public enum NameResolution {
    /// Checks an endpoint a backend of hosts and ports (TCP, or the in-memory network)
    /// was given to connect to or listen on: a host and port, the host a literal or a
    /// well-formed name. Call it first in `connect(to:)` and `listen(on:)`.
    /// - Throws: `invalidArgument`/`invalid address`, naming the endpoint, for a path
    ///   endpoint, a malformed host, or a port outside 0...65535.
    public static func checkHostAndPort(_ endpoint: Endpoint) throws(TransportError) {
        try endpoint.checkHostAndPort()
    }

    /// Checks the port of a host-and-port endpoint: `Endpoint.port` is a `var`, so a
    /// program can set it outside 0...65535 after `Endpoint(host:port:)` checked it.
    /// - Throws: `invalidArgument`/`invalid address`: `invalid port "70000" (0...65535) in host:70000`.
    public static func checkPort(_ endpoint: Endpoint) throws(TransportError) {
        try endpoint.checkPort()
    }

    /// Throws `unavailable`/`name resolution` for a name that must never resolve.
    public static func checkResolvable(_ host: String) throws(TransportError) {
        let lowered = host.lowercased()
        if lowered == "invalid" || lowered.hasSuffix(".invalid") || lowered.hasSuffix(".invalid.") {
            throw TransportError.nameResolution(host, detail: "names under .invalid never resolve (RFC 6761)")
        }
    }

    /// Whether `host` is `localhost` or a name under `.localhost` (RFC 6761 section 6.3),
    /// which resolve to the loopback addresses without a query.
    public static func isLocalhost(_ host: String) -> Bool {
        var name = host.lowercased()
        if name.hasSuffix(".") { name.removeLast() }
        return name == "localhost" || name.hasSuffix(".localhost")
    }
}
