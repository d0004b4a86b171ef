import Glibc
import Switchyard
import SwitchyardBackends
import SwitchyardConformance
import SwitchyardConformanceTLS
import Testing

/// One backend pairing, named `client→server` in test reports.
struct BackendPairArgument: Sendable, Hashable, Codable, CustomTestStringConvertible {
    var client: String
    var server: String

    var testDescription: String { "\(client)→\(server)" }

    /// Every pairing the kit runs over the registered backends.
    static var all: [BackendPairArgument] {
        ConformanceKit.pairs(of: Backends.registry.all).map {
            BackendPairArgument(client: $0.client.name, server: $0.server.name)
        }
    }
}

/// One TLS pairing: TLS over a backend pairing, named `bsd+tls→libuv+tls` in reports.
struct TLSPairArgument: Sendable, Hashable, Codable, CustomTestStringConvertible {
    /// The plaintext backends under the TLS ones.
    var client: String
    var server: String

    var testDescription: String { "\(client)+tls→\(server)+tls" }

    /// TLS over every pairing the kit runs over the registered backends.
    static var all: [TLSPairArgument] {
        BackendPairArgument.all.map { TLSPairArgument(client: $0.client, server: $0.server) }
    }

    /// The pair, with the test certificates (made once per process).
    func pair() throws -> ConformancePair {
        try ConformanceTLS.pair(
            client: Backends.registry.backend(named: client), server: Backends.registry.backend(named: server),
            certificateDirectory: try testCertificates.get())
    }
}

/// The TLS test certificates, made once per test process (scripts/make-test-certs into a
/// temporary directory: no key is committed). The keys go when the test process ends.
let testCertificates: Result<String, ConformanceSelectionError> = Result { () throws(ConformanceSelectionError) in
    let directory = try ConformanceTLS.makeTestCertificates()
    atexit { _ = testCertificates.map(ConformanceTLS.removeTestCertificates) }
    return directory
}

/// The scenarios the conformance test runs: every one, or those that
/// `SWITCHYARD_CONFORMANCE_SCENARIOS` selects (comma-separated, as the tool's
/// `--scenario`: numbers, ranges such as `47-52`, or parts of names). A selector that
/// selects nothing selects nothing here (the tool reports it as an error).
let selectedScenarioNames: [String] = {
    guard let value = getenv("SWITCHYARD_CONFORMANCE_SCENARIOS").map({ String(cString: $0) }), !value.isEmpty else {
        return ConformanceKit.scenarios.map(\.name)
    }
    let selectors = value.split(separator: ",").map(String.init)
    return ((try? ConformanceRunner.selectScenarios(selectors)) ?? []).map(\.scenario.name)
}()

/// Every conformance scenario over every backend pairing, one test case each.
///
/// Serialized: the kit counts the process's open descriptors around each run to catch
/// leaks, so no two runs (and nothing else that opens descriptors) may overlap. Run this
/// target on its own for a reliable leak check:
/// `swift test --filter SwitchyardConformanceTests`; to run some scenarios only,
/// `SWITCHYARD_CONFORMANCE_SCENARIOS=47-52 swift test --filter ConformanceTests/scenario`.
@Suite("Conformance", .serialized)
struct ConformanceTests {
    init() {
        ConformanceKit.prepareProcess()
    }

    @Test(
        "Every backend pairing passes every conformance scenario",
        arguments: selectedScenarioNames, BackendPairArgument.all
    )
    func scenario(_ name: String, pair: BackendPairArgument) async throws {
        let scenario = try #require(ConformanceKit.scenario(named: name))
        let client = try Backends.registry.backend(named: pair.client)
        let server = try Backends.registry.backend(named: pair.server)
        do {
            try await ConformanceKit.run(scenario, client: client, server: server)
        } catch let failure as ConformanceFailure {
            Issue.record("\(failure)")
        } catch let skip as ConformanceSkip {
            // Reported as skipped, with the reason, never as passed. Swift Testing 6.3
            // records a cancelled test case but its console output still counts the case
            // as passed (only a cancelled whole test shows), so a warning says it too:
            // "recorded a warning … skipped: reason", and the run ends "with N warnings".
            Issue.record("skipped: \(skip.reason)", severity: .warning)
            try Test.cancel("skipped: \(skip.reason)")
        }
    }

    @Test(
        "Every TLS pairing (TLS over every backend pairing) passes every conformance scenario",
        arguments: selectedScenarioNames, TLSPairArgument.all
    )
    func scenarioOverTLS(_ name: String, pair: TLSPairArgument) async throws {
        let scenario = try #require(ConformanceKit.scenario(named: name))
        let tlsPair = try pair.pair()
        do {
            try await ConformanceKit.run(scenario, pair: tlsPair)
        } catch let failure as ConformanceFailure {
            Issue.record("\(failure)")
        } catch let skip as ConformanceSkip {
            Issue.record("skipped: \(skip.reason)", severity: .warning)
            try Test.cancel("skipped: \(skip.reason)")
        }
    }

    @Test("The kit's pairs include every registered backend, as client and as server")
    func pairsCoverEveryBackend() {
        let backends = Backends.registry.all
        let pairs = ConformanceKit.pairs(of: backends)
        #expect(!backends.isEmpty)
        for backend in backends {
            #expect(pairs.contains { $0.client.name == backend.name }, "\(backend.name) is never the client")
            #expect(pairs.contains { $0.server.name == backend.name }, "\(backend.name) is never the server")
        }
        var expected = 0
        for network in Set(backends.map(\.network)) {
            let members = backends.filter { $0.network == network }.count
            expected += members * members
        }
        #expect(pairs.count == expected)
        for pair in pairs {
            #expect(pair.client.network == pair.server.network, "\(pair) pairs backends of different networks")
        }
    }

    @Test("Every scenario has a plain-sentence name, is unique, and names checklist items")
    func scenariosAreWellFormed() {
        let names = ConformanceKit.scenarios.map(\.name)
        #expect(Set(names).count == names.count)
        for scenario in ConformanceKit.scenarios {
            #expect(!scenario.checklist.isEmpty, "\(scenario.name) covers no checklist item")
            #expect(scenario.name.first?.isUppercase == true, "\(scenario.name)")
        }
    }
}
