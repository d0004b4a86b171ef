import Glibc
import Switchyard
import SwitchyardSimulation
import Synchronization

/// A fault scenario's network for the `simulation` backend: hosts on the run's own
/// simulated network (``makeNetwork()``, driven by hand, links of 1 ms), at the addresses
/// the namespaces use (`FaultNetwork`). Its faults are the simulation's
/// (`SimulatedFault`): the client's link down and a black hole make every segment
/// vanish; a reset is a firewall's reject.
///
/// - The direct layout: the client's host and the server's, one path between them.
/// - The layouts of two paths (Wi-Fi and cellular, two Wi-Fi): the client's side is a
///   `SimulatedConnectivityMonitor` whose path follows the links, the default route and
///   the addresses the scenario sets, as a netlink monitor follows the kernel's; the
///   client's transport follows it (its connections start from the path's address), and
///   the addresses a path loses go dark. The server listens behind both.
///
/// The whole run is in the network's virtual time (`KitClock`): a stall timeout passes
/// in no wall-clock time, and the times the scenario measures are virtual, held to the
/// same bounds as on a real network. The run's seed is logged, and
/// `SWITCHYARD_SIMULATION_SEED` replays it.
final class SimulatedFaultNetwork: SwitchablePaths {
    /// Whether `client` and `server` are backends of the simulation, which runs the fault
    /// scenarios on a network of its own.
    static func runs(_ client: TransportBackend, _ server: TransportBackend) -> Bool {
        client.network == SimulationTransport.backend.network && server.network == SimulationTransport.backend.network
    }

    let network: SimulatedNetwork
    let paths: [FaultNetwork.Path]
    let serverAddress: String
    let family: FaultNetwork.Family
    /// The client's side of a layout of two paths; nil for the direct layout.
    private let monitor: SimulatedConnectivityMonitor?
    private let categories: [ConnectivityCategory]
    private let links: Mutex<Links>

    /// The client's links as the kernel would hold them.
    private struct Links {
        var up: [Bool]
        /// The path the default route goes over, if any.
        var defaultRoute: Int?
        /// Each path's client addresses, the first the primary.
        var addresses: [[String]]
    }

    /// The hosts of `layout` on `network`, the run's.
    init(_ layout: FaultNetwork.Layout, family: FaultNetwork.Family, on network: SimulatedNetwork) {
        self.network = network
        self.family = family
        // The second link of a layout of two, on the subnet the namespaces give it.
        let second: (name: String, subnet: Int, category: ConnectivityCategory)? =
            switch layout {
            case .direct: nil
            case .wifiAndCellular: ("wwan0", 2, .cellular)
            case .twoWifi: ("wlan1", 3, .wifi)
            }
        if let second {
            paths = [
                FaultNetwork.Path(link: "wlan0-sim", peer: "wlan0-peer", subnet: 1, family: family),
                FaultNetwork.Path(link: "\(second.name)-sim", peer: "\(second.name)-peer", subnet: second.subnet, family: family),
            ]
            categories = [.wifi, second.category]
            serverAddress = FaultNetwork.serverAddressBehindLinks(family)
        } else {
            paths = [FaultNetwork.Path(link: "sim0", peer: "sim0-peer", subnet: 1, family: family)]
            categories = [.wifi]
            serverAddress = paths[0].gateway
        }
        let links = Links(up: paths.map { _ in true }, defaultRoute: 0, addresses: paths.map { [$0.clientAddress] })
        self.links = Mutex(links)
        if case .direct = layout {
            monitor = nil
        } else {
            monitor = SimulatedConnectivityMonitor(network: network, path: Self.path(of: links, paths, categories))
        }
    }

    var clientAddress: String { paths[0].clientAddress }

    /// `backend` (the simulation's) with transports on `network` instead of the shared one.
    static func backend(on network: SimulatedNetwork, as backend: TransportBackend) -> TransportBackend {
        var backend = backend
        backend.make = { try SimulationTransport(network: network, configuration: $0) }
        return backend
    }

    /// A network driven by hand with links of 1 ms, seeded from
    /// `SWITCHYARD_SIMULATION_SEED`, else at random.
    static func makeNetwork() throws -> SimulatedNetwork {
        let seed = getenv(SimulatedNetwork.seedVariable).flatMap { UInt64(String(cString: $0)) } ?? .random(in: .min ... .max)
        return try SimulatedNetwork(seed: seed, link: SimulatedLink(latency: .milliseconds(1)))
    }

    func makeServerTransport(_ backend: TransportBackend, configuration: TransportConfiguration) async throws -> any Transport {
        try SimulationTransport(network: network, host: serverAddress, configuration: configuration)
    }

    func makeClientTransport(_ backend: TransportBackend, configuration: TransportConfiguration) async throws -> any Transport {
        if let monitor { return try SimulationTransport(network: network, following: monitor, configuration: configuration) }
        return try SimulationTransport(network: network, host: clientAddress, configuration: configuration)
    }

    // MARK: faults

    func takeClientLinkDown() throws {
        network.inject(.blackHole(host: clientAddress))
    }

    /// The simulation's black holes are per host: the server's host holds only the port.
    func blackHole(port: Int) throws {
        network.inject(.blackHole(host: serverAddress))
    }

    func liftBlackHole() throws {
        network.inject(.liftBlackHole(host: serverAddress))
        network.inject(.stopRejecting(host: serverAddress))
    }

    func injectReset(port: Int) throws {
        network.inject(.rejectWithReset(host: serverAddress))
    }

    func remove() {}

    // MARK: links, routes and addresses

    func makeMonitor() async throws -> (monitor: any ConnectivityMonitor, close: @Sendable () -> Void) {
        (try requireMonitor(), {})
    }

    func routeDefault(via path: FaultNetwork.Path) throws {
        let index = try self.index(of: path)
        try change { links in
            guard links.up[index] else { throw Refused(message: "no default route over \(path.link): the link is down") }
            links.defaultRoute = index
        }
    }

    func setLink(_ path: FaultNetwork.Path, up: Bool) throws {
        let index = try self.index(of: path)
        try change { links in Self.setLink(index, up: up, in: &links) }
    }

    func batch(_ commands: [String]) throws {
        let steps = try commands.map { command -> (Int, Bool) in
            let words = command.split(separator: " ").map(String.init)
            guard words.count == 4, words[0] == "link", words[1] == "set", words[3] == "up" || words[3] == "down",
                let index = paths.firstIndex(where: { $0.link == words[2] })
            else { throw Refused(message: "the simulated network takes `link set NAME up|down` in a batch, not `\(command)`") }
            return (index, words[3] == "up")
        }
        // One report for the whole batch, as the netlink monitor's debounce gives.
        try change { links in
            for (index, up) in steps { Self.setLink(index, up: up, in: &links) }
        }
    }

    func addClientAddress(_ address: String, to path: FaultNetwork.Path) async throws {
        let index = try self.index(of: path)
        try change { $0.addresses[index].append(address) }
    }

    func removeClientAddress(_ address: String, from path: FaultNetwork.Path) throws {
        let index = try self.index(of: path)
        try change { $0.addresses[index].removeAll { $0 == address } }
    }

    /// A step the simulated network cannot take.
    struct Refused: Error, CustomStringConvertible {
        var message: String
        var description: String { message }
    }

    private func requireMonitor() throws -> SimulatedConnectivityMonitor {
        guard let monitor else { throw Refused(message: "the direct layout has no connectivity monitor") }
        return monitor
    }

    private func index(of path: FaultNetwork.Path) throws -> Int {
        guard let index = paths.firstIndex(where: { $0.link == path.link }) else {
            throw Refused(message: "no link \(path.link) on the simulated network")
        }
        return index
    }

    /// Changes the links, then reports the path they give to the monitor (now, in
    /// virtual time; an unchanged path is no report).
    private func change(_ body: (inout Links) throws -> Void) throws {
        let monitor = try requireMonitor()
        let path = try links.withLock { links in
            try body(&links)
            return Self.path(of: links, paths, categories)
        }
        monitor.change(to: path)
    }

    /// The kernel drops a link's IPv4 default route when it goes down; it does not come
    /// back with the link.
    private static func setLink(_ index: Int, up: Bool, in links: inout Links) {
        links.up[index] = up
        if !up && links.defaultRoute == index { links.defaultRoute = nil }
    }

    /// The path a monitor reports: the default route's link, its category and addresses;
    /// `none` without a default route over a link that is up.
    private static func path(of links: Links, _ paths: [FaultNetwork.Path], _ categories: [ConnectivityCategory]) -> ConnectivityPath {
        guard let index = links.defaultRoute, links.up[index], !links.addresses[index].isEmpty else { return .none }
        return ConnectivityPath(category: categories[index], interface: paths[index].link, addresses: Set(links.addresses[index]))
    }
}
