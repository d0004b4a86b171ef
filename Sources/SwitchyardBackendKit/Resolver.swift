import Glibc
package import Switchyard

/// Resolves host names off the event loops.
///
/// Literals never reach the resolver. Names under the special-use `.invalid` top-level
/// domain fail at once without a query, as RFC 6761 section 6.4 asks of resolver
/// libraries. Other names go to `getaddrinfo` on a short-lived thread of their own, so a
/// slow resolver never blocks a loop; its failure ends the connect at once with
/// `unavailable`, reason `name resolution`.
package enum Resolver {
    /// The addresses for `endpoint`, in the order the resolver gives them.
    package static func resolve(_ endpoint: Endpoint) async throws(TransportError) -> [SocketAddress] {
        if let literal = try SocketAddress(literal: endpoint) { return [literal] }
        let host = endpoint.host
        let lowered = host.lowercased()
        if lowered == "invalid" || lowered.hasSuffix(".invalid") || lowered.hasSuffix(".invalid.") {
            throw TransportError.nameResolution(host, detail: "names under .invalid never resolve (RFC 6761)")
        }
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

/// Runs `work` on a new detached thread. Returns false if the thread could not start.
package func runOnNewThread(name: String, _ work: @escaping @Sendable () -> Void) -> Bool {
    final class Box {
        let work: @Sendable () -> Void
        init(_ work: @escaping @Sendable () -> Void) { self.work = work }
    }
    let box = Unmanaged.passRetained(Box(work))
    var attributes = pthread_attr_t()
    pthread_attr_init(&attributes)
    pthread_attr_setdetachstate(&attributes, CInt(PTHREAD_CREATE_DETACHED))
    defer { pthread_attr_destroy(&attributes) }
    var handle = pthread_t()
    let status = pthread_create(&handle, &attributes, { raw in
        Unmanaged<Box>.fromOpaque(raw!).takeRetainedValue().work()
        return nil
    }, box.toOpaque())
    if status != 0 {
        box.release()
        return false
    }
    return true
}
