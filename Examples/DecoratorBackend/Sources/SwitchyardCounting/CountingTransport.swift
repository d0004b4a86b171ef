public import Switchyard
import SwitchyardBSD

/// A decorator backend: the stock `bsd` backend underneath, each connection and listener
/// wrapped, and ``Hook`` deciding what a write passes on. It counts the bytes its
/// connections write and read (``totals``) and keeps `bsd`'s contract otherwise: the
/// errors, the shutdown, the loops and the handler's callbacks are `bsd`'s own.
///
/// `counted` is ``CountedTransport``, `lossy` ``LossyTransport``:
///
/// ```swift
/// let transport = try CountedTransport()
/// let listener = try await transport.listen(on: Endpoint(host: "127.0.0.1", port: 0))
/// // ...
/// print(transport.totals.written, transport.totals.read)
/// ```
// doc-block begin (the guide to writing a backend shows this: SwitchyardConformance.docc)
public final class CountingTransport<Hook: WriteHook>: Transport {
    /// The registry entry: on the `tcp` network (it speaks TCP to any TCP backend),
    /// listening for local tests on `127.0.0.1`, port 0.
    public static var backend: TransportBackend {
        TransportBackend(name: Hook.backendName, summary: Hook.summary, usesSockets: true, make: { try CountingTransport(configuration: $0) })
    }

    public var name: String { Hook.backendName }

    /// The bytes this transport's connections have written and read so far.
    public var totals: ByteTotals { counter.totals }

    private let inner: BSDTransport
    private let counter = ByteCounter()
    private let listeners = OpenListeners()

    public init(configuration: TransportConfiguration = TransportConfiguration()) throws(TransportError) {
        inner = try BSDTransport(configuration: configuration)
    }

    public func connect(to endpoint: Endpoint, options: ConnectOptions) async throws -> any Connection {
        CountingConnection<Hook>(wrapping: try await inner.connect(to: endpoint, options: options), counter: counter)
    }

    public func listen(on endpoint: Endpoint, options: ListenOptions) async throws -> any Listener {
        let listener = CountingListener<Hook>(
            wrapping: try await inner.listen(on: endpoint, options: options), counter: counter, openListeners: listeners)
        try listeners.admit(listener)
        return listener
    }

    /// `bsd` closes its own listeners when it shuts down, but not the decorator's: their
    /// `AcceptedConnections` are the decorator's to finish, or a task iterating one would
    /// wait for ever. So each shutdown closes them first, then shuts `bsd` down.
    public func shutdown(gracePeriod: Duration) async {
        listeners.closeAll()
        await inner.shutdown(gracePeriod: gracePeriod)
    }

    public func shutdownNow() async {
        listeners.closeAll()
        await inner.shutdownNow()
    }

    deinit {
        // Dropped without a shutdown: `bsd` ends its side in its own deinit; end ours.
        listeners.closeAll()
    }
}
// doc-block end
