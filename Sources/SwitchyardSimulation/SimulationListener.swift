public import Switchyard
import SwitchyardBackendKit
import Synchronization

/// A listener of the simulation backend: an entry in its network's table that connects
/// from any ``SimulationTransport`` on the same ``SimulatedNetwork`` find.
///
/// It keeps the `Listener` contract: `localAddress` is readable at once (port 0 was
/// replaced by the port it got); each connect that reaches it yields one connection,
/// not reading yet, on a loop of the transport that listens; `close()` removes it
/// from the table at once (later connects are refused), ends `connections` and
/// closes the connections no one took. It closes too when its transport shuts down.
public final class SimulationListener: Listener {
    public var backendName: String { SimulationTransport.backendName }
    public let localAddress: Endpoint
    public let connections = AcceptedConnections()

    let binding: SimulatedBinding
    let network: SimulatedNetwork
    /// The transport's lifecycle: its loops, where the server ends live.
    let lifecycle: TransportLifecycle<SimulatedEventLoop>
    /// The transport's stall detection, for the server ends.
    let stall: StallSettings?
    private let closed = Atomic<Bool>(false)

    init(network: SimulatedNetwork, lifecycle: TransportLifecycle<SimulatedEventLoop>, stall: StallSettings?, host: String, port: Int) {
        self.network = network
        self.stall = stall
        self.lifecycle = lifecycle
        self.binding = SimulatedBinding(host: host, port: port)
        self.localAddress = Endpoint(host: host, port: port)
    }

    public func close() {
        guard !closed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        network.unbind(self)
        lifecycle.listenerClosed(self)
        connections.finish()
    }

    /// Hands the server end of a new connection to the user. Returns false when the
    /// listener (or its transport) is closing; the caller then discards both ends and
    /// refuses the connect.
    func offer(_ connection: SimulatedConnection) -> Bool {
        guard !closed.load(ordering: .acquiring), connection.activate(accepted: true) else { return false }
        return connections.yield(connection)
    }
}
