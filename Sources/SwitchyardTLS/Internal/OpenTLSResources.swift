import Synchronization

/// A ``TLSTransport``'s open TLS connections and listeners, so that its shutdown can send
/// each connection's close_notify before the wrapped transport closes the TCP connections
/// under them (the wrapped transport knows nothing of TLS: its shutdown alone would look
/// to every peer like a truncation).
final class OpenTLSResources: Sendable {
    private struct State {
        var connections: [ObjectIdentifier: TLSConnection] = [:]
        var listeners: [ObjectIdentifier: TLSListener] = [:]
    }
    private let state = Mutex(State())

    /// Tracks `connection` until it ends.
    func track(_ connection: TLSConnection) {
        let key = ObjectIdentifier(connection)
        state.withLock { $0.connections[key] = connection }
        connection.observeEnd { [weak self] in
            self?.state.withLock { _ = $0.connections.removeValue(forKey: key) }
        }
    }

    func track(_ listener: TLSListener) {
        state.withLock { $0.listeners[ObjectIdentifier(listener)] = listener }
    }

    func forget(_ listener: TLSListener) {
        state.withLock { _ = $0.listeners.removeValue(forKey: ObjectIdentifier(listener)) }
    }

    var openConnections: Int { state.withLock { $0.connections.count } }

    func closeListeners() {
        let listeners = state.withLock { Array($0.listeners.values) }
        for listener in listeners { listener.close() }
    }

    /// Sends close_notify on every open connection and closes it (`cancelled`/`shutdown`).
    func closeConnectionsForShutdown() async {
        let connections = state.withLock { Array($0.connections.values) }
        for connection in connections { await connection.closeForShutdown() }
    }
}
