import Switchyard
import SwitchyardBackends
import SwitchyardConformance
import Testing

/// The conformance kit over a backend loaded from a library: `bsd-loaded` (bsd in
/// `libSwitchyardBSDLoadedFixture.so`, with its own copy of every module). The whole kit
/// runs on `bsd-loaded→bsd-loaded`, where every call, byte, completion and error crosses
/// the C boundary on both sides. Against the built-in `bsd`, as client and as server, run
/// the scenarios about what crosses between a loaded and a built-in backend: bytes,
/// half-close, resets, write completions, demand, push-back, calls, metadata and shutdown
/// (the faults injected in network namespaces exercise the kernel's path, the same as on
/// the loaded pair; CI time goes to the TLS pairs instead). (The scenarios that build
/// network namespaces need root and skip without it, as in the kit's own tests.)
///
/// Serialized: the kit counts the process's descriptors around each run.
@Suite("Conformance of a loaded backend", .serialized)
struct LoadedConformanceTests {
    init() {
        ConformanceKit.prepareProcess()
    }

    @Test("The loaded backend passes the whole kit against itself", arguments: ConformanceKit.scenarios.map(\.name), ["bsd-loaded→bsd-loaded"])
    func scenario(_ name: String, pair: String) async throws {
        try await run(name, pair: pair)
    }

    /// What crosses between a loaded backend and a built-in one.
    static let mixedPairScenarios: [ConformanceScenario] = [
        .connectAcceptAndClose, .echoIntegrity, .halfClose, .peerCloseEndsStream, .peerResetIsUnavailable,
        .operationsAfterClose, .writeCompletions, .demandDrivenReads, .slowReaderPushesBack, .shutdownClosesConnections,
        .acceptThenClose, .callEchoIntegrity, .callWriteReports, .callProtocolErrors, .callBrokenConnectionIsUnavailable,
        .resetWithQueuedWrites, .writeToHalfOpenPeer, .callMetadata,
    ]

    @Test(
        "The loaded backend passes the kit's byte, call and shutdown scenarios as client and as server against the built-in bsd",
        arguments: mixedPairScenarios.map(\.name), ["bsd-loaded→bsd", "bsd→bsd-loaded"])
    func mixedPairScenario(_ name: String, pair: String) async throws {
        try await run(name, pair: pair)
    }

    private func run(_ name: String, pair: String) async throws {
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
