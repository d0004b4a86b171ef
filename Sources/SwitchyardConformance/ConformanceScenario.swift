/// One named behaviour every backend pair must show.
///
/// A scenario gets a ``ConformanceContext`` (a fresh client transport and a fresh
/// server transport) and throws a ``ConformanceFailure`` when the behaviour does not
/// hold. The kit shuts the transports down and checks for leaked descriptors after it.
public struct ConformanceScenario: Sendable, CustomStringConvertible {
    /// What the scenario shows, as a plain sentence.
    public var name: String
    /// The items of <doc:KitChecklist> it covers, for example `["A1", "A9"]`.
    public var checklist: [String]
    /// How long the whole scenario may take before it fails as hung.
    public var timeLimit: Duration
    /// The scenario itself.
    public var run: @Sendable (ConformanceContext) async throws -> Void

    public init(
        _ name: String, checklist: [String], timeLimit: Duration = .seconds(120),
        run: @escaping @Sendable (ConformanceContext) async throws -> Void
    ) {
        self.name = name
        self.checklist = checklist
        self.timeLimit = timeLimit
        self.run = run
    }

    public var description: String { name }
}
