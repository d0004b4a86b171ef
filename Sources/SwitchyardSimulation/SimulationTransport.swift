public import Switchyard
public import SwitchyardBackendKit

/// The simulation backend: connections over a ``SimulatedNetwork``, in virtual time.
///
/// It keeps every rule of the `Transport` and `Connection` contracts as the
/// in-memory backend does (and passes the conformance kit the same way), with a network
/// between the ends:
///
/// - **Hosts and addresses.** A transport may stand for a host (`host`, an IP address):
///   its client ends then have that address, with an ephemeral port of their own, and
///   faults aimed at the host reach them. Without one, a client end has the address it
///   reached, as on loopback. Listeners live in the network's table: any IP literal
///   may be listened on (`0.0.0.0` and `::` are wildcards; `::` also takes IPv4
///   connects); port 0 picks a free port from 49152 up; an overlapping binding is
///   `unavailable`/`address in use`. `localhost` resolves to `127.0.0.1` then `::1`;
///   any other name fails at once with `unavailable`/`name resolution` (no DNS).
/// - **connect** is immediate: both ends exist when it returns (nothing listening is
///   `unavailable`/`refused` at once). The link's latency applies to what they send.
/// - **Bytes** travel as segments over the link between the two hosts
///   (``SimulatedLink``: latency, jitter), in order. A write completes once its bytes
///   are sent; at most 256 KiB may be sent and not yet read by the peer, so a peer that
///   does not read pushes the writer back, as TCP does. Reads hand over at most 64 KiB
///   at a time, only while reading; `Connection/reset()` reaches the peer as
///   `unavailable`/`reset`, `Connection/close()` as end of stream, each after the
///   latency.
/// - **Stalls.** With `TransportConfiguration/stallTimeout`, the kernel's stall
///   detection, in virtual time: bytes unacknowledged for the timeout, or keepalive
///   probes unanswered (the first after 1 s of silence), end the connection with
///   `unavailable`/`stalled`; `kernelStallDetection` off is refused, as the libuv
///   backend refuses it (there is no monitor of the backend's own).
/// - **Loops.** `TransportConfiguration/eventLoopCount` loops (default one), each a
///   loop of the network's clock: callbacks run in virtual time, on the network's one
///   thread when the test drives the clock, or on a thread per loop (`sy-sim-N`) when
///   the network drives itself. No descriptors.
/// - **Shutdown** as every toolkit-built backend (`TransportLifecycle`):
///   `shutdownNow()` closes the listeners, ends every open connection with
///   `cancelled`/`shutdown` (the peers see end of stream) and stops the loops;
///   `shutdown(gracePeriod:)` first waits up to the grace period (on the transport's
///   clock: virtual time when the test drives the network) for the connections to end. On a manually driven network a shutdown runs the work due now
///   without moving the clock.
///
/// ## Errors
///
/// | condition | code | reason |
/// | --- | --- | --- |
/// | connect: nothing listens on the address (or the listener closed) | `unavailable` | `refused` |
/// | connect: a name other than `localhost` | `unavailable` | `name resolution` |
/// | connect: the followed monitor's path has no address (`none`) | `unavailable` | `unreachable` |
/// | connect: the path to the target is black-holed (the SYN vanishes), at its `ConnectOptions/timeout` | `deadlineExceeded` | `connect timeout` |
/// | connect: the target's host rejects with reset (``SimulatedFault/rejectWithReset(host:)``) | `unavailable` | `refused` |
/// | connect: pending, its task cancelled | `cancelled` | `task cancelled` |
/// | connect: the task was already cancelled | `cancelled` | `task cancelled` |
/// | connect or listen: the transport is shutting down or shut down | `cancelled` | `shutdown` |
/// | connect or listen: malformed host | `invalidArgument` | `invalid address` |
/// | connect or listen: no free port | `resourceExhausted` | `resource limit` |
/// | listen: the address and port overlap a binding | `unavailable` | `address in use` |
/// | connection: the peer called `reset()`, or wrote to an end that ended | `unavailable` | `reset` |
/// | connection: ``SimulatedFault/resetConnections(host:)``, or a send to a host that rejects with reset | `unavailable` | `reset` |
/// | connection: with a stall timeout, bytes unacknowledged or keepalive probes unanswered for it | `unavailable` | `stalled` |
/// | connection: ``SimulatedFault/reclaimSocket(local:remote:)`` | `unavailable` | `reclaimed` |
/// | connection: the transport shut down | `cancelled` | `shutdown` |
/// | write or shutdownOutput after `close()`/`reset()` | `cancelled` | `closed` |
/// | write or second shutdownOutput after `shutdownOutput` | `failedPrecondition` | `output shut down` |
public final class SimulationTransport: LifecycleTransport {
    /// The name the backend registers under.
    public static let backendName = "simulation"

    /// The backend, for a `BackendRegistry`: its transports are on
    /// ``SimulatedNetwork/shared`` (automatic driving), so they reach each other.
    public static let backend = TransportBackend(
        name: backendName,
        summary:
            "a simulated network on a virtual clock, for tests (pairs only with itself); seed \(SimulatedNetwork.sharedSeed) (\(SimulatedNetwork.seedVariable)=\(SimulatedNetwork.sharedSeed) makes the same random choices)",
        usesSockets: false,
        make: { try SimulationTransport(network: SimulatedNetwork.shared, configuration: $0) })

    public var name: String { Self.backendName }
    /// The network's ``SimulatedNetwork/transportClock``.
    public var clock: any TransportClock { network.transportClock }
    /// The network the transport's connections travel.
    public let network: SimulatedNetwork
    /// The host the transport stands for (canonical), if any: the one it was made for,
    /// or the first address of the path of the monitor it follows (nil while that is
    /// `none`).
    public var host: String? {
        guard let monitor else { return fixedHost }
        return monitor.sourceAddress
    }
    private let fixedHost: String?
    /// The monitor whose path the transport's connections start from, if it follows one.
    public let monitor: SimulatedConnectivityMonitor?

    private let lifecycle: TransportLifecycle<SimulatedEventLoop>
    /// The stall detection its connections have, with a stall timeout.
    private let stall: StallSettings?

    /// A transport on `network`, standing for `host` (an IP address) if given.
    /// - Throws: `invalidArgument`/`invalid option` for settings out of range
    ///   (`TransportConfiguration/validate()`, `StallSettings/of(_:)`) and for a stall
    ///   timeout with `kernelStallDetection` off; `invalidArgument`/`invalid address` for
    ///   a `host` that is not an IP address.
    public convenience init(network: SimulatedNetwork, host: String? = nil, configuration: TransportConfiguration = .init()) throws {
        if let host {
            try Endpoint.validate(host: host)
            guard IPAddress.parseIPv4(host) != nil || IPAddress.parseIPv6(host) != nil else {
                throw TransportError(
                    code: .invalidArgument, reason: .invalidAddress,
                    message: "a simulated host is an IP address, not '\(host)'")
            }
        }
        try self.init(network: network, fixedHost: host.map(SimulatedNetwork.canonical), monitor: nil, configuration: configuration)
    }

    /// A transport on `network` for a device whose path `monitor` reports: its
    /// connections start from the path's first address (in sort order) at the moment they
    /// are made, so after a change the next one starts on the new path; while the path
    /// has no address (`none`), a connect fails with `unavailable`/`unreachable`.
    /// - Throws: `invalidArgument`/`invalid option` for settings out of range.
    public convenience init(
        network: SimulatedNetwork, following monitor: SimulatedConnectivityMonitor, configuration: TransportConfiguration = .init()
    ) throws {
        try self.init(network: network, fixedHost: nil, monitor: monitor, configuration: configuration)
    }

    private init(
        network: SimulatedNetwork, fixedHost: String?, monitor: SimulatedConnectivityMonitor?, configuration: TransportConfiguration
    ) throws {
        try configuration.validate()
        let stall = try StallSettings.of(configuration)
        if let stall, !stall.kernelDetection {
            throw TransportError(
                code: .invalidArgument, reason: .invalidOption,
                message: "the simulation detects stalls only as the kernel does (keepalive and TCP_USER_TIMEOUT); it cannot meet a stall timeout of \(stall.timeout) with kernelStallDetection off")
        }
        self.stall = stall
        self.network = network
        self.fixedHost = fixedHost
        self.monitor = monitor
        let clock = network.clock
        let timerLoop = network.controlLoop
        lifecycle = TransportLifecycle(
            group: try TransportEventLoopGroup<SimulatedEventLoop>(count: configuration.eventLoopCount ?? 1) {
                index throws(TransportError) in
                try SimulatedEventLoop(clock: clock, name: "sy-sim-\(index)", timerLoop: timerLoop)
            },
            observer: TransportObserver(backend: Self.backendName, logger: configuration.logger))
    }

    public func connect(to endpoint: Endpoint, options: ConnectOptions) async throws -> any Connection {
        try await lifecycle.observingConnect(to: endpoint) {
            switch try connectNow(to: endpoint, timeout: options.timeout) {
            case .connected(let connection): connection
            case .pending(let pending): try await pending.connected()
            }
        }
    }

    /// What a connect came to at once: a connection, or a connect whose SYN vanished.
    private enum Attempt {
        case connected(SimulatedConnection)
        case pending(SimulatedPendingConnect)
    }

    private func connectNow(to endpoint: Endpoint, timeout: Duration) throws(TransportError) -> Attempt {
        if Task.isCancelled {
            throw TransportError(code: .cancelled, reason: .taskCancelled, message: "the connecting task was cancelled")
        }
        try lifecycle.ensureAccepting()
        try NameResolution.checkHostAndPort(endpoint)
        let targets = try InProcessHost.resolve(endpoint.host, backend: Self.backendName).map(InProcessHost.connectTarget)
        // A connection to loopback never leaves over an interface: it starts from the
        // loopback address, whatever the path.
        let source = targets.allSatisfy(Self.isLoopback) ? nil : host
        if let monitor, source == nil, !targets.allSatisfy(Self.isLoopback) {
            throw TransportError(
                code: .unavailable, reason: .unreachable, message: "no route to \(endpoint): the device's path is \(monitor.current)")
        }
        switch network.synFate(from: source ?? targets[0], to: targets[0]) {
        case .delivered:
            break
        case .vanishes:
            network.clock.record("connect \(source ?? targets[0]) > \(endpoint): SYN dropped")
            return .pending(SimulatedPendingConnect(
                loop: lifecycle.group.next(), endpoint: endpoint, timeout: timeout, network: network, lifecycle: lifecycle))
        case .rejected:
            network.clock.record("connect \(source ?? targets[0]) > \(endpoint): SYN rejected")
            throw TransportError(code: .unavailable, reason: .refused, message: "the simulated network answered the connect to \(endpoint) with a reset (\(network))")
        }
        let route = try network.route(to: targets, port: endpoint.port, from: source)

        let clientAddress = Endpoint(host: route.local.host, port: route.local.port)
        let serverAddress = Endpoint(host: route.target, port: endpoint.port)
        let serverLifecycle = route.listener.lifecycle
        let client = SimulatedConnection(
            loop: lifecycle.group.next(), lifecycle: lifecycle, network: network, localAddress: clientAddress,
            remoteAddress: serverAddress, heldPort: route.local, stall: stall)
        let server = SimulatedConnection(
            loop: serverLifecycle.group.next(), lifecycle: serverLifecycle, network: network,
            localAddress: serverAddress, remoteAddress: clientAddress, heldPort: nil, stall: route.listener.stall)
        client.peer = server
        server.peer = client
        network.clock.record("connect \(clientAddress) > \(serverAddress)")

        guard client.activate(accepted: false) else {
            client.abandon()
            server.abandon()
            throw .transportShutdown("connect while the transport was shutting down")
        }
        guard route.listener.offer(server) else {
            // Neither end was seen by anyone: end both quietly.
            client.abandon()
            lifecycle.connectionEnded(client)
            server.abandon()
            throw TransportError(
                code: .unavailable, reason: .refused, message: "the listener on \(serverAddress) closed")
        }
        return .connected(client)
    }

    /// Whether `address` (canonical) is a loopback address.
    private static func isLoopback(_ address: String) -> Bool {
        address == "::1" || address.hasPrefix("127.")
    }

    public func listen(on endpoint: Endpoint, options: ListenOptions) async throws -> any Listener {
        try listenNow(on: endpoint)
    }

    private func listenNow(on endpoint: Endpoint) throws(TransportError) -> SimulationListener {
        try lifecycle.ensureAccepting()
        try NameResolution.checkHostAndPort(endpoint)
        let host = try InProcessHost.resolve(endpoint.host, backend: Self.backendName)[0]
        let lifecycle = self.lifecycle
        let network = self.network
        let stall = self.stall
        let listener = try network.bind(host: host, port: endpoint.port) { port in
            SimulationListener(network: network, lifecycle: lifecycle, stall: stall, host: host, port: port)
        }
        try lifecycle.admit(listener)
        return listener
    }

    /// Its lifecycle runs `Transport/shutdown(gracePeriod:)` and `Transport/shutdownNow()`;
    /// on a manually driven network, with the clock held open for the work due now.
    public var shutdownSequence: any TransportShutdownSequence {
        network.driving == .manual ? HeldOpenShutdown(lifecycle: lifecycle, clock: network.clock) : lifecycle
    }

    deinit {
        // Dropped without a shutdown: end everything the same way, synchronously.
        lifecycle.shutdownFromDeinit()
    }
}

/// A shutdown on a manually driven network: the lifecycle's hops to the loops (each
/// connection's end, the barrier after them) are work due now, which runs only while
/// something drives; this holds the clock open for them without moving it.
private struct HeldOpenShutdown: TransportShutdownSequence {
    let lifecycle: TransportLifecycle<SimulatedEventLoop>
    let clock: VirtualClock

    func shutdown(gracePeriod: Duration) async {
        await clock.holdingOpen { await lifecycle.shutdown(gracePeriod: gracePeriod) }
    }

    func shutdownNow() async {
        await clock.holdingOpen { await lifecycle.shutdownNow() }
    }
}
