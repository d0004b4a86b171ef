import Glibc
import Switchyard
import SwitchyardSimulation

/// A fault scenario's network for the `simulation` backend: a simulated network of the
/// scenario's own, driven by hand, with the client's host and the server's at the
/// addresses the namespaces' direct layout uses (`FaultNetwork`), joined by a link of
/// 1 ms. Its faults are the simulation's (`SimulatedFault`): the client's link down
/// and a black hole make every segment vanish; a reset is a firewall's reject.
///
/// ``run(_:)`` runs the scenario's steps on the network's thread, in its virtual time
/// (`SimulatedNetwork/run(_:)`), with the kit's clock (`KitClock`) set to it: a stall
/// timeout passes in no wall-clock time, and the times the scenario measures are
/// virtual, held to the same bounds as on a real network. Its seed is logged, and
/// `SWITCHYARD_SIMULATION_SEED` replays it.
final class SimulatedFaultNetwork: FaultPath {
    /// Whether `client` and `server` are backends of the simulation, which runs the fault
    /// scenarios on a network of its own.
    static func runs(_ client: TransportBackend, _ server: TransportBackend) -> Bool {
        client.network == SimulationTransport.backend.network && server.network == SimulationTransport.backend.network
    }

    let network: SimulatedNetwork
    let clientAddress: String
    let serverAddress: String
    let family: FaultNetwork.Family

    /// A network with a seed from `SWITCHYARD_SIMULATION_SEED`, else a random one.
    init(family: FaultNetwork.Family) throws {
        let seed = getenv(SimulatedNetwork.seedVariable).flatMap { UInt64(String(cString: $0)) } ?? .random(in: .min ... .max)
        network = try SimulatedNetwork(seed: seed, link: SimulatedLink(latency: .milliseconds(1)))
        self.family = family
        switch family {
        case .ipv4:
            clientAddress = "10.214.1.1"
            serverAddress = "10.214.1.2"
        case .ipv6:
            clientAddress = "fd00:214:1::1"
            serverAddress = "fd00:214:1::2"
        }
    }

    func makeServerTransport(_ backend: TransportBackend, configuration: TransportConfiguration) async throws -> any Transport {
        try SimulationTransport(network: network, host: serverAddress, configuration: configuration)
    }

    func makeClientTransport(_ backend: TransportBackend, configuration: TransportConfiguration) async throws -> any Transport {
        try SimulationTransport(network: network, host: clientAddress, configuration: configuration)
    }

    func run(_ body: @escaping @Sendable () async throws -> Void) async throws {
        let clock = network.transportClock
        try await network.run { try await KitClock.$current.withValue(clock) { try await body() } }
    }

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
}
