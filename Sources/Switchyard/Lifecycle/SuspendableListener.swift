import Synchronization

/// A listener that a ``Lifecycle`` closes on suspend and reopens on resume, on the same
/// address and port; from ``Lifecycle/listen(on:using:options:)``.
///
/// It keeps the ``Listener`` contract across suspensions: ``localAddress`` never
/// changes (a `port: 0` listener keeps the port it got first), and ``connections`` (or
/// the ``acceptConnections(_:)`` handler) yields what every reopened socket accepts, in
/// order; the sequence ends only with ``close()``, or when a resume cannot reopen it.
/// While suspended nothing listens, so a connect is refused at once.
public final class SuspendableListener: Listener, LifecycleParticipant {
    public let backendName: String
    public let localAddress: Endpoint
    public let connections = AcceptedConnections()
    /// The transport it listens with (again, on resume).
    public let transport: any Transport
    public let options: ListenOptions

    private struct State {
        /// The listening socket now; nil while suspended.
        var inner: (any Listener)?
        var closed = false
    }
    private let state: Mutex<State>

    init(_ inner: any Listener, transport: any Transport, options: ListenOptions) {
        self.backendName = inner.backendName
        self.localAddress = inner.localAddress
        self.transport = transport
        self.options = options
        self.state = Mutex(State(inner: inner))
        forward(inner)
    }

    /// Whether it is listening now (false while suspended, and after ``close()``).
    public var isListening: Bool { state.withLock { $0.inner != nil } }

    /// Stops accepting for good: closes the socket (if open), ends ``connections`` and
    /// the lifecycle's registration. Idempotent.
    public func close() {
        let inner = state.withLock { state -> (any Listener)? in
            state.closed = true
            defer { state.inner = nil }
            return state.inner
        }
        inner?.close()
        connections.finish()
    }

    public func acceptConnections(_ handler: @escaping @Sendable (any Connection) -> Void) {
        connections.route(to: handler)
    }

    /// Hands what `inner` accepts to ``connections``, on each connection's loop.
    private func forward(_ inner: any Listener) {
        let connections = self.connections
        inner.acceptConnections { connection in
            if !connections.yield(connection) { connection.close() }
        }
    }

    // MARK: LifecycleParticipant

    package func lifecycleSuspendDidBegin() {
        state.withLock { state -> (any Listener)? in
            defer { state.inner = nil }
            return state.inner
        }?.close()
    }

    package func lifecycleResume() async throws {
        guard state.withLock({ !$0.closed && $0.inner == nil }) else { return }
        let inner: any Listener
        do {
            inner = try await transport.listen(on: localAddress, options: options)
        } catch {
            close()
            if var error = error as? TransportError {
                error.message = "reopening the listener on \(localAddress) on resume: \(error.message)"
                throw error
            }
            throw error
        }
        let kept = state.withLock { state in
            if state.closed || state.inner != nil { return false }
            state.inner = inner
            return true
        }
        if kept {
            forward(inner)
        } else {
            inner.close()
        }
    }

    package var lifecycleIsGone: Bool { state.withLock { $0.closed } }
}
