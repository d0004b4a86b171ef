/// A conformance scenario that did not hold: which scenario, on which pair, what was
/// expected and what happened instead, and where in the kit the check is.
///
/// Scenarios throw this (through the ``ConformanceContext`` helpers) rather than call a
/// test framework, so the kit runs under Swift Testing, XCTest or a plain executable.
public struct ConformanceFailure: Error, Sendable, CustomStringConvertible {
    /// The scenario's name.
    public var scenario: String
    /// The backend pair, `client→server`.
    public var pair: String
    /// What was expected and what was received instead.
    public var message: String
    /// The kit source file of the failing check.
    public var file: String
    /// The line of the failing check.
    public var line: Int

    public init(scenario: String, pair: String, message: String, file: String, line: Int) {
        self.scenario = scenario
        self.pair = pair
        self.message = message
        self.file = file
        self.line = line
    }

    public var description: String {
        "[\(pair)] \(scenario): \(message) (\(file):\(line))"
    }
}
