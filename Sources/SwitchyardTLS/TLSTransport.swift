public import Switchyard

/// TLS over any `Transport`: its connections are ``TLSConnection``s over the wrapped
/// transport's, so every backend (`bsd`, `libuv`, `memory`, one loaded from a library)
/// gets TLS from this one layer.
///
/// ```swift
/// let tls = try TLSTransport(
///     wrapping: try BSDTransport(),
///     client: .client(trustRoots: .pemFile("ca.pem")),
///     server: .server(certificateChainFile: "server.pem", privateKeyFile: "server.key"))
/// let listener = try await tls.listen(on: Endpoint(host: "127.0.0.1", port: 0))
/// let connection = try await tls.connect(to: Endpoint(host: "localhost", port: listener.localAddress.port))
/// ```
///
/// ## Contract
///
/// The wrapped transport's, with the handshake added:
///
/// - **connect(to:options:)** connects with the wrapped transport, then runs the client
///   handshake (SNI and the name verified: ``TLSConfiguration/serverName``, else the
///   endpoint's host), and returns the connection once the handshake succeeded. The
///   wrapped connect's errors come unchanged; the handshake's are ``TLSErrorTable``'s
///   (the wrapped connection is closed then). A transport made without a client
///   configuration throws `failedPrecondition`, reason `invalid option`.
/// - **listen(on:options:)** listens with the wrapped transport; each connection it
///   accepts runs the server handshake at once, on its loop, and reaches
///   `Listener.connections` (or the accept handler) only after the handshake
///   succeeded. A failed handshake closes that connection and is reported to
///   `handshakeFailures` (a server has no other caller to tell). A transport made
///   without a server configuration throws `failedPrecondition`, reason `invalid option`.
/// - **Shutdown**: call it on this transport (this transport owns no loop or descriptor of
///   its own; the wrapped transport's shutdown does the rest). ``shutdown(gracePeriod:)``
///   closes the listeners at once, waits up to the grace period for the TLS connections
///   to close, then sends close_notify on each one left and closes it (`cancelled`,
///   reason `shutdown`), so its peer reads a clean end of stream rather than a
///   truncation, and shuts the wrapped transport down with what is left of the grace
///   period. ``shutdownNow()`` does the same without waiting. A handshake that is running
///   then fails with `cancelled`/`shutdown`. Shutting the wrapped transport down
///   directly also works, without the close_notify: peers see `truncated`.
public final class TLSTransport: Transport {
    /// The transport the TLS records travel on.
    public let wrapped: any Transport
    /// The wrapped transport's.
    public var clock: any TransportClock { wrapped.clock }
    /// The client side's context (made from the client configuration), if any.
    public let clientContext: TLSContext?
    /// The server side's context, if any.
    public let serverContext: TLSContext?
    private let handshakeFailures: (@Sendable (TransportError, Endpoint) -> Void)?
    private let open = OpenTLSResources()

    /// The wrapped transport's name with `+tls`, for example `"libuv+tls"`.
    public var name: String { wrapped.name + "+tls" }

    /// Wraps `transport`; `client` serves ``connect(to:options:)``, `server`
    /// ``listen(on:options:)`` (either may be nil when the side is not used).
    /// - Parameters:
    ///   - transport: the transport the TLS records travel on (any backend's).
    ///   - client: the configuration of the client side, of the client role.
    ///   - server: the configuration of the server side, of the server role.
    ///   - handshakeFailures: told (on the connection's loop) of every accepted
    ///     connection whose server handshake failed, with the error and the peer's address.
    /// - Throws: the errors of ``TLSContext/init(configuration:)`` (a file that cannot
    ///   be loaded, named), and `invalidArgument`/`invalid option` for a configuration of
    ///   the wrong role.
    public init(
        wrapping transport: any Transport, client: TLSConfiguration? = nil, server: TLSConfiguration? = nil,
        handshakeFailures: (@Sendable (TransportError, Endpoint) -> Void)? = nil
    ) throws(TransportError) {
        if let client, client.role != .client {
            throw TransportError(code: .invalidArgument, reason: .invalidOption, message: "TLSTransport: the client configuration has the server role")
        }
        if let server, server.role != .server {
            throw TransportError(code: .invalidArgument, reason: .invalidOption, message: "TLSTransport: the server configuration has the client role")
        }
        self.wrapped = transport
        self.clientContext = try client.map { configuration throws(TransportError) in try TLSContext(configuration: configuration) }
        self.serverContext = try server.map { configuration throws(TransportError) in try TLSContext(configuration: configuration) }
        self.handshakeFailures = handshakeFailures
    }

    /// Wraps `transport` with contexts already made (shared by every transport made from
    /// them, as `TransportBackend.tls(wrapping:client:server:)` does).
    public init(
        wrapping transport: any Transport, clientContext: TLSContext?, serverContext: TLSContext?,
        handshakeFailures: (@Sendable (TransportError, Endpoint) -> Void)? = nil
    ) {
        self.wrapped = transport
        self.clientContext = clientContext
        self.serverContext = serverContext
        self.handshakeFailures = handshakeFailures
    }

    public func connect(to endpoint: Endpoint, options: ConnectOptions) async throws -> any Connection {
        guard let clientContext else {
            throw TransportError(code: .failedPrecondition, reason: .invalidOption, message: "TLSTransport was made without a client configuration")
        }
        let connection = try await wrapped.connect(to: endpoint, options: options)
        let name = clientContext.configuration.serverName ?? endpoint.host
        let tls = try await TLSConnection.client(wrapping: connection, context: clientContext, serverName: name)
        open.track(tls)
        return tls
    }

    public func listen(on endpoint: Endpoint, options: ListenOptions) async throws -> any Listener {
        guard let serverContext else {
            throw TransportError(code: .failedPrecondition, reason: .invalidOption, message: "TLSTransport was made without a server configuration")
        }
        let listener = try await wrapped.listen(on: endpoint, options: options)
        let tls = TLSListener(wrapping: listener, context: serverContext, handshakeFailures: handshakeFailures, open: open)
        open.track(tls)
        return tls
    }

    public func shutdown(gracePeriod: Duration) async {
        open.closeListeners()
        let clock = wrapped.clock
        let deadline = clock.now + gracePeriod
        while open.openConnections > 0 && clock.now < deadline {
            try? await clock.sleep(until: min(clock.now + .milliseconds(10), deadline))
        }
        await open.closeConnectionsForShutdown()
        await wrapped.shutdown(gracePeriod: max(.zero, deadline - clock.now))
    }

    public func shutdownNow() async {
        open.closeListeners()
        await open.closeConnectionsForShutdown()
        await wrapped.shutdownNow()
    }
}

/// A TLS transport is a ``SecureTransport``: its connects verify the server as the
/// endpoint's host (or ``TLSConfiguration/serverName`` when one is set), so
/// `SiteReachability` probes `https` URLs through it.
extension TLSTransport: SecureTransport {}
