import Glibc
public import Switchyard

/// Resolves host names off the event loops.
///
/// Literals never reach the resolver. Names under the special-use `.invalid` top-level
/// domain fail at once without a query, as RFC 6761 section 6.4 asks of resolver
/// libraries. Other names go to `getaddrinfo` on a short-lived thread of their own, so a
/// slow resolver never blocks a loop; its failure ends the connect at once with
/// `unavailable`, reason `name resolution`.
public enum Resolver {
    /// The addresses for `endpoint`, in the order the resolver gives them.
    public static func resolve(_ endpoint: Endpoint) async throws(TransportError) -> [SocketAddress] {
        if let literal = try SocketAddress(literal: endpoint) { return [literal] }
        let host = endpoint.host
        try NameResolution.checkResolvable(host)
        let port = endpoint.port
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<[SocketAddress], TransportError>, Never>) in
            let started = runOnNewThread(name: "sy-resolve") {
                continuation.resume(returning: Posix.resolve(host: host, port: port))
            }
            if !started {
                continuation.resume(returning: .failure(TransportError(
                    code: .resourceExhausted, reason: .resourceLimit, message: "could not start a resolver thread for '\(host)'")))
            }
        }
        return try result.get()
    }
}
