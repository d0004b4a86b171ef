public import Switchyard

extension TransportBackend {
    /// `backend` with TLS over it: a backend named `"<name>+tls"` whose transports are
    /// ``TLSTransport``s over `backend`'s, on a network of its own (`"<network>+tls"`:
    /// a TLS client reaches only TLS servers). For a `BackendRegistry`, and for pairs
    /// of the conformance kit (a `ConformancePair` of two such backends runs its
    /// scenarios over TLS, mixed backends too).
    ///
    /// The contexts are made here, once, and shared by every transport made: a file that
    /// cannot be loaded fails now, not when a transport is made.
    /// - Throws: the errors of ``TLSContext/init(configuration:)``; `invalidArgument`,
    ///   reason `invalid option`, for a configuration of the wrong role.
    public static func tls(
        wrapping backend: TransportBackend, client: TLSConfiguration?, server: TLSConfiguration?
    ) throws(TransportError) -> TransportBackend {
        if let client, client.role != .client {
            throw TransportError(code: .invalidArgument, reason: .invalidOption, message: "\(backend.name)+tls: the client configuration has the server role")
        }
        if let server, server.role != .server {
            throw TransportError(code: .invalidArgument, reason: .invalidOption, message: "\(backend.name)+tls: the server configuration has the client role")
        }
        let clientContext = try client.map { configuration throws(TransportError) in try TLSContext(configuration: configuration) }
        let serverContext = try server.map { configuration throws(TransportError) in try TLSContext(configuration: configuration) }
        return TransportBackend(
            name: backend.name + "+tls", summary: "TLS over \(backend.name): \(backend.summary)",
            usesSockets: backend.usesSockets, network: backend.network + "+tls", localEndpoint: backend.localEndpoint,
            make: { configuration in
                TLSTransport(wrapping: try backend.make(configuration), clientContext: clientContext, serverContext: serverContext)
            })
    }
}
