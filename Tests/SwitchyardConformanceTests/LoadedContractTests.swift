import Switchyard
import SwitchyardBackendKit
import SwitchyardConformance
import Testing
import SwitchyardBackendLoader

/// A backend loaded through the C interface that breaks its contract must fail the kit,
/// never crash the host: the host drops a once-only callback called again, and the kit
/// reports the drop as a failure of the scenario.
@Suite("A loaded backend that breaks the contract", .serialized)
struct LoadedContractTests {
    @Test("A loaded backend whose write completions run twice fails the scenario, naming the broken contract, and the host does not crash")
    func doubledCompletionAcrossTheBoundary() async throws {
        // The double, exported through the C table and loaded back, as a library's would be.
        let entry = LoadableBackend.export(DoubledCompletionBackend.backend)
        let loaded = try LoadableBackend.load(entry: entry, origin: "a test double (doubled write completions)")
        let scenario = try #require(ConformanceKit.scenario(named: ConformanceKit.scenarios[10].name))
        let outcome = await ConformanceKit.outcome(of: scenario, client: loaded, server: loaded, log: { _ in })
        #expect(outcome.status == .failed)
        #expect(outcome.reason?.contains("the backend broke the loaded-library contract") == true, "\(outcome)")
        #expect(outcome.reason?.contains("a write's done") == true, "\(outcome)")
        #expect(LoadableBackend.takeContractViolations().isEmpty, "the kit took this run's violations")
    }
}
