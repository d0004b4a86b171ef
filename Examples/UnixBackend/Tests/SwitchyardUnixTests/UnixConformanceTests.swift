import Switchyard
import SwitchyardConformance
import SwitchyardUnix
import Testing

// doc-block begin (the guide to writing a backend shows this: SwitchyardConformance.docc)
/// The whole conformance kit over `unix→unix`, one test case per scenario.
///
/// Serialized: the kit counts the process's open descriptors around each run to catch
/// leaks, so no two runs (and nothing else that opens descriptors) may overlap. A
/// scenario that does not apply to a Unix-domain network (IPv6, name resolution,
/// network namespaces) is reported as skipped, with its reason, never as passed.
@Suite("Conformance of the unix backend", .serialized)
struct UnixConformanceTests {
    init() {
        ConformanceKit.prepareProcess()
    }

    @Test("unix→unix passes every conformance scenario that applies", arguments: ConformanceKit.scenarios.map(\.name))
    func scenario(_ name: String) async throws {
        let scenario = try #require(ConformanceKit.scenario(named: name))
        do {
            try await ConformanceKit.run(scenario, client: UnixTransport.backend, server: UnixTransport.backend)
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
// doc-block end
