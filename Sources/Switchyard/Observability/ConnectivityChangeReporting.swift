public import CoreMetrics
public import Logging
import Synchronization

/// What a connectivity monitor logs and counts when the path it reports changes, once per
/// reported change: the netlink monitor's (debounced, never per netlink message) and
/// ``ManualConnectivityMonitor``'s.
///
/// Logs (metadata `switchyard.connectivity.from`, `switchyard.connectivity.to`: the
/// categories; `switchyard.connectivity.interface`: the new path's interface, empty for
/// none; `switchyard.connectivity.addresses`: its addresses):
///
/// | level | message | when |
/// | --- | --- | --- |
/// | debug | `connectivity monitor started` | the monitor read the tables (only `to`, `interface`, `addresses`) |
/// | notice | `connectivity changed` | the category changed (`wifi` to `none`, ...) |
/// | info | `network path changed` | same category, another interface or other addresses |
///
/// Metrics:
///
/// | name | kind | dimensions |
/// | --- | --- | --- |
/// | `switchyard_connectivity_changes_total` | counter | `monitor` (`netlink`, `manual`), `category` (the new one), `kind` (`category`: the category changed; `path`: the same category on another path) |
///
/// The counters are made once per category and kind met, and kept for the monitor's life.
public final class ConnectivityChangeReporting: Sendable {
    /// The logger.
    public let logger: Logger
    private let factory: any MetricsFactory
    private let monitor: String
    private let counters = Mutex<[String: Counter]>([:])

    /// Reports for the monitor named `monitor` (the `monitor` dimension) to `logger` and
    /// `factory` (the bootstrapped metrics system by default).
    public init(monitor: String, logger: Logger, factory: any MetricsFactory = MetricsSystem.factory) {
        self.monitor = monitor
        self.logger = logger
        self.factory = factory
    }

    /// The monitor started with `path`.
    public func started(_ path: ConnectivityPath) {
        logger.debug("connectivity monitor started", metadata: Self.metadata(to: path))
    }

    /// The monitor reported `path` after `previous`.
    public func changed(from previous: ConnectivityPath, to path: ConnectivityPath) {
        let categoryChanged = previous.category != path.category
        counter(category: path.category.description, kind: categoryChanged ? "category" : "path").increment()
        var metadata = Self.metadata(to: path)
        metadata["switchyard.connectivity.from"] = "\(previous.category)"
        if categoryChanged {
            logger.notice("connectivity changed", metadata: metadata)
        } else {
            logger.info("network path changed", metadata: metadata)
        }
    }

    private static func metadata(to path: ConnectivityPath) -> Logger.Metadata {
        [
            "switchyard.connectivity.to": "\(path.category)",
            "switchyard.connectivity.interface": .string(path.interface ?? ""),
            "switchyard.connectivity.addresses": .string(path.addresses.sorted().joined(separator: ",")),
        ]
    }

    private func counter(category: String, kind: String) -> Counter {
        counters.withLock { counters in
            let key = category + "/" + kind
            if let counter = counters[key] { return counter }
            let counter = Counter(
                label: "switchyard_connectivity_changes_total",
                dimensions: [("monitor", monitor), ("category", category), ("kind", kind)], factory: factory)
            counters[key] = counter
            return counter
        }
    }
}
