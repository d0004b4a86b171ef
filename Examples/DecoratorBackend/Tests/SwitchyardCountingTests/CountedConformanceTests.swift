import Switchyard
import SwitchyardConformance
import SwitchyardCounting
import Testing

/// The whole conformance kit over `counted→counted`, one test case per scenario: a
/// faithful decorator must pass everything `bsd` passes.
///
/// Serialized: the kit counts the process's open descriptors around each run to catch
/// leaks, so no two runs (and nothing else that opens descriptors) may overlap. A
/// scenario that does not apply here (IPv6 without an IPv6 loopback, network namespaces
/// without root) is reported as skipped, with its reason, never as passed.
@Suite("Conformance of the counted backend", .serialized)
struct CountedConformanceTests {
    init() {
        ConformanceKit.prepareProcess()
    }

    @Test("counted→counted passes every conformance scenario that applies", arguments: ConformanceKit.scenarios.map(\.name))
    func scenario(_ name: String) async throws {
        let scenario = try #require(ConformanceKit.scenario(named: name))
        do {
            try await ConformanceKit.run(scenario, client: CountedTransport.backend, server: CountedTransport.backend)
        } catch let failure as ConformanceFailure {
            Issue.record("\(failure)")
        } catch let skip as ConformanceSkip {
            // Skipped, with the reason, never passed. Swift Testing 6.3 counts a cancelled
            // case as passed in its console output, so a warning says it too.
            Issue.record("skipped: \(skip.reason)", severity: .warning)
            try Test.cancel("skipped: \(skip.reason)")
        }
    }
}
