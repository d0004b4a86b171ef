import Switchyard
import SwitchyardBSD
import SwitchyardConformance
import SwitchyardUV
import Testing

/// The Swift block of the conformance kit's overview (SwitchyardConformance.docc), compiled
/// and run: the code between the doc-block markers is the block (``DocumentationBlockTests``
/// holds them to each other), with what it leaves implicit (`myBackend`) set up before it
/// and what it promises checked after it.
@Suite("The kit's articles' examples", .serialized)
struct KitArticleExampleTests {
    @Test("The kit's overview: it runs in-process over the pairs of a backend's network", .timeLimit(.minutes(3)))
    func conformanceExample() async throws {
        let myBackend = UVTransport.backend
        ConformanceKit.prepareProcess()
        // doc-block begin
        let scenarios: [ConformanceScenario] = [.connectAcceptAndClose, .halfClose, .callEchoIntegrity]  // or ConformanceKit.scenarios
        for scenario in scenarios {
            for pair in ConformanceKit.pairs(of: [myBackend, BSDTransport.backend]) {
                try await ConformanceKit.run(scenario, pair: pair)   // throws a ConformanceFailure, or a ConformanceSkip
            }
        }
        // doc-block end
        #expect(ConformanceKit.pairs(of: [myBackend, BSDTransport.backend]).count == 4)
    }
}
