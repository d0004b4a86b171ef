public import Switchyard
import Synchronization

/// A `Listener` whose connections are server ``TLSConnection``s: each connection the
/// wrapped listener accepts runs its handshake at once and is handed on only when the
/// handshake succeeded (see ``TLSTransport``). Made by ``TLSTransport/listen(on:options:)``.
///
/// ``close()`` closes the wrapped listener and every connection still in its handshake;
/// connections already handed on stay open, as the `Listener` contract says.
public final class TLSListener: Listener {
    /// The listener the TCP connections come from.
    public let wrapped: any Listener
    public let connections = AcceptedConnections()
    public var backendName: String { wrapped.backendName + "+tls" }
    public var localAddress: Endpoint { wrapped.localAddress }

    private struct State {
        var closed = false
        /// Connections in their handshake, by identity, to close with the listener.
        var handshaking: [ObjectIdentifier: any Connection] = [:]
    }
    private let state = Mutex(State())
    private let open: OpenTLSResources

    init(
        wrapping wrapped: any Listener, context: TLSContext, handshakeFailures: (@Sendable (TransportError, Endpoint) -> Void)?,
        open: OpenTLSResources
    ) {
        self.wrapped = wrapped
        self.open = open
        // The wrapped sequence, not an accept handler: it ends when the wrapped listener
        // closes for any reason (the transport's shutdown too), and this one ends with it.
        Task { [self] in
            for await connection in wrapped.connections {
                admit(connection, context: context, handshakeFailures: handshakeFailures)
            }
            connections.finish()
            open.forget(self)
        }
    }

    /// Runs the server handshake of an accepted connection, on its loop, and hands the
    /// TLS connection on when it succeeded.
    private func admit(
        _ connection: any Connection, context: TLSContext, handshakeFailures: (@Sendable (TransportError, Endpoint) -> Void)?
    ) {
        let key = ObjectIdentifier(connection)
        let admitted = state.withLock { state in
            if state.closed { return false }
            state.handshaking[key] = connection
            return true
        }
        guard admitted else {
            connection.close()
            return
        }
        Task(executorPreference: connection.eventLoop) { [self] in
            let result: Result<TLSConnection, TransportError>
            do throws(TransportError) {
                result = .success(try await TLSConnection.server(wrapping: connection, context: context))
            } catch {
                result = .failure(error)
            }
            state.withLock { _ = $0.handshaking.removeValue(forKey: key) }
            switch result {
            case .success(let tls):
                open.track(tls)
                if !connections.yield(tls) { tls.close() }
            case .failure(let error):
                handshakeFailures?(error, connection.remoteAddress)
            }
        }
    }

    public func close() {
        let pending = state.withLock { state in
            state.closed = true
            defer { state.handshaking = [:] }
            return Array(state.handshaking.values)
        }
        wrapped.close()
        for connection in pending { connection.close() }
        connections.finish()
        open.forget(self)
    }
}
