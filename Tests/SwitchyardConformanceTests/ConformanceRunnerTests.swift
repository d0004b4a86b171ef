import Foundation
import Subprocess
import Switchyard
import SwitchyardBackends
import SwitchyardConformance
import Synchronization
import Testing

/// The runner's selection, its report of real runs (a few quick scenarios on the memory
/// backend), a backend that breaks the contract, and the `switchyard-conformance` tool.
///
/// Serialized: runs count the process's descriptors (see `ConformanceTests`).
@Suite("Conformance runner", .serialized)
struct ConformanceRunnerTests {
    /// The shipped backends and the contract-breaking double.
    static let registry: BackendRegistry = {
        let registry = BackendRegistry()
        for backend in Backends.registry.all { registry.register(backend) }
        registry.register(DoubledCompletionBackend.backend)
        return registry
    }()

    static func names(_ pairs: [ConformancePair]) -> [String] { pairs.map(\.description) }

    init() {
        ConformanceKit.prepareProcess()
    }

    // MARK: - Selection

    @Test("With no backend and no pair, every pair of every registered backend runs")
    func defaultPairs() throws {
        let runner = try ConformanceRunner(registry: Backends.registry)
        #expect(Self.names(runner.pairs) == Self.names(ConformanceKit.pairs(of: Backends.registry.all)))
        #expect(runner.scenarios.count == ConformanceKit.scenarios.count)
        #expect(runner.scenarios.map(\.number) == Array(1...ConformanceKit.scenarios.count))
    }

    @Test("--backend runs every pair among the backends given, each once; --pair adds a pair")
    func backendsAndPairs() throws {
        let socket = try ConformanceRunner(registry: Self.registry, backends: ["bsd", "libuv", "bsd"])
        #expect(Self.names(socket.pairs) == ["bsd→bsd", "bsd→libuv", "libuv→bsd", "libuv→libuv"])
        let memory = try ConformanceRunner(registry: Self.registry, backends: ["memory"], pairs: ["libuv:bsd", "libuv→bsd", "memory:memory"])
        #expect(Self.names(memory.pairs) == ["memory→memory", "libuv→bsd"])
        let pairOnly = try ConformanceRunner(registry: Self.registry, pairs: ["bsd:libuv"])
        #expect(Self.names(pairOnly.pairs) == ["bsd→libuv"])
    }

    @Test("An unknown backend, a malformed pair, or a pair across networks is an error naming what there is")
    func selectionErrors() {
        let unknown = #expect(throws: ConformanceSelectionError.self) {
            try ConformanceRunner(registry: Backends.registry, backends: ["memory", "nope"])
        }
        #expect(unknown?.message == "--backend: unknown backend 'nope'; registered backends: bsd, libuv, memory, simulation")
        let unknownInPair = #expect(throws: ConformanceSelectionError.self) {
            try ConformanceRunner(registry: Backends.registry, pairs: ["bsd:nope"])
        }
        #expect(unknownInPair?.message.contains("unknown backend 'nope'; registered backends: bsd, libuv, memory, simulation") == true)
        for malformed in ["bsd", "bsd:", ":bsd", "bsd:libuv:memory"] {
            let error = #expect(throws: ConformanceSelectionError.self) {
                try ConformanceRunner(registry: Backends.registry, pairs: [malformed])
            }
            #expect(error?.message.contains("expected CLIENT:SERVER") == true, "\(malformed)")
        }
        let across = #expect(throws: ConformanceSelectionError.self) {
            try ConformanceRunner(registry: Backends.registry, pairs: ["bsd:memory"])
        }
        #expect(across?.message.contains("network 'tcp'") == true)
        let empty = #expect(throws: ConformanceSelectionError.self) { try ConformanceRunner(registry: BackendRegistry()) }
        #expect(empty?.message == "no backend is registered")
    }

    @Test("--scenario takes numbers, ranges, exact names and parts of names, and runs them in the kit's order")
    func scenarioSelection() throws {
        let all = ConformanceKit.scenarios
        func numbers(_ selectors: [String]) throws -> [Int] {
            try ConformanceRunner.selectScenarios(selectors).map(\.number)
        }
        #expect(try numbers(["8"]) == [8])
        #expect(try numbers(["30-32", "8", "31"]) == [8, 30, 31, 32])
        #expect(try numbers([all[16].name]) == [17])
        let ipv6 = try numbers(["ipv6"])
        #expect(!ipv6.isEmpty)
        #expect(ipv6.allSatisfy { all[$0 - 1].name.lowercased().contains("ipv6") })
        #expect(try ConformanceRunner.selectScenarios([]).count == all.count)

        for bad in ["0", String(all.count + 1), "999", "5-3", "1-999", "no such scenario at all", ""] {
            let error = #expect(throws: ConformanceSelectionError.self, "\(bad)") {
                try ConformanceRunner.selectScenarios([bad])
            }
            #expect(error?.message.hasPrefix("--scenario") == true)
        }
    }

    @Test("--list shows the selected scenarios with their numbers, the registered backends and the pairs")
    func listing() throws {
        let runner = try ConformanceRunner(registry: Backends.registry, backends: ["memory"], scenarios: ["8", "9"])
        let text = runner.listing(registry: Backends.registry)
        #expect(text.contains("Scenarios (2):\n  8. Connecting to a port nobody listens on"))
        #expect(text.contains("  libuv (network tcp): "))
        #expect(text.hasSuffix("Pairs (1): memory→memory\n"))
    }

    // MARK: - Running

    @Test("Running records each outcome with its measurements, reports skips as skipped, and says so as it goes")
    func runReportsOutcomes() async throws {
        let runner = try ConformanceRunner(registry: Self.registry, backends: ["memory"], scenarios: ["1", "8", "30"])
        let events = Mutex<[ConformanceRunner.Progress]>([])
        let logged = Mutex<[String]>([])
        let report = await runner.run(log: { line in logged.withLock { $0.append(line) } }) { progress in
            events.withLock { $0.append(progress) }
        }
        let memory = ConformanceReport.Column(client: "memory", server: "memory")

        #expect(report.outcome(scenario: 1, column: memory)?.status == .passed, "\(String(describing: report.outcome(scenario: 1, column: memory)))")
        let refused = try #require(report.outcome(scenario: 8, column: memory))
        #expect(refused.status == .passed)
        #expect(refused.measurements.map(\.name) == ["refused"])
        #expect(refused.measurements.first.map { $0.unit == .milliseconds && $0.value >= 0 && $0.value < 2000 } == true)
        let namespaces = try #require(report.outcome(scenario: 30, column: memory))
        #expect(namespaces.status == .skipped)
        #expect(namespaces.reason == "memory→memory has no TCP sockets to put in network namespaces")
        #expect(report.summary == ConformanceReport.Summary(passed: 2, failed: 0, skipped: 1))
        #expect(report.exitStatus == 0)

        let progress = events.withLock { $0 }
        #expect(progress.map { $0.outcome == nil } == [true, false, true, false, true, false])
        #expect(progress.map(\.index) == [1, 1, 2, 2, 3, 3])
        #expect(progress.last?.description.hasPrefix("[3/3] memory→memory 30. With a stall timeout") == true)
        #expect(progress.last?.result == "skipped: memory→memory has no TCP sockets to put in network namespaces")
        #expect(progress[3].result.hasPrefix("passed in ") && progress[3].result.contains("(refused "))
        // The scenarios' own lines went to the log given, not to standard output only.
        #expect(logged.withLock { $0 }.contains { $0.hasPrefix("[conformance] [memory→memory]") && $0.contains("refused after") })
    }

    @Test("A backend that runs a write completion twice is reported FAILED on that scenario, and the exit status is 1")
    func contractBreakerFails() async throws {
        let runner = try ConformanceRunner(registry: Self.registry, backends: [DoubledCompletionBackend.name], scenarios: ["11"])
        #expect(Self.names(runner.pairs) == ["doubled→doubled"])
        let finished = Mutex<[String]>([])
        let report = await runner.run { progress in
            if progress.outcome != nil { finished.withLock { $0.append(progress.description) } }
        }
        let outcome = try #require(report.outcome(scenario: 11, column: .init(client: "doubled", server: "doubled")))
        #expect(outcome.status == .failed)
        #expect(outcome.reason?.contains("write completions") == true, "\(outcome)")
        #expect(outcome.file?.hasPrefix("SwitchyardConformance/") == true)
        #expect(report.hasFailures)
        #expect(report.exitStatus == 1)

        // The report names the scenario and says FAILED in its row, the reason below.
        let scenario = ConformanceKit.scenarios[10].name
        let text = report.text()
        let lines = text.split(separator: "\n").map(String.init)
        #expect(lines.contains { $0.hasPrefix("11  ") && scenario.hasPrefix(String($0.dropFirst(4).prefix(30))) && $0.contains("FAILED, see below") }, "\(text)")
        #expect(lines.contains("11. \(scenario)"), "\(text)")
        #expect(lines.contains { $0.hasPrefix("    [11 doubled→doubled] FAILED: ") && $0.contains("write completions") }, "\(text)")
        #expect(finished.withLock { $0 }.first?.contains("11. \(scenario.prefix(20))") == true)
        #expect(finished.withLock { $0 }.first?.contains(": FAILED in ") == true)
    }

    @Test("A backend whose transport cannot be made is FAILED with the reason, not skipped or passed")
    func transportNotMade() async throws {
        struct Refusal: Error, CustomStringConvertible { var description: String { "no transport today" } }
        let backend = TransportBackend(name: "unmakeable", summary: "cannot make a transport", usesSockets: false) { _ in
            throw Refusal()
        }
        let scenario = try #require(ConformanceKit.scenario(named: ConformanceKit.scenarios[0].name))
        let logged = Mutex<[String]>([])
        let outcome = await ConformanceKit.outcome(of: scenario, client: backend, server: backend) { line in
            logged.withLock { $0.append(line) }
        }
        #expect(outcome.status == .failed)
        #expect(outcome.reason == "making the client transport 'unmakeable' failed: no transport today")
        #expect(outcome.pair == "unmakeable→unmakeable")
        #expect(logged.withLock { $0 }.contains { $0.contains("FAILED: making the client transport") })
        await #expect(throws: ConformanceFailure.self) {
            try await ConformanceKit.run(scenario, client: backend, server: backend)
        }
    }

    // MARK: - The tool

    @Test("switchyard-conformance exits 2 for an unknown backend, naming the registered ones, and runs nothing")
    func toolRejectsUnknownBackend() async throws {
        let result = try await Tool.run(["--backend", "nope", "--scenario", "1"])
        #expect(result.status == 2)
        #expect(result.standardError == "switchyard-conformance: error: --backend: unknown backend 'nope'; registered backends: bsd, libuv, memory, simulation\n")
        #expect(result.standardOutput.isEmpty)
        let bogus = try await Tool.run(["--bogus"])
        #expect(bogus.status == 2)
        #expect(bogus.standardError.contains("Unknown option '--bogus'"))
    }

    @Test("switchyard-conformance --json - writes the report to standard output and the table to standard error, exit 0")
    func toolWritesJSON() async throws {
        let result = try await Tool.run(["--backend", "memory", "--scenario", "8", "--json", "-"])
        #expect(result.status == 0, "\(result.standardError)")
        let report = try ConformanceReport(json: Array(result.standardOutput.utf8))
        #expect(report.summary == ConformanceReport.Summary(passed: 1))
        #expect(report.outcomes.first?.measurements.map(\.name) == ["refused"])
        #expect(result.standardError.contains("[1/1] memory→memory 8. Connecting to a port nobody listens on"))
        #expect(result.standardError.contains("Switchyard conformance: 1 scenario on 1 pair: 1 passed, 0 FAILED, 0 skipped"))
    }
}

extension ConformanceRunnerTests {
    @Test("switchyard-conformance --backend-library runs a backend loaded at run time, paired with the built-in ones; a bad library is exit 2 naming the file")
    func toolLoadsBackendLibrary() async throws {
        let library = try Tool.sibling("libSwitchyardBSDLoadedFixture.so")
        let result = try await Tool.run([
            "--backend-library", library, "--backend", "bsd-loaded", "--backend", "bsd", "--scenario", "1", "--json", "-",
        ])
        #expect(result.status == 0, "\(result.standardError)")
        let report = try ConformanceReport(json: Array(result.standardOutput.utf8))
        #expect(report.columns.map(\.description) == ["bsd-loaded→bsd-loaded", "bsd-loaded→bsd", "bsd→bsd-loaded", "bsd→bsd"])
        #expect(report.summary == ConformanceReport.Summary(passed: 4))

        let bad = try await Tool.run(["--backend-library", "/etc/hostname", "--scenario", "1"])
        #expect(bad.status == 2)
        #expect(bad.standardError.hasPrefix("switchyard-conformance: error: cannot load backend library '/etc/hostname'"), "\(bad.standardError)")
        #expect(bad.standardOutput.isEmpty)
    }
}

/// The `switchyard-conformance` executable, found next to the test binary (the build
/// products directory), run to completion.
enum Tool {
    struct Result {
        var status: Int32
        var standardOutput: String
        var standardError: String
    }

    static func path() throws -> String {
        try sibling("switchyard-conformance")
    }

    /// A build product named `name` in the build products directory.
    static func sibling(_ name: String) throws -> String {
        let exe = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        var directory = URL(fileURLWithPath: exe).deletingLastPathComponent()
        for _ in 0..<3 {
            let candidate = directory.appendingPathComponent(name).path
            if FileManager.default.fileExists(atPath: candidate) { return candidate }
            directory = directory.deletingLastPathComponent()
        }
        throw ToolNotFound(name: name)
    }

    struct ToolNotFound: Error, CustomStringConvertible {
        var name: String
        var description: String {
            "cannot find \(name) next to the tests; build it (swift build --build-tests builds it)"
        }
    }

    /// Runs the tool (or the executable at `executable`) to its end with swift-subprocess,
    /// which reads both outputs as they come (a full pipe cannot stall the tool). A tool
    /// killed by a signal is 128 + it.
    static func run(_ arguments: [String], executable: String? = nil) async throws -> Result {
        let result = try await Subprocess.run(
            .path(.init(try executable ?? path())), arguments: Arguments(arguments),
            output: .string(limit: 16 << 20), error: .string(limit: 16 << 20))
        let status: Int32 =
            switch result.terminationStatus {
            case .exited(let code): code
            case .signaled(let signal): 128 + signal
            }
        return Result(status: status, standardOutput: result.standardOutput, standardError: result.standardError)
    }
}
