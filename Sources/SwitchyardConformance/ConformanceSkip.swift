/// A scenario that cannot run on this pair or this host, and why: no root for network
/// namespaces, no IPv6 loopback, a network without TCP sockets.
///
/// Scenarios throw it through ``ConformanceContext/skip(_:file:line:)``. The runner
/// still shuts both transports down and checks for leaked descriptors, then rethrows
/// it: a harness reports the scenario as skipped with this reason, never as passed.
public struct ConformanceSkip: Error, Sendable, CustomStringConvertible {
    /// The scenario's name.
    public var scenario: String
    /// The backend pair, `client→server`.
    public var pair: String
    /// Why the scenario could not run, as a plain phrase.
    public var reason: String

    public init(scenario: String, pair: String, reason: String) {
        self.scenario = scenario
        self.pair = pair
        self.reason = reason
    }

    public var description: String { "[\(pair)] \(scenario): skipped: \(reason)" }
}

extension ConformanceContext {
    /// Ends the scenario as skipped, with `reason`.
    public func skip(_ reason: String, file: String = #fileID, line: Int = #line) throws -> Never {
        log("skipped: \(reason)")
        throw ConformanceSkip(scenario: scenario, pair: pair, reason: reason)
    }
}
