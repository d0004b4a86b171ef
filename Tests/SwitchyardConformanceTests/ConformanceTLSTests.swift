import Switchyard
import SwitchyardBackends
import SwitchyardConformance
import SwitchyardConformanceTLS
import Testing

/// The TLS pairs: how they are made and chosen, and `switchyard-conformance --tls`.
///
/// Serialized: runs count the process's descriptors (see `ConformanceTests`).
@Suite("Conformance over TLS", .serialized)
struct ConformanceTLSTests {
    init() {
        ConformanceKit.prepareProcess()
    }

    @Test("The TLS pairs are TLS over every plaintext pair, each on a +tls network and carrying the certificates")
    func pairsWrapEveryPlainPair() throws {
        let directory = try testCertificates.get()
        let pairs = try ConformanceTLS.pairs(of: Backends.registry.all, certificateDirectory: directory)
        let plain = ConformanceKit.pairs(of: Backends.registry.all)
        #expect(pairs.map(\.description) == plain.map { "\($0.client.name)+tls→\($0.server.name)+tls" })
        for pair in pairs {
            #expect(pair.client.network.hasSuffix("+tls") && pair.client.network == pair.server.network, "\(pair)")
            #expect(pair.tls?.certificateDirectory == directory)
            #expect(pair.tls.map { "\($0.clientBase.name)+tls→\($0.serverBase.name)+tls" } == pair.description)
        }
    }

    @Test("--pair names a TLS pair with +tls on both sides; +tls on one side only is an error; plain names are left alone")
    func selectsTLSPairs() throws {
        var made = 0
        let directory = try testCertificates.get()
        let (tls, plain) = try ConformanceTLS.selectPairs(
            registry: Backends.registry, pairs: ["bsd+tls:libuv+tls", "bsd:memory", "memory+tls→memory+tls"],
            certificateDirectory: { made += 1; return directory })
        #expect(tls.map(\.description) == ["bsd+tls→libuv+tls", "memory+tls→memory+tls"])
        #expect(plain == ["bsd:memory"])
        #expect(made == 2)
        #expect(throws: ConformanceSelectionError.self) {
            _ = try ConformanceTLS.selectPairs(registry: Backends.registry, pairs: ["bsd+tls:libuv"], certificateDirectory: { directory })
        }
        #expect(throws: ConformanceSelectionError.self) {
            _ = try ConformanceTLS.selectPairs(registry: Backends.registry, pairs: ["nope+tls:bsd+tls"], certificateDirectory: { directory })
        }
    }

    @Test("A TLS scenario skips a plaintext pair, saying it needs a TLS pair")
    func tlsScenarioSkipsPlainPairs() async throws {
        let memory = try Backends.registry.backend(named: "memory")
        let outcome = await ConformanceKit.outcome(of: .tlsWrongHostName, client: memory, server: memory, log: { _ in })
        #expect(outcome.status == .skipped)
        #expect(outcome.reason?.contains("not a pair of TLS backends") == true, "\(String(describing: outcome.reason))")
    }

    @Test("switchyard-conformance --tls runs the selected pairs over TLS; --pair bsd+tls:libuv+tls adds one")
    func toolRunsTLSPairs() async throws {
        let result = try await Tool.run(["--tls", "--backend", "memory", "--pair", "bsd+tls:libuv+tls", "--scenario", "3", "--scenario", "65", "--json", "-"])
        #expect(result.status == 0, "\(result.standardError)")
        let report = try ConformanceReport(json: Array(result.standardOutput.utf8))
        #expect(report.columns.map(\.description) == ["memory+tls→memory+tls", "bsd+tls→libuv+tls"])
        #expect(report.summary == ConformanceReport.Summary(passed: 4))

        let oneSided = try await Tool.run(["--pair", "bsd+tls:libuv", "--scenario", "1"])
        #expect(oneSided.status == 2)
        #expect(oneSided.standardError.contains("a TLS client reaches only a TLS server"), "\(oneSided.standardError)")
    }
}
