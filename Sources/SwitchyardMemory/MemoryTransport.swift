public import Switchyard
public import SwitchyardBackendKit

/// The in-memory backend: connections are pairs of in-process endpoints, no sockets.
///
/// It exists for users' unit tests and to keep the conformance kit honest, so it keeps
/// every rule of the ``Transport`` and ``Connection`` contracts as a socket backend
/// does, with these memory equivalents:
///
/// - **Addresses.** Listeners live in one table per process, keyed by address and port,
///   so separate `MemoryTransport`s reach each other. Any IP literal may be listened
///   on (`0.0.0.0` and `::` are wildcards; `::` also takes IPv4 connects); port 0
///   picks a free port from 49152 up; an overlapping binding is
///   `unavailable`/`address in use`. `localhost` resolves to `127.0.0.1` then `::1`;
///   any other name fails at once with `unavailable`/`name resolution` (no DNS). Each
///   client end gets its own ephemeral port; the server end's local address is the
///   address the client reached, with the listener's port.
/// - **connect** is immediate: nothing listening is `unavailable`/`refused` at once;
///   the connect timeout never passes; an already cancelled task gets
///   `cancelled`/`task cancelled`; after shutdown, `cancelled`/`shutdown`.
/// - **Flow control.** Each direction holds at most 256 KiB (the "kernel buffers"); a
///   write completes once its bytes are in the peer's receive buffer, so a peer that
///   does not read pushes the writer back as TCP does. Reads hand over at most 64 KiB
///   at a time, only while reading; ``Connection/reset()`` reaches the peer as
///   `unavailable`/`reset`, ``Connection/close()`` as end of stream.
/// - **Loops.** It runs its own worker loops (the toolkit's ``WorkerEventLoop``, threads
///   named `sy-mem-N`), one per core
///   unless ``TransportConfiguration/eventLoopCount`` says otherwise; each connection
///   lives on one, and its callbacks run there. Its only descriptors are the loops'
///   eventfd descriptors, closed when it shuts down.
/// - **Shutdown.** ``shutdownNow()`` closes the listeners, ends every open connection
///   with `cancelled`/`shutdown` (the peers see end of stream) and stops the loops;
///   ``shutdown(gracePeriod:)`` first closes the listeners and waits up to the grace
///   period for the connections to end. Call them off the loops; both are idempotent.
///   A transport dropped without either does what ``shutdownNow()`` does (the toolkit's
///   ``TransportLifecycle``, as every toolkit-built backend).
///
/// ## Errors
///
/// There is no native error to map; each condition gives what a socket backend gives
/// for its TCP equivalent:
///
/// | condition | code | reason |
/// | --- | --- | --- |
/// | connect: nothing listens on the address (or the listener closed) | `unavailable` | `refused` |
/// | connect: a name other than `localhost` | `unavailable` | `name resolution` |
/// | connect: the task was already cancelled | `cancelled` | `task cancelled` |
/// | connect or listen: the transport is shutting down or shut down | `cancelled` | `shutdown` |
/// | connect or listen: malformed host | `invalidArgument` | `invalid address` |
/// | connect or listen: no free port | `resourceExhausted` | `resource limit` |
/// | listen: the address and port overlap a binding | `unavailable` | `address in use` |
/// | connection: the peer called `reset()` | `unavailable` | `reset` |
/// | connection: a write to a peer that ended | `unavailable` | `reset` |
/// | connection: the transport shut down | `cancelled` | `shutdown` |
/// | write or shutdownOutput after `close()`/`reset()` | `cancelled` | `closed` |
/// | write or second shutdownOutput after `shutdownOutput` | `failedPrecondition` | `output shut down` |
public final class MemoryTransport: LifecycleTransport {
    /// The name the backend registers under.
    public static let backendName = "memory"

    /// The backend, for a ``BackendRegistry``.
    public static let backend = TransportBackend(
        name: backendName,
        summary: "in-process connections without sockets, for tests (pairs only with itself)",
        usesSockets: false,
        make: { try MemoryTransport(configuration: $0) })

    public var name: String { Self.backendName }

    private let lifecycle: TransportLifecycle<WorkerEventLoop>

    /// Starts the transport's event loops.
    /// - Throws: `invalidArgument`/`invalid option` for settings out of range
    ///   (``TransportConfiguration/validate()``); a ``TransportError`` if a loop cannot be
    ///   started.
    public init(configuration: TransportConfiguration = .init()) throws {
        try configuration.validate()
        lifecycle = TransportLifecycle(
            group: try TransportEventLoopGroup<WorkerEventLoop>(count: configuration.eventLoopCount, name: "sy-mem"),
            observer: TransportObserver(backend: Self.backendName, logger: configuration.logger))
    }

    public func connect(to endpoint: Endpoint, options: ConnectOptions) async throws -> any Connection {
        try await lifecycle.observingConnect(to: endpoint) { try connectNow(to: endpoint) }
    }

    private func connectNow(to endpoint: Endpoint) throws(TransportError) -> MemoryConnection {
        if Task.isCancelled {
            throw TransportError(code: .cancelled, reason: .taskCancelled, message: "the connecting task was cancelled")
        }
        try lifecycle.ensureAccepting()
        try NameResolution.checkHostAndPort(endpoint)
        let targets = try InProcessHost.resolve(endpoint.host, backend: "in-memory").map(InProcessHost.connectTarget)
        let route = try MemoryNetwork.shared.route(to: targets, port: endpoint.port)

        let clientAddress = Endpoint(host: route.target, port: route.localPort)
        let serverAddress = Endpoint(host: route.target, port: endpoint.port)
        let toServer = MemoryPipe()
        let toClient = MemoryPipe()
        let serverLifecycle = route.listener.lifecycle
        let client = MemoryConnection(
            loop: lifecycle.group.next(), lifecycle: lifecycle, localAddress: clientAddress,
            remoteAddress: serverAddress, inbound: toClient, outbound: toServer,
            heldPort: MemoryNetwork.Binding(host: route.target, port: route.localPort))
        let server = MemoryConnection(
            loop: serverLifecycle.group.next(), lifecycle: serverLifecycle, localAddress: serverAddress,
            remoteAddress: clientAddress, inbound: toServer, outbound: toClient, heldPort: nil)
        toServer.attach(writer: client, reader: server)
        toClient.attach(writer: server, reader: client)

        guard client.activate(accepted: false) else {
            client.abandon()
            server.abandon()
            throw .transportShutdown("connect while the transport was shutting down")
        }
        guard route.listener.offer(server) else {
            // Neither end was seen by anyone: end both quietly.
            client.releasePort()
            client.close()
            server.close()
            throw TransportError(
                code: .unavailable, reason: .refused, message: "the listener on \(serverAddress) closed")
        }
        return client
    }

    public func listen(on endpoint: Endpoint, options: ListenOptions) async throws -> any Listener {
        try listenNow(on: endpoint)
    }

    private func listenNow(on endpoint: Endpoint) throws(TransportError) -> MemoryListener {
        try lifecycle.ensureAccepting()
        try NameResolution.checkHostAndPort(endpoint)
        let host = try InProcessHost.resolve(endpoint.host, backend: "in-memory")[0]
        let lifecycle = self.lifecycle
        let listener = try MemoryNetwork.shared.bind(host: host, port: endpoint.port) { port in
            MemoryListener(lifecycle: lifecycle, host: host, port: port)
        }
        try lifecycle.admit(listener)
        return listener
    }

    /// Its lifecycle runs ``Transport/shutdown(gracePeriod:)`` and ``Transport/shutdownNow()``.
    public var shutdownSequence: any TransportShutdownSequence { lifecycle }

    deinit {
        // Dropped without a shutdown: end everything the same way, synchronously.
        lifecycle.shutdownFromDeinit()
    }
}
