public import CoreMetrics
import Switchyard
import Synchronization

/// The metrics of one transport (swift-metrics), made once when the transport is made:
/// no metric object is made per event, and none is touched per message.
///
/// | name | kind | dimensions | when |
/// | --- | --- | --- | --- |
/// | `switchyard_connections_opened_total` | counter | `backend`, `direction` (`inbound`, `outbound`) | a connection was accepted or connected |
/// | `switchyard_connections_closed_total` | counter | `backend`, `reason` | a connection ended: `reason` is the end's `TransportError.Reason` name (`reset`, `stalled`, `reclaimed`, `shutdown`, `timed out`, ...) or `local` after a local close or reset |
/// | `switchyard_connect_failures_total` | counter | `backend`, `reason` | a connect failed (the error's reason: `refused`, `name resolution`, `connect timeout`, ...) |
/// | `switchyard_bytes_received_total` | counter | `backend` | a connection ended: the bytes it received (counted per connection in a plain integer on its loop) |
/// | `switchyard_bytes_sent_total` | counter | `backend` | a connection ended: the bytes the kernel took from it |
/// | `switchyard_stalls_total` | counter | `backend`, `detector` (`tcp_info`, `kernel`) | a connection ended `stalled` |
/// | `switchyard_open_connections` | gauge (meter) | `backend` | incremented when a connection opens, decremented when it ends |
/// | `switchyard_buffered_bytes` | gauge | `backend` | sampled every second while a metrics backend is bootstrapped: the bytes accepted by writes and not yet taken by the kernel, over the transport's open connections |
/// | `switchyard_connect_duration` | timer | `backend` | a connect succeeded: from the call to the connection, name resolution included |
/// | `switchyard_stall_detection_duration` | timer | `backend`, `detector` (`tcp_info`) | a backend's own monitor ended a stall: how long the data in flight went unacknowledged (the kernel does not say how long it waited, so its stalls are only counted) |
///
/// The netlink connectivity monitor adds `switchyard_connectivity_changes_total`
/// (counter; `monitor` = `netlink`, `category` = the new category), see
/// `NetlinkConnectivityMonitor`.
///
/// With no metrics backend bootstrapped, swift-metrics hands out no-op handlers, the
/// observer makes no metric call at all (it asks ``isRecording``, decided once) and the
/// buffered-bytes sampler does not run: no cost per connection, none per message.
public final class TransportMetrics: Sendable {
    /// The `backend` dimension.
    public let backend: String
    let opened: (inbound: Counter, outbound: Counter)
    let bytesReceived: Counter
    let bytesSent: Counter
    let openConnections: Meter
    let bufferedBytes: Gauge
    let connectDuration: CoreMetrics.Timer
    let stallDetectionDuration: CoreMetrics.Timer
    let stalls: (tcpInfo: Counter, kernel: Counter)
    private let factory: any MetricsFactory
    /// The closed-by-reason and connect-failure counters, one per reason, made the first
    /// time a reason is met (reasons are a short, fixed list in practice), kept for the
    /// transport's life.
    private let byReason = Mutex<(closed: [String: Counter], failed: [String: Counter])>(([:], [:]))

    /// Makes the transport's metrics with `factory`: by default the task's
    /// (`withMetricsFactory(_:_:)`) or else the bootstrapped one, read once, when the
    /// transport is made.
    public init(backend: String, factory: any MetricsFactory = MetricsSystem.factory) {
        self.backend = backend
        self.factory = factory
        self.recording = !(factory is NOOPMetricsHandler)
        closedLocal = Counter(
            label: "switchyard_connections_closed_total", dimensions: [("backend", backend), ("reason", "local")], factory: factory)
        let dimensions = [("backend", backend)]
        opened = (
            Counter(label: "switchyard_connections_opened_total", dimensions: dimensions + [("direction", "inbound")], factory: factory),
            Counter(label: "switchyard_connections_opened_total", dimensions: dimensions + [("direction", "outbound")], factory: factory))
        bytesReceived = Counter(label: "switchyard_bytes_received_total", dimensions: dimensions, factory: factory)
        bytesSent = Counter(label: "switchyard_bytes_sent_total", dimensions: dimensions, factory: factory)
        openConnections = Meter(label: "switchyard_open_connections", dimensions: dimensions, factory: factory)
        bufferedBytes = Gauge(label: "switchyard_buffered_bytes", dimensions: dimensions, factory: factory)
        connectDuration = CoreMetrics.Timer(label: "switchyard_connect_duration", dimensions: dimensions, factory: factory)
        stallDetectionDuration = CoreMetrics.Timer(
            label: "switchyard_stall_detection_duration", dimensions: dimensions + [("detector", StallDetector.tcpInfo.rawValue)],
            factory: factory)
        stalls = (
            Counter(label: "switchyard_stalls_total", dimensions: dimensions + [("detector", StallDetector.tcpInfo.rawValue)], factory: factory),
            Counter(label: "switchyard_stalls_total", dimensions: dimensions + [("detector", StallDetector.kernel.rawValue)], factory: factory))
    }

    /// Whether a metrics backend is bootstrapped (the factory is not swift-metrics' no-op
    /// one): what starts the buffered-bytes sampler.
    public var isRecording: Bool { recording }
    /// ``isRecording``, decided once: observers skip every metric call when it is false.
    let recording: Bool
    /// The closed-by-reason counter of connections that ended by a local close or reset
    /// (`reason` = `local`), the common end, made up front so it takes no lock.
    let closedLocal: Counter

    /// The closed-by-reason counter for `reason`.
    func closed(reason: String) -> Counter {
        if reason == "local" { return closedLocal }
        return counter(reason, \.closed, label: "switchyard_connections_closed_total")
    }

    /// The connect-failure counter for `reason`.
    func connectFailed(reason: String) -> Counter {
        counter(reason, \.failed, label: "switchyard_connect_failures_total")
    }

    private func counter(
        _ reason: String, _ table: WritableKeyPath<(closed: [String: Counter], failed: [String: Counter]), [String: Counter]>,
        label: String
    ) -> Counter {
        byReason.withLock { tables in
            if let counter = tables[keyPath: table][reason] { return counter }
            let counter = Counter(label: label, dimensions: [("backend", backend), ("reason", reason)], factory: factory)
            tables[keyPath: table][reason] = counter
            return counter
        }
    }

    /// Which mechanism found a stall (the `detector` dimension and log metadata).
    public enum StallDetector: String, Sendable {
        /// A backend's own progress monitor (the BSD backend's TCP_INFO sweep).
        case tcpInfo = "tcp_info"
        /// The kernel: keepalive or `TCP_USER_TIMEOUT` ran out.
        case kernel
    }
}
