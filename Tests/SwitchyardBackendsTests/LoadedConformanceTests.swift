import Switchyard
import SwitchyardBackends
import SwitchyardConformance
import Testing

/// The whole conformance kit over a backend loaded from a library: `bsd-loaded` (bsd in
/// `libSwitchyardBSDLoadedFixture.so`, with its own copy of every module) as client
/// against the built-in `bsd` as server, the other way round, and against itself. Every
/// call, byte, completion and error of these runs crosses the C boundary. (The scenarios
/// that build network namespaces need root and skip without it, as in the kit's own
/// tests.)
///
/// Serialized: the kit counts the process's descriptors around each run.
@Suite("Conformance of a loaded backend", .serialized)
struct LoadedConformanceTests {
    init() {
        ConformanceKit.prepareProcess()
    }

    @Test(
        "The loaded backend passes the kit as client and as server, against the built-in bsd and itself",
        arguments: ConformanceKit.scenarios.map(\.name), ["bsd-loaded→bsd", "bsd→bsd-loaded", "bsd-loaded→bsd-loaded"])
    func scenario(_ name: String, pair: String) async throws {
        let scenario = try #require(ConformanceKit.scenario(named: name))
        let loaded = try Fixtures.bsdLoaded.get()
        let bsd = try Backends.registry.backend(named: "bsd")
        let names = pair.split(separator: "→").map(String.init)
        let client = names[0] == "bsd" ? bsd : loaded
        let server = names[1] == "bsd" ? bsd : loaded
        do {
            try await ConformanceKit.run(scenario, client: client, server: server)
        } catch let failure as ConformanceFailure {
            Issue.record("\(failure)")
        } catch let skip as ConformanceSkip {
            // Reported as skipped, with the reason, never as passed.
            try Test.cancel("skipped: \(skip.reason)")
        }
    }
}
