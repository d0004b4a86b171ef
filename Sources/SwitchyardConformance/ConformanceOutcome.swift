/// How one run of one scenario on one backend pair ended, as a value: passed, failed
/// (with the reason and the kit's file and line), or skipped (with the reason), with the
/// time it took and what it measured.
///
/// ``ConformanceKit/outcome(of:client:server:tls:configuration:log:)`` returns it where
/// ``ConformanceKit/run(_:client:server:configuration:)`` throws; a report is made of them.
public struct ConformanceOutcome: Sendable, Hashable, Codable, CustomStringConvertible {
    /// How a run ended: extensible, encoded as its raw string.
    public struct Status: RawRepresentable, Sendable, Hashable, Codable, CustomStringConvertible {
        public var rawValue: String

        public init(rawValue: String) {
            self.rawValue = rawValue
        }

        /// The behaviour held, and nothing leaked.
        public static let passed = Status(rawValue: "passed")
        /// The behaviour did not hold, the scenario hung, or the run leaked.
        public static let failed = Status(rawValue: "failed")
        /// The scenario could not run on this pair or host (no root for network
        /// namespaces, no IPv6 loopback, a network without TCP sockets). Not a failure,
        /// and never counted as passed.
        public static let skipped = Status(rawValue: "skipped")

        public var description: String { rawValue }
    }

    /// The scenario's name.
    public var scenario: String
    /// The client backend's name.
    public var client: String
    /// The server backend's name.
    public var server: String
    /// How the run ended.
    public var status: Status
    /// Why it failed or was skipped; `nil` when it passed.
    public var reason: String?
    /// The kit source file of the failing check (`SwitchyardConformance/…`), when it failed.
    public var file: String?
    /// The line of the failing check, when it failed.
    public var line: Int?
    /// How long the run took, in seconds: the scenario, the transports' shutdown and the
    /// leak check.
    public var seconds: Double
    /// What the scenario measured, in the order it recorded them.
    public var measurements: [ConformanceMeasurement]

    public init(
        scenario: String, client: String, server: String, status: Status, reason: String? = nil,
        file: String? = nil, line: Int? = nil, seconds: Double, measurements: [ConformanceMeasurement] = []
    ) {
        self.scenario = scenario
        self.client = client
        self.server = server
        self.status = status
        self.reason = reason
        self.file = file
        self.line = line
        self.seconds = seconds
        self.measurements = measurements
    }

    /// `client→server`.
    public var pair: String { "\(client)→\(server)" }

    /// The reason with the failing check's place, `reason (file:line)`, or just the reason.
    public var explanation: String? {
        guard let reason else { return nil }
        guard let file, let line else { return reason }
        return "\(reason) (\(file):\(line))"
    }

    /// `[pair] scenario: passed`, `…: FAILED: reason (file:line)`, `…: skipped: reason`.
    public var description: String {
        let head = "[\(pair)] \(scenario)"
        switch status {
        case .passed: return "\(head): passed"
        case .failed: return "\(head): FAILED: \(explanation ?? "no reason given")"
        case .skipped: return "\(head): skipped: \(reason ?? "no reason given")"
        default: return "\(head): \(status)" + (explanation.map { ": \($0)" } ?? "")
        }
    }
}

extension Duration {
    /// The duration in seconds, as a `Double`.
    var inSeconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}
