import Switchyard
import SwitchyardBackends
import SwitchyardConformance
import Testing

/// The conformance kit over a backend loaded from a library: the loaded `bsd-loaded` as
/// client against the built-in `bsd` as server, and the other way round. Every scenario
/// runs except those that build network namespaces (they take minutes, and the kit runs
/// them on the built-in backends).
///
/// Serialized: the kit counts the process's descriptors around each run.
@Suite("Conformance of a loaded backend", .serialized)
struct LoadedConformanceTests {
    init() {
        ConformanceKit.prepareProcess()
    }

    static let namespaceScenarios: Set<String> = Set([
        ConformanceScenario.linkDownStallsCalls, .blackHoleStallsCalls, .injectedResetEndsCall,
        .networkSwitchEndsCalls, .noConnectivityFailsCallsAtOnce, .linkFlapIsOneChange,
    ].map(\.name))

    static let scenarios = ConformanceKit.scenarios.map(\.name).filter { !namespaceScenarios.contains($0) }

    @Test(
        "The loaded backend passes the kit as client and as server against the built-in bsd",
        arguments: scenarios, ["bsd-loaded→bsd", "bsd→bsd-loaded"])
    func scenario(_ name: String, pair: String) async throws {
        let scenario = try #require(ConformanceKit.scenario(named: name))
        let loaded = try Fixtures.bsdLoaded.get()
        let bsd = try Backends.registry.backend(named: "bsd")
        let (client, server) = pair == "bsd-loaded→bsd" ? (loaded, bsd) : (bsd, loaded)
        do {
            try await ConformanceKit.run(scenario, client: client, server: server)
        } catch let failure as ConformanceFailure {
            Issue.record("\(failure)")
        } catch let skip as ConformanceSkip {
            try Test.cancel("skipped: \(skip.reason)")
        }
    }
}
