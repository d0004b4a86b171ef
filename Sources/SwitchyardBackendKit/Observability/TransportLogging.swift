public import Logging
public import Switchyard

/// What a transport logs (swift-log), written once for every backend built on the toolkit,
/// through the logger of its `TransportConfiguration.logger`. Routine events are
/// `debug`, as swift-nio and grpc-swift do; only what an operator should hear about is
/// above it. Nothing is logged per message.
///
/// | level | message | metadata (besides `switchyard.backend`) |
/// | --- | --- | --- |
/// | debug | `connected` | `switchyard.peer`, `switchyard.local`, `switchyard.connection_id`, `switchyard.connect_ms` |
/// | debug | `connect failed` | `switchyard.peer` (the endpoint asked for), `switchyard.code`, `switchyard.reason`, `switchyard.error` |
/// | debug | `accepted` | `switchyard.peer`, `switchyard.local`, `switchyard.connection_id` |
/// | debug | `connection closed` | `switchyard.peer`, `switchyard.local`, `switchyard.connection_id`, `switchyard.reason` (`local` after a local close or reset, else the error's reason), `switchyard.code` and `switchyard.error` when it ended with one, `switchyard.bytes_received`, `switchyard.bytes_sent` |
/// | warning | `connection stalled` | as `connection closed`, plus `switchyard.detector` (`tcp_info`: a backend's own monitor; `kernel`: keepalive or `TCP_USER_TIMEOUT`) |
/// | warning | `connection reset by peer` | as `connection closed` |
/// | warning | `connection descriptor reclaimed` | as `connection closed` (the descriptor was closed or replaced underneath the connection) |
///
/// Every line carries `switchyard.backend`. `switchyard.connection_id` is the
/// connection object's identity in hex: unique among the open connections of the
/// process, and the same on every line about one connection.
///
/// A backend loaded from a library at run time (`LoadableBackend`) cannot take a `Logger`
/// across its C interface: the host logs on its side, where the events are visible, to
/// the logger of the configuration the loaded transport was made with: `connected`,
/// `connect failed`, and the close lines above (`connection closed`, `connection
/// stalled`, `connection reset by peer`, `connection descriptor reclaimed`) for a
/// connection whose handler hears its end, without `switchyard.bytes_received`,
/// `switchyard.bytes_sent` and `switchyard.detector`. Accepts are not logged, and of the
/// metrics only `switchyard_connect_duration`, `switchyard_connect_failures_total` and
/// `switchyard_connections_closed_total` are recorded (the host does not see the rest
/// across the interface). What the library itself logs is its own business.
public enum TransportLogging {
    /// The metadata keys.
    public enum Key {
        public static let backend = "switchyard.backend"
        public static let peer = "switchyard.peer"
        public static let local = "switchyard.local"
        public static let connectionID = "switchyard.connection_id"
        public static let connectMilliseconds = "switchyard.connect_ms"
        public static let code = "switchyard.code"
        public static let reason = "switchyard.reason"
        public static let error = "switchyard.error"
        public static let detector = "switchyard.detector"
        public static let bytesReceived = "switchyard.bytes_received"
        public static let bytesSent = "switchyard.bytes_sent"
    }

    /// The `switchyard.reason` of a connection's end: the error's reason, or `local`.
    public static func reason(of error: TransportError?) -> String {
        error.map(\.reason.name) ?? "local"
    }

    /// `switchyard.connection_id` for `connection`.
    public static func connectionID(_ connection: some AnyObject) -> String {
        ConnectionLogID.of(connection)
    }

    /// The metadata every line about `connection` carries.
    public static func metadata(of connection: some Connection) -> Logger.Metadata {
        [
            Key.peer: "\(connection.remoteAddress)",
            Key.local: "\(connection.localAddress)",
            Key.connectionID: .string(connectionID(connection)),
        ]
    }

    /// Logs `connected`.
    public static func connected(_ connection: some Connection, after duration: Duration, to logger: Logger) {
        logger.debug("connected", metadata: {
            var metadata = metadata(of: connection)
            metadata[Key.connectMilliseconds] = "\(milliseconds(duration))"
            return metadata
        }())
    }

    /// Logs `connect failed`.
    public static func connectFailed(to endpoint: Endpoint, _ error: TransportError, to logger: Logger) {
        logger.debug("connect failed", metadata: [
            Key.peer: "\(endpoint)", Key.code: "\(error.code)", Key.reason: .string(error.reason.name),
            Key.error: .string(error.message),
        ])
    }

    /// Logs `accepted`.
    public static func accepted(_ connection: some Connection, to logger: Logger) {
        logger.debug("accepted", metadata: metadata(of: connection))
    }

    /// Logs a connection's end: `connection stalled`, `connection reset by peer` or
    /// `connection descriptor reclaimed` (warning), else `connection closed` (debug).
    public static func closed(
        _ connection: some Connection, error: TransportError?, stallDetector: TransportMetrics.StallDetector?,
        bytesReceived: Int?, bytesSent: Int?, to logger: Logger
    ) {
        let message: Logger.Message
        switch error?.reason {
        case .some(.stalled): message = "connection stalled"
        case .some(.reset): message = "connection reset by peer"
        case .some(.reclaimed): message = "connection descriptor reclaimed"
        default: message = "connection closed"
        }
        logger.log(level: closedLevel(error), message, metadata: {
            var metadata = metadata(of: connection)
            metadata[Key.reason] = .string(reason(of: error))
            if let error {
                metadata[Key.code] = "\(error.code)"
                metadata[Key.error] = .string(error.message)
            }
            if let stallDetector { metadata[Key.detector] = .string(stallDetector.rawValue) }
            if let bytesReceived { metadata[Key.bytesReceived] = "\(bytesReceived)" }
            if let bytesSent { metadata[Key.bytesSent] = "\(bytesSent)" }
            return metadata
        }())
    }

    /// The level of a connection's end line: `warning` for a stall, a reset or a
    /// reclaimed descriptor, else `debug`.
    static func closedLevel(_ error: TransportError?) -> Logger.Level {
        switch error?.reason {
        case .some(.stalled), .some(.reset), .some(.reclaimed): .warning
        default: .debug
        }
    }

    /// Whole milliseconds of `duration`, rounded down.
    static func milliseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        return seconds * 1000 + attoseconds / 1_000_000_000_000_000
    }
}
