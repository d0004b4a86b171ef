public import Switchyard

/// Runs a selection of the kit (some scenarios, over some backend pairs) one run at a
/// time and gathers a ``ConformanceReport``, saying how each run went as it goes.
///
/// It is what the `switchyard-conformance` tool and the `swift package conformance`
/// command run; a harness of your own can use it the same way:
///
/// ```swift
/// ConformanceKit.prepareProcess()
/// let runner = try ConformanceRunner(registry: registry, backends: ["mine", "bsd"], scenarios: ["1-17"])
/// let report = await runner.run { progress in print(progress) }
/// print(report.text())
/// ```
///
/// Runs never overlap: the kit counts the process's descriptors around each one.
public struct ConformanceRunner: Sendable {
    /// A scenario with its number in ``ConformanceKit/scenarios`` (from 1).
    public struct Entry: Sendable, CustomStringConvertible {
        public var number: Int
        public var scenario: ConformanceScenario

        public init(number: Int, scenario: ConformanceScenario) {
            self.number = number
            self.scenario = scenario
        }

        /// `8. Connecting to a port nobody listens on fails at once …`
        public var description: String { "\(number). \(scenario.name)" }
    }

    /// What the runner reports as it goes: a run started, or a run ended with its outcome.
    public struct Progress: Sendable, CustomStringConvertible {
        /// This run's place, from 1, among ``total``.
        public var index: Int
        /// How many runs there are.
        public var total: Int
        /// The scenario.
        public var entry: Entry
        /// The pair it runs over.
        public var column: ConformanceReport.Column
        /// `nil` when the run starts; how it ended when it has.
        public var outcome: ConformanceOutcome?

        /// `[ 3/185] bsd→libuv 8. Connecting to a port nobody listens on…`: which run this is.
        public var heading: String {
            let width = String(total).count
            let place = String(repeating: " ", count: max(0, width - String(index).count)) + "\(index)/\(total)"
            let name = wrapped(entry.scenario.name, width: 60, lines: 1)[0]
            return "[\(place)] \(column) \(entry.number). \(name)"
        }

        /// How the run ended, in a few words: `passed in 0.2 s (refused 0.1 ms)`,
        /// `FAILED in 5.1 s: reason (file:line)`, `skipped: reason`; empty when it starts.
        public var result: String {
            guard let outcome else { return "" }
            let time = formattedSeconds(outcome.seconds)
            let measured = outcome.measurements.isEmpty ? "" : " (" + outcome.measurements.map(\.description).joined(separator: ", ") + ")"
            switch outcome.status {
            case .passed: return "passed in \(time)\(measured)"
            case .failed: return "FAILED in \(time): \(outcome.explanation ?? "no reason given")"
            case .skipped: return "skipped: \(outcome.reason ?? "no reason given")"
            default: return "\(outcome.status) in \(time)" + (outcome.explanation.map { ": \($0)" } ?? "")
            }
        }

        /// The heading, and the result once there is one.
        public var description: String { outcome == nil ? heading : "\(heading): \(result)" }
    }

    /// The pairs to run over, in order.
    public let pairs: [ConformancePair]
    /// The scenarios to run, in order.
    public let scenarios: [Entry]
    /// The configuration every run's transports are made with.
    public var configuration: TransportConfiguration

    /// A runner of exactly these scenarios over exactly these pairs.
    public init(
        pairs: [ConformancePair], scenarios: [Entry],
        configuration: TransportConfiguration = TransportConfiguration(eventLoopCount: 2)
    ) {
        self.pairs = pairs
        self.scenarios = scenarios
        self.configuration = configuration
    }

    /// A runner of the scenarios and pairs chosen by name, as the tool's options give them.
    ///
    /// - Parameters:
    ///   - registry: the backends there are to choose from.
    ///   - backends: backend names: every pair among these backends (the kit's
    ///     ``ConformanceKit/pairs(of:)``: backends of one network, mixed pairs included).
    ///   - pairs: `CLIENT:SERVER` (or `CLIENT→SERVER`): this pair, in addition.
    ///   - scenarios: scenario numbers (`8`), ranges (`30-35`), or names: a name runs the
    ///     scenario of exactly that name, else every scenario whose name contains it
    ///     (letter case ignored).
    ///   - configuration: what every run's transports are made with (``configuration``).
    ///
    /// With neither `backends` nor `pairs`, every pair of every registered backend; with no
    /// `scenarios`, every scenario.
    /// - Throws: ``ConformanceSelectionError`` for a name that is not registered (it lists
    ///   the registered ones), a malformed pair, a pair of backends on different networks,
    ///   or a scenario selector that selects nothing.
    public init(
        registry: BackendRegistry, backends: [String] = [], pairs: [String] = [], scenarios: [String] = [],
        configuration: TransportConfiguration = TransportConfiguration(eventLoopCount: 2)
    ) throws(ConformanceSelectionError) {
        self.init(
            pairs: try Self.selectPairs(registry: registry, backends: backends, pairs: pairs),
            scenarios: try Self.selectScenarios(scenarios),
            configuration: configuration)
    }

    /// An empty report of this selection: every cell not run yet.
    public var emptyReport: ConformanceReport { ConformanceReport(scenarios: scenarios, pairs: pairs) }

    /// Runs every selected scenario over every selected pair, scenario by scenario, one
    /// run at a time, and returns the report.
    ///
    /// - Parameters:
    ///   - log: where the scenarios' own log lines go (none by default).
    ///   - progress: called when each run starts and when it ends.
    public func run(
        log: @escaping @Sendable (String) -> Void = { _ in },
        progress: (Progress) -> Void
    ) async -> ConformanceReport {
        var report = emptyReport
        let started = ContinuousClock.now
        let total = scenarios.count * pairs.count
        var index = 0
        for entry in scenarios {
            for pair in pairs {
                index += 1
                let column = ConformanceReport.Column(client: pair.client.name, server: pair.server.name)
                progress(Progress(index: index, total: total, entry: entry, column: column))
                let outcome = await ConformanceKit.outcome(of: entry.scenario, pair: pair, configuration: configuration, log: log)
                report.record(outcome, scenario: entry.number)
                report.seconds = (ContinuousClock.now - started).inSeconds
                progress(Progress(index: index, total: total, entry: entry, column: column, outcome: outcome))
            }
        }
        return report
    }

    /// What a selection would run, for `--list`: the scenarios (number, name, checklist
    /// items), the registered backends (name, network, summary), and the pairs.
    public func listing(registry: BackendRegistry) -> String {
        var text = "Scenarios (\(scenarios.count)):\n"
        let width = String(scenarios.map(\.number).max() ?? 0).count
        for entry in scenarios {
            let number = String(repeating: " ", count: max(0, width - String(entry.number).count)) + "\(entry.number)"
            text += "  \(number). \(entry.scenario.name) [\(entry.scenario.checklist.joined(separator: ", "))]\n"
        }
        text += "\nRegistered backends:\n"
        for backend in registry.all {
            text += "  \(backend.name) (network \(backend.network)): \(backend.summary)\n"
        }
        text += "\nPairs (\(pairs.count)): " + pairs.map(\.description).joined(separator: ", ") + "\n"
        return text
    }

    // MARK: - Selection

    /// The pairs `backends` and `pairs` select (see ``init(registry:backends:pairs:scenarios:configuration:)``),
    /// each once, in the order given.
    public static func selectPairs(
        registry: BackendRegistry, backends: [String], pairs: [String]
    ) throws(ConformanceSelectionError) -> [ConformancePair] {
        func backend(_ name: String, _ option: String) throws(ConformanceSelectionError) -> TransportBackend {
            do {
                return try registry.backend(named: name)
            } catch {
                throw ConformanceSelectionError("\(option): \(error.message)")
            }
        }
        var selected: [ConformancePair] = []
        func add(_ pair: ConformancePair) {
            if !selected.contains(where: { $0.client.name == pair.client.name && $0.server.name == pair.server.name }) {
                selected.append(pair)
            }
        }
        if backends.isEmpty && pairs.isEmpty {
            let all = registry.all
            guard !all.isEmpty else { throw ConformanceSelectionError("no backend is registered") }
            ConformanceKit.pairs(of: all).forEach(add)
            return selected
        }
        var chosen: [TransportBackend] = []
        for name in backends {
            let found = try backend(name, "--backend")
            if !chosen.contains(where: { $0.name == found.name }) { chosen.append(found) }
        }
        ConformanceKit.pairs(of: chosen).forEach(add)
        for text in pairs {
            let separator: Character? = text.contains("→") ? "→" : text.contains(":") ? ":" : nil
            let parts = separator.map { text.split(separator: $0, omittingEmptySubsequences: false).map(String.init) } ?? []
            guard parts.count == 2, !parts[0].isEmpty, !parts[1].isEmpty else {
                throw ConformanceSelectionError("--pair '\(text)': expected CLIENT:SERVER, for example bsd:libuv")
            }
            let client = try backend(parts[0], "--pair '\(text)'")
            let server = try backend(parts[1], "--pair '\(text)'")
            guard client.network == server.network else {
                throw ConformanceSelectionError(
                    "--pair '\(text)': \(client.name) travels on network '\(client.network)' and \(server.name) on '\(server.network)': a client of one cannot reach a server of the other")
            }
            add(ConformancePair(client: client, server: server))
        }
        return selected
    }

    /// The scenarios `selectors` select (numbers, ranges, names; see
    /// ``init(registry:backends:pairs:scenarios:configuration:)``), each once, in the
    /// kit's order; every scenario when `selectors` is empty.
    public static func selectScenarios(
        _ selectors: [String], from all: [ConformanceScenario] = ConformanceKit.scenarios
    ) throws(ConformanceSelectionError) -> [Entry] {
        let entries = all.enumerated().map { Entry(number: $0.offset + 1, scenario: $0.element) }
        if selectors.isEmpty { return entries }
        var numbers = Set<Int>()
        for selector in selectors {
            let text = selector.trimmingSpaces
            if let number = Int(text) {
                guard entries.indices.contains(number - 1) else {
                    throw ConformanceSelectionError("--scenario \(text): there is no scenario \(number); they are numbered 1 to \(entries.count) (--list shows them)")
                }
                numbers.insert(number)
                continue
            }
            let bounds = text.split(separator: "-", omittingEmptySubsequences: false)
            if bounds.count == 2, let low = Int(bounds[0]), let high = Int(bounds[1]) {
                guard low <= high, entries.indices.contains(low - 1), entries.indices.contains(high - 1) else {
                    throw ConformanceSelectionError("--scenario \(text): not a range of scenarios; they are numbered 1 to \(entries.count)")
                }
                numbers.formUnion(low...high)
                continue
            }
            if let exact = entries.first(where: { $0.scenario.name == text }) {
                numbers.insert(exact.number)
                continue
            }
            let needle = text.lowercased()
            let matches = entries.filter { $0.scenario.name.lowercased().contains(needle) }
            guard !needle.isEmpty, !matches.isEmpty else {
                throw ConformanceSelectionError("--scenario '\(text)': no scenario is numbered or named so, and no name contains it (--list shows them)")
            }
            numbers.formUnion(matches.map(\.number))
        }
        return entries.filter { numbers.contains($0.number) }
    }
}

/// A selection of backends, pairs or scenarios that names something there is not.
public struct ConformanceSelectionError: Error, Sendable, CustomStringConvertible {
    /// What was wrong, naming the option and what there is to choose from.
    public var message: String

    public init(_ message: String) {
        self.message = message
    }

    public var description: String { message }
}

extension String {
    /// The string without leading and trailing spaces.
    fileprivate var trimmingSpaces: String {
        var text = Substring(self)
        while text.first == " " { text.removeFirst() }
        while text.last == " " { text.removeLast() }
        return String(text)
    }
}
