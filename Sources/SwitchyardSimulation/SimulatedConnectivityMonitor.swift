public import Switchyard
import Synchronization

/// A device's network path on a simulated network: the category, interface and
/// addresses a `ConnectivityMonitor` reports, changed when the test says, in virtual
/// time. A `CallChannel` that follows it reacts as it does to the netlink monitor.
///
/// A change (``change(to:)`` now, ``schedule(_:at:)`` at a virtual time):
/// - is a line of the network's event log (`path wifi (wlan0) > cellular (wwan0)`),
///   and reaches the observers on the network's own loop, at its virtual time, in the
///   order they registered;
/// - takes the old path's addresses that the new one lacks off the network: from then
///   on every segment to or from them vanishes, as it does when the interface that had
///   them goes away (connections over it stall, with no error); an address that comes
///   back with a later path travels again;
/// - moves the transports made with ``SimulationTransport/init(network:following:configuration:)``:
///   their next connections start from the new path's first address (in sort order);
///   with no address (`none`), a connect fails with
///   `unavailable`/`unreachable`.
///
/// ```swift
/// let wifi = ConnectivityPath(category: .wifi, interface: "wlan0", addresses: ["10.0.1.2"])
/// let cellular = ConnectivityPath(category: .cellular, interface: "wwan0", addresses: ["10.0.2.2"])
/// let monitor = SimulatedConnectivityMonitor(network: network, path: wifi)
/// monitor.schedule(cellular, at: .seconds(2))
/// ```
public final class SimulatedConnectivityMonitor: ConnectivityMonitor {
    /// The network whose clock the changes follow.
    public let network: SimulatedNetwork
    private let observers: ConnectivityObservers
    private let reporting = ConnectivityChangeReporting(monitor: "simulated", logger: TransportConfiguration.disabledLogger)

    /// A monitor on `network` whose path is `path` until a change says otherwise.
    public init(network: SimulatedNetwork, path: ConnectivityPath) {
        self.network = network
        observers = ConnectivityObservers(initial: Self.canonical(path))
    }

    public var current: ConnectivityPath { observers.current }

    public func observe(_ observer: @escaping @Sendable (ConnectivityPath) -> Void) -> ConnectivityObservation {
        observers.observe(observer)
    }

    /// Changes the path now: at the current virtual time, after the events already due
    /// (driven by hand, when the test next drives the clock).
    public func change(to path: ConnectivityPath) {
        schedule(path, at: network.now)
    }

    /// Changes the path at virtual time `time` (since the network was made; now if that
    /// has passed), after the events already queued for that time.
    public func schedule(_ path: ConnectivityPath, at time: Duration) {
        let path = Self.canonical(path)
        network.clock.enqueue({ [weak self] in self?.apply(path) }, on: network.controlLoop, at: time)
    }

    /// Applies a change, on the network's loop.
    private func apply(_ path: ConnectivityPath) {
        let network = network, reporting = reporting
        // Before the observers hear it: a channel that reconnects then finds the lost
        // addresses dark already.
        _ = observers.update(path) { previous in
            network.clock.record("path \(previous) > \(path)")
            network.pathChanged(lost: previous.addresses.subtracting(path.addresses), gained: path.addresses)
            reporting.changed(from: previous, to: path)
        }
    }

    /// The address a following transport's connections start from now, if any.
    var sourceAddress: String? { current.addresses.min() }

    private static func canonical(_ path: ConnectivityPath) -> ConnectivityPath {
        var path = path
        path.addresses = Set(path.addresses.map(SimulatedNetwork.canonical))
        return path
    }
}
