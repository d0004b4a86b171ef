public import Logging

/// A monitor fed by hand: tests, and platforms whose own API delivers connectivity
/// events (for example where rtnetlink is closed to the process).
///
/// A platform that knows the interface and its addresses reports them in the path, so a
/// move to another network of the same category (another Wi-Fi hotspot) is a path
/// change to the channels that follow it: `report(ConnectivityPath(category: .wifi,
/// interface: "wlan1", addresses: ["192.168.7.20"]))`.
///
/// Each change is logged and counted as the netlink monitor's are
/// (``ConnectivityChangeReporting``, dimension `monitor` `manual`).
public final class ManualConnectivityMonitor: ConnectivityMonitor {
    private let observers: ConnectivityObservers
    private let reporting: ConnectivityChangeReporting

    /// A monitor whose path is `initial` until ``report(_:)`` says otherwise; its changes
    /// are logged to `logger` (by default nowhere).
    public init(initial: ConnectivityPath = ConnectivityPath(category: .other), logger: Logger = TransportConfiguration.disabledLogger) {
        observers = ConnectivityObservers(initial: initial)
        reporting = ConnectivityChangeReporting(monitor: "manual", logger: logger)
    }

    public var current: ConnectivityPath { observers.current }

    public func observe(_ observer: @escaping @Sendable (ConnectivityPath) -> Void) -> ConnectivityObservation {
        observers.observe(observer)
    }

    /// Reports a new path; observers hear it if it differs from the current one.
    public func report(_ path: ConnectivityPath) {
        let reporting = self.reporting
        observers.update(path) { previous in reporting.changed(from: previous, to: path) }
    }
}
