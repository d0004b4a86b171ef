import Switchyard
import Synchronization

/// A decorator transport's open listeners, closed when it shuts down. A listener made
/// while the transport shuts down is closed at once and its listen fails with
/// `cancelled`/`shutdown`, as `bsd`'s own does; a listener that closes leaves the table.
final class OpenListeners: Sendable {
    private struct State {
        var open: [ObjectIdentifier: any Listener] = [:]
        var shutDown = false
    }
    private let state = Mutex(State())

    /// Adds `listener`, or closes it and throws `cancelled`/`shutdown` after a shutdown.
    func admit(_ listener: any Listener) throws(TransportError) {
        let admitted = state.withLock { state in
            if state.shutDown { return false }
            state.open[ObjectIdentifier(listener)] = listener
            return true
        }
        if !admitted {
            listener.close()
            throw TransportError.transportShutdown()
        }
    }

    func remove(_ listener: any Listener) {
        _ = state.withLock { $0.open.removeValue(forKey: ObjectIdentifier(listener)) }
    }

    /// Refuses listeners from now on and closes the open ones (outside the lock: a
    /// listener's close removes it from the table).
    func closeAll() {
        let open = state.withLock { state in
            state.shutDown = true
            defer { state.open = [:] }
            return Array(state.open.values)
        }
        for listener in open { listener.close() }
    }
}
