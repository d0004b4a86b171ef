import Switchyard
import SwitchyardNetlink

/// The network under a fault scenario (`withFaultNetwork`): a client's host and a
/// server's joined by one path the scenario breaks. Two kinds:
///
/// - `FaultNetwork`: real network namespaces joined by veth, faults made with `ip` and
///   nft, for the backends with TCP sockets; needs root.
/// - `SimulatedFaultNetwork`: hosts, links and faults on the simulated network of the
///   run (``KitClock/simulatedNetwork``), for the `simulation` backend; needs nothing,
///   and its scenarios pass in that network's virtual time.
///
/// A scenario states its steps once, against this protocol; each network makes them
/// happen its own way.
protocol FaultPath: Sendable {
    /// The client's address on the path (the source of its connections).
    var clientAddress: String { get }
    /// Where the server listens.
    var serverAddress: String { get }
    /// The addresses' family.
    var family: FaultNetwork.Family { get }

    /// Makes a transport of `backend` on the server's side of the path.
    func makeServerTransport(_ backend: TransportBackend, configuration: TransportConfiguration) async throws -> any Transport
    /// Makes a transport of `backend` on the client's side of the path.
    func makeClientTransport(_ backend: TransportBackend, configuration: TransportConfiguration) async throws -> any Transport

    /// Takes the client's end of the path down.
    func takeClientLinkDown() throws
    /// Drops every packet to and from TCP `port` on the server's side, carrier up.
    func blackHole(port: Int) throws
    /// Lets packets through again (undoes `blackHole(port:)` and `injectReset(port:)`).
    func liftBlackHole() throws
    /// Answers every packet to TCP `port` on the server's side with a reset.
    func injectReset(port: Int) throws
    /// Removes what the network made. Idempotent.
    func remove()
}

extension FaultNetwork: FaultPath {
    func makeServerTransport(_ backend: TransportBackend, configuration: TransportConfiguration) async throws -> any Transport {
        try await makeTransport(backend, in: serverNamespace, configuration: configuration)
    }

    func makeClientTransport(_ backend: TransportBackend, configuration: TransportConfiguration) async throws -> any Transport {
        try await makeTransport(backend, in: clientNamespace, configuration: configuration)
    }
}

/// The steps of the connectivity scenarios on a network of two paths (the Wi-Fi and
/// cellular layout, or two Wi-Fi links): links up and down, the default route, the
/// client's addresses, and a connectivity monitor of the client's side that sees them.
protocol SwitchablePaths: FaultPath {
    /// The paths, in the layout's order (the first carries the default route at start).
    var paths: [FaultNetwork.Path] { get }
    /// Moves the client's default route to `path`.
    func routeDefault(via path: FaultNetwork.Path) throws
    /// Takes the client's end of `path` up or down; a link that goes down loses its
    /// default route, which does not come back with it.
    func setLink(_ path: FaultNetwork.Path, up: Bool) throws
    /// Runs `ip` commands in one batch (the simulation takes `link set NAME up|down`).
    func batch(_ commands: [String]) throws
    /// Adds a second address to the client's end of `path`.
    func addClientAddress(_ address: String, to path: FaultNetwork.Path) async throws
    /// Removes an address from the client's end of `path`.
    func removeClientAddress(_ address: String, from path: FaultNetwork.Path) throws
    /// A connectivity monitor of the client's side, and how to close it.
    func makeMonitor() async throws -> (monitor: any ConnectivityMonitor, close: @Sendable () -> Void)
}

extension FaultNetwork: SwitchablePaths {
    func makeMonitor() async throws -> (monitor: any ConnectivityMonitor, close: @Sendable () -> Void) {
        let monitor = try await run(in: clientNamespace) { try NetlinkConnectivityMonitor() }
        return (monitor, { monitor.close() })
    }
}
