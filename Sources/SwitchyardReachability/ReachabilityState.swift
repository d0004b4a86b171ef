public import Switchyard

/// What a ``SiteReachability`` knows about its site. See ``SiteReachability`` for when
/// each state is reported; ``description`` is the one-line form tools print.
public enum ReachabilityState: Sendable, Hashable, CustomStringConvertible {
    /// No connectivity: the monitor's category is `ConnectivityCategory/none`. No probe
    /// runs until it changes.
    case none
    /// A probe is running.
    case checking
    /// The probe's `HEAD` got an expected status within the timeout; `latency` is the
    /// whole probe's time (name resolution, connect, request and response head).
    case reachable(latency: Duration)
    /// The probe failed; the failure says why.
    case unreachable(ReachabilityFailure)
    /// Connectivity exists, but something other than the site answered: a redirect
    /// (`3xx`), `511 Network Authentication Required`, or another `2xx` than those
    /// expected (the rule is written once, in ``SiteReachability``). `location` is the
    /// `Location` header, if the answer had one.
    case portal(status: Int, location: String?)

    /// `none`, `checking`, `reachable (3.2 ms)`, `unreachable (timeout)`,
    /// `unreachable (unexpected status 503)`, `portal (302, location http://login.example/)`.
    public var description: String {
        switch self {
        case .none: "none"
        case .checking: "checking"
        case .reachable(let latency): "reachable (\(ReachabilityState.milliseconds(latency)))"
        case .unreachable(let failure):
            if let status = failure.status { "unreachable (\(failure.reason) \(status))" } else { "unreachable (\(failure.reason))" }
        case .portal(let status, let location):
            if let location { "portal (\(status), location \(location))" } else { "portal (\(status))" }
        }
    }

    /// `12.345 ms`, with three decimals.
    static func milliseconds(_ duration: Duration) -> String {
        let (seconds, attoseconds) = duration.components
        let micros = seconds * 1_000_000 + attoseconds / 1_000_000_000_000
        let whole = micros / 1000
        let fraction = String(micros % 1000)
        return "\(whole).\(String(repeating: "0", count: 3 - fraction.count))\(fraction) ms"
    }
}

/// Why a probe failed.
public struct ReachabilityFailure: Sendable, Hashable, CustomStringConvertible {
    /// What kind of failure: an open set, like `TransportError/Reason`.
    public struct Reason: Sendable, Hashable, CustomStringConvertible {
        public let name: String
        public init(_ name: String) { self.name = name }
        public var description: String { name }

        /// No complete answer within the timeout (the connect's own deadline, the
        /// kernel's `ETIMEDOUT`, a stall, or the probe's timeout: a black hole, a silent
        /// or slow server).
        public static let timeout = Reason("timeout")
        /// Nothing listens at the site's address (`unavailable`/`refused`).
        public static let refused = Reason("refused")
        /// The connection was reset (`unavailable`/`reset`).
        public static let reset = Reason("reset")
        /// The host name did not resolve (`unavailable`/`name resolution`): reported at once.
        public static let nameResolution = Reason("name resolution")
        /// No route to the host (`unavailable`/`unreachable`).
        public static let noRoute = Reason("no route")
        /// The site answered with a status that is neither expected nor a portal's
        /// (``ReachabilityFailure/status`` holds it): `1xx`, `4xx`, `5xx` but 511.
        public static let unexpectedStatus = Reason("unexpected status")
        /// The answer was not an HTTP/1.x response head, or longer than the bound.
        public static let malformedResponse = Reason("malformed response")
        /// The server closed the connection before its answer's head was complete.
        public static let closed = Reason("closed")
        /// Any other transport error (``ReachabilityFailure/error`` holds it).
        public static let connectionFailed = Reason("connection failed")
    }

    public var reason: Reason
    /// For people; not stable.
    public var message: String
    /// The status, for ``Reason/unexpectedStatus``.
    public var status: Int?
    /// The transport error the failure was mapped from, if any.
    public var error: TransportError?

    public init(reason: Reason, message: String, status: Int? = nil, error: TransportError? = nil) {
        self.reason = reason
        self.message = message
        self.status = status
        self.error = error
    }

    /// Maps a connect's or a connection's error: refused, reset, name resolution and no
    /// route keep their reason; `deadlineExceeded`, `connect timeout`, `timed out` and
    /// `stalled` are ``Reason/timeout``; `closed` is ``Reason/closed``; anything else is
    /// ``Reason/connectionFailed``.
    public init(mapping error: TransportError) {
        let reason: Reason =
            switch error.reason {
            case .refused: .refused
            case .reset: .reset
            case .nameResolution: .nameResolution
            case .unreachable, .noConnectivity: .noRoute
            case .connectTimeout, .timedOut, .stalled: .timeout
            case .closed where error.code == .unavailable: .closed
            default: error.code == .deadlineExceeded ? .timeout : .connectionFailed
            }
        self.init(reason: reason, message: error.message, error: error)
    }

    public var description: String {
        status.map { "\(reason) \($0): \(message)" } ?? "\(reason): \(message)"
    }
}
