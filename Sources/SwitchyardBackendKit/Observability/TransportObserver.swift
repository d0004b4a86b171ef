public import Logging
public import Switchyard

/// What a transport reports about its connections' lives, to its logger
/// (``TransportLogging`` lists every message) and its metrics (``TransportMetrics``
/// lists every metric), written once for every backend: a ``TransportLifecycle`` owns one
/// and calls it where connections open, connect, are accepted and end, so a backend that
/// registers its connections with ``TransportLifecycle/insertConnection(_:accepted:)``
/// and ``TransportLifecycle/connectionEnded(_:)``, and connects through
/// ``TransportLifecycle/observingConnect(to:_:)``, gets all of it.
///
/// Called once per connection open, connect and end, never per message. The bytes a
/// connection moved are counted by its ``ConnectionStateMachine`` in plain integers on
/// its loop and reported when it ends.
public final class TransportObserver: Sendable {
    /// The logger, with `switchyard.backend` set.
    public let logger: Logger
    /// The transport's metrics.
    public let metrics: TransportMetrics
    /// `logger`'s handler, asked for its level before every line. Asking through
    /// `Logger.logLevel` copies the handler out of the logger's storage under an
    /// exclusivity check (150 to 180 instructions, twice per connection when nothing is
    /// logged); asking this copy is a witness call. The level is still asked every time,
    /// never kept: a handler may change its level while the transport runs (swift-log
    /// allows a global override).
    private let handler: any LogHandler

    /// An observer for the backend named `backend`, logging to `logger` (with
    /// `switchyard.backend` added) and recording to the bootstrapped metrics system.
    public init(backend: String, logger: Logger, metrics: TransportMetrics? = nil) {
        var logger = logger
        logger[metadataKey: TransportLogging.Key.backend] = .string(backend)
        self.logger = logger
        self.handler = logger.handler
        self.metrics = metrics ?? TransportMetrics(backend: backend)
    }

    /// An observer that logs nowhere (and records to the bootstrapped metrics system,
    /// under the backend name `unnamed`): for a lifecycle made without one.
    public static func unnamed() -> TransportObserver {
        TransportObserver(backend: "unnamed", logger: TransportConfiguration.disabledLogger)
    }

    /// A connection was registered: accepted (logs `accepted`) or connected (the connect
    /// logs `connected`).
    public func opened(_ connection: some Connection, accepted: Bool) {
        if metrics.recording {
            (accepted ? metrics.opened.inbound : metrics.opened.outbound).increment()
            metrics.openConnections.increment()
        }
        if accepted, logs(.debug) { TransportLogging.accepted(connection, to: logger) }
    }

    /// Runs a transport's `connect` (to `endpoint`) and reports it: the connect time and
    /// `connected`, or the failure.
    public func observingConnect(
        to endpoint: Endpoint, _ connect: () async throws -> any Connection
    ) async throws -> any Connection {
        let start = ContinuousClock.now
        do {
            let connection = try await connect()
            connected(connection, after: ContinuousClock.now - start)
            return connection
        } catch let error as TransportError {
            connectFailed(to: endpoint, error)
            throw error
        }
    }

    /// A connect succeeded after `duration`.
    public func connected(_ connection: some Connection, after duration: Duration) {
        if metrics.recording { metrics.connectDuration.recordNanoseconds(Self.nanoseconds(duration)) }
        if logs(.debug) { TransportLogging.connected(connection, after: duration, to: logger) }
    }

    /// A connect to `endpoint` failed with `error`.
    public func connectFailed(to endpoint: Endpoint, _ error: TransportError) {
        if metrics.recording { metrics.connectFailed(reason: error.reason.name).increment() }
        TransportLogging.connectFailed(to: endpoint, error, to: logger)
    }

    /// A registered connection ended with `error` (nil: a local close or reset), having
    /// received and sent these many bytes.
    public func ended(_ connection: some Connection, error: TransportError?, bytesReceived: Int, bytesSent: Int) {
        var detector: TransportMetrics.StallDetector?
        if let error, error.reason == .stalled {
            // The kernel's stall errors keep their errno (or libuv code); a backend's own
            // monitor has none to keep.
            detector = error.native == nil ? .tcpInfo : .kernel
        }
        if metrics.recording {
            metrics.openConnections.decrement()
            metrics.closed(reason: TransportLogging.reason(of: error)).increment()
            if bytesReceived > 0 { metrics.bytesReceived.increment(by: bytesReceived) }
            if bytesSent > 0 { metrics.bytesSent.increment(by: bytesSent) }
            if let detector { (detector == .tcpInfo ? metrics.stalls.tcpInfo : metrics.stalls.kernel).increment() }
        }
        guard logs(TransportLogging.closedLevel(error)) else { return }
        TransportLogging.closed(
            connection, error: error, stallDetector: detector, bytesReceived: bytesReceived, bytesSent: bytesSent,
            to: logger)
    }

    /// Whether a line at `level` would be logged now.
    func logs(_ level: Logger.Level) -> Bool {
        handler.logLevel <= level
    }

    /// A connection of a backend loaded from a library ended (its handler heard
    /// `connectionDidClose`): counted as closed by reason and logged as
    /// ``ended(_:error:bytesReceived:bytesSent:)`` does, without the byte counts and the
    /// open-connection gauge (the host does not see them across the C interface) and
    /// without a stall detector (the error does not say which).
    public func endedAcrossInterface(_ connection: some Connection, error: TransportError?) {
        if metrics.recording { metrics.closed(reason: TransportLogging.reason(of: error)).increment() }
        guard logs(TransportLogging.closedLevel(error)) else { return }
        TransportLogging.closed(connection, error: error, stallDetector: nil, bytesReceived: nil, bytesSent: nil, to: logger)
    }

    /// A backend's own monitor found a stall: the data in flight went unacknowledged for
    /// `waited` (``TransportMetrics``' `switchyard_stall_detection_duration`). The end
    /// that follows is logged and counted by ``ended(_:error:bytesReceived:bytesSent:)``.
    public func stallDetected(waited: Duration) {
        metrics.stallDetectionDuration.recordNanoseconds(Self.nanoseconds(waited))
    }

    static func nanoseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        return seconds &* 1_000_000_000 &+ attoseconds / 1_000_000_000
    }
}
