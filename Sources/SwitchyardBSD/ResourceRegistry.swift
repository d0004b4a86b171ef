import Switchyard
import SwitchyardBackendKit
import Synchronization

/// Something a transport must end when it shuts down: a connection or a pending connect.
protocol LoopResource: AnyObject, Sendable {
    /// The loop the resource lives on.
    var loop: EpollEventLoop { get }
    /// Ends the resource with `error`. Called on its loop, outside any user call.
    func terminate(with error: TransportError)
}

/// The open connections and pending connects of one transport, so shutdown can end them.
/// Locked once per connection open and close, never per message.
final class ResourceRegistry: Sendable {
    private struct State {
        var resources: [ObjectIdentifier: any LoopResource] = [:]
        var closed = false
    }
    private let state = Mutex(State())

    /// Adds `resource`; false once the registry is closed (the caller then ends it).
    func insert(_ resource: any LoopResource) -> Bool {
        state.withLock { state in
            if state.closed { return false }
            state.resources[ObjectIdentifier(resource)] = resource
            return true
        }
    }

    func remove(_ resource: any LoopResource) {
        _ = state.withLock { $0.resources.removeValue(forKey: ObjectIdentifier(resource)) }
    }

    var count: Int { state.withLock { $0.resources.count } }

    /// Closes the registry to new resources and returns the ones it holds.
    func close() -> [any LoopResource] {
        state.withLock { state in
            state.closed = true
            return Array(state.resources.values)
        }
    }
}
