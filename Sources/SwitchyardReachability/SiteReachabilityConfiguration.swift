public import Switchyard

/// What a ``SiteReachability`` probes and how often.
public struct SiteReachabilityConfiguration: Sendable, Hashable {
    /// The URL the probe sends its `HEAD` to.
    public var url: ReachabilityURL
    /// The bound on one whole probe: name resolution, connect, request and response head.
    public var timeout: Duration
    /// The statuses that mean reachable. By default every `2xx` (so `204`, what
    /// connectivity checks such as `/generate_204` answer, and `200`). Narrow it to
    /// `[204]` to count a `200` (a portal's login page) as a portal.
    public var expectedStatuses: Set<Int>
    /// How long to wait before probing again while unreachable (or behind a portal).
    public var backoff: Backoff
    /// The `User-Agent` header's value.
    public var userAgent: String

    /// The waits between probes while unreachable: `initial`, then each one `factor`
    /// times the one before, never more than `maximum`.
    public struct Backoff: Sendable, Hashable {
        public var initial: Duration
        public var factor: Double
        public var maximum: Duration
        public init(initial: Duration = .seconds(1), factor: Double = 2, maximum: Duration = .seconds(60)) {
            self.initial = initial
            self.factor = factor
            self.maximum = maximum
        }

        /// The wait before retry number `attempt` (0 for the first retry).
        public func delay(attempt: Int) -> Duration {
            var delay = initial
            var n = 0
            while n < attempt && delay < maximum {
                delay = delay * factor
                n += 1
            }
            return min(delay, maximum)
        }
    }

    /// The defaults: timeout 5 s, every `2xx` expected, backoff 1 s doubling up to 60 s.
    public init(
        url: ReachabilityURL, timeout: Duration = .seconds(5), expectedStatuses: Set<Int> = Set(200...299),
        backoff: Backoff = Backoff(), userAgent: String = "Switchyard-SiteReachability/1"
    ) {
        self.url = url
        self.timeout = timeout
        self.expectedStatuses = expectedStatuses
        self.backoff = backoff
        self.userAgent = userAgent
    }

    /// Parses `url` (see ``ReachabilityURL``) and takes the rest as given.
    /// - Throws: `invalidArgument`, reason `invalid address`, for a URL that is not
    ///   `http://host[:port]/path` or `https://host[:port]/path`.
    public init(
        url: String, timeout: Duration = .seconds(5), expectedStatuses: Set<Int> = Set(200...299),
        backoff: Backoff = Backoff(), userAgent: String = "Switchyard-SiteReachability/1"
    ) throws(TransportError) {
        self.init(
            url: try ReachabilityURL(parsing: url), timeout: timeout, expectedStatuses: expectedStatuses,
            backoff: backoff, userAgent: userAgent)
    }

    /// Checks the settings.
    /// - Throws: `invalidArgument`, reason `invalid option`, naming the setting: a
    ///   timeout or an initial backoff that is not positive, a factor below 1 (or not
    ///   finite), a maximum below the initial wait, no expected status, a status outside
    ///   100...599, or a `User-Agent` with a control character.
    public func validate() throws(TransportError) {
        func bad(_ why: String) -> TransportError {
            TransportError(code: .invalidArgument, reason: .invalidOption, message: "reachability: \(why)")
        }
        if timeout <= .zero { throw bad("the timeout must be positive, not \(timeout)") }
        if backoff.initial <= .zero { throw bad("the initial backoff must be positive, not \(backoff.initial)") }
        if !(backoff.factor >= 1 && backoff.factor.isFinite) { throw bad("the backoff factor must be 1 or more, not \(backoff.factor)") }
        if backoff.maximum < backoff.initial { throw bad("the maximum backoff \(backoff.maximum) is below the initial \(backoff.initial)") }
        if expectedStatuses.isEmpty { throw bad("no expected status") }
        if let status = expectedStatuses.first(where: { !(100...599).contains($0) }) {
            throw bad("expected status \(status) is outside 100...599")
        }
        if userAgent.utf8.contains(where: { $0 < 0x20 || $0 == 0x7F }) { throw bad("the User-Agent holds a control character") }
    }

    /// The state a response head's status gives (the rule of ``SiteReachability``).
    func state(status: Int, location: String?, latency: Duration) -> ReachabilityState {
        if expectedStatuses.contains(status) { return .reachable(latency: latency) }
        if (200...399).contains(status) || status == 511 { return .portal(status: status, location: location) }
        return .unreachable(ReachabilityFailure(
            reason: .unexpectedStatus, message: "\(url) answered \(status)", status: status))
    }

    /// The probe's request.
    var request: [UInt8] {
        Array("HEAD \(url.target) HTTP/1.1\r\nHost: \(url.authority)\r\nUser-Agent: \(userAgent)\r\nAccept: */*\r\nConnection: close\r\n\r\n".utf8)
    }
}
