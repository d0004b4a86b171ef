import CSwitchyardBackendABI
import Switchyard
import SwitchyardBackendKit

/// A listener of a loaded backend. From the moment it is made it takes every connection
/// the library's listener accepts (`listener_accept`, on that connection's loop) into its
/// own ``connections``, so the host can iterate them or route them with
/// ``Listener/acceptConnections(_:)`` (then each reaches the handler on its loop, inline,
/// as the contract asks). Its sequence ends on ``close()`` and when its transport shuts
/// down; a connection accepted after that is closed.
///
/// Safety of `@unchecked Sendable`: immutable; the handle may be used from any thread.
final class LoadedListener: Listener, @unchecked Sendable {
    private let core: LoadedTransportCore
    private let handle: OpaquePointer
    let localAddress: Endpoint
    let connections = AcceptedConnections()

    init(core: LoadedTransportCore, handle: OpaquePointer) {
        self.core = core
        self.handle = handle
        let table = core.library.table
        localAddress = Endpoint.reported { result, context in table.listener_local_address!(handle, result, context) }
        core.track(connections)
        var callbacks = sy_accept_callbacks(
            size: ABISize.acceptCallbacks,
            accepted: { context, connection in
                let acceptor = CallbackContext.borrow(context, as: Acceptor.self)
                guard let connection else { return }
                let accepted = acceptor.core.connection(connection)
                if !acceptor.connections.yield(accepted) { accepted.close() }
            },
            release: { _ = CallbackContext.take($0, as: Acceptor.self) })
        table.listener_accept!(handle, &callbacks, CallbackContext.retained(Acceptor(core: core, connections: connections)))
    }

    deinit { core.library.table.listener_release!(handle) }

    var backendName: String { core.name }

    func close() {
        core.library.table.listener_close!(handle)
        core.untrack(connections)
        connections.finish()
    }
}

/// Where the library's accepted connections go.
private final class Acceptor {
    let core: LoadedTransportCore
    let connections: AcceptedConnections
    init(core: LoadedTransportCore, connections: AcceptedConnections) {
        self.core = core
        self.connections = connections
    }
}
