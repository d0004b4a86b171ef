import Switchyard

// doc-block begin (the guide to writing a backend shows this: SwitchyardConformance.docc)
/// `bsd`'s listener, its connections wrapped. Its `connections` is its own
/// `AcceptedConnections`, fed from `bsd`'s listener on each connection's loop (with no hop
/// through a task), and finished when it closes: by ``close()``, or by the transport's
/// shutdown (``CountingTransport``), as the `Listener` contract asks.
final class CountingListener<Hook: WriteHook>: Listener {
    let connections = AcceptedConnections()
    private let inner: any Listener
    private let openListeners: OpenListeners

    init(wrapping inner: any Listener, counter: ByteCounter, openListeners: OpenListeners) {
        self.inner = inner
        self.openListeners = openListeners
        inner.acceptConnections { [connections] accepted in
            // false: this listener has closed meanwhile, and the connection is ours to close.
            if !connections.yield(CountingConnection<Hook>(wrapping: accepted, counter: counter)) {
                accepted.close()
            }
        }
    }

    var backendName: String { Hook.backendName }
    var localAddress: Endpoint { inner.localAddress }

    func close() {
        inner.close()
        connections.finish()
        openListeners.remove(self)
    }
}
// doc-block end
