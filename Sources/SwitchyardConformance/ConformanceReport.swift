/// The kit's results as a table: one row per scenario, one column per backend pair, and
/// in each cell how that run ended (``ConformanceOutcome``: passed, failed with the
/// reason, skipped with the reason, and what it measured).
///
/// ``ConformanceRunner`` fills one in as it goes. It renders for people
/// (``text(nameWidth:)``) and for machines (``json()``, read back with
/// ``init(json:)``); a cell the run did not reach is `nil` (`not run`). It also says
/// which kit made it (``kitVersion``), how the run was chosen (``settings``, which the
/// tool fills in) and, in its JSON, the counts (``totals``).
public struct ConformanceReport: Sendable, Hashable, Codable {
    /// The version of this report's JSON layout; a reader checks it before anything else.
    ///
    /// Fields added later are optional to a reader (version 1 gained `kitVersion`,
    /// `settings` and `totals`): only a change that an older reader would misread bumps
    /// it.
    public static let formatVersion = 1

    /// A column: the backend pair its runs were made over.
    public struct Column: Sendable, Hashable, Codable, CustomStringConvertible {
        /// The client backend's name.
        public var client: String
        /// The server backend's name.
        public var server: String

        public init(client: String, server: String) {
            self.client = client
            self.server = server
        }

        /// `client→server`.
        public var description: String { "\(client)→\(server)" }
    }

    /// A row: one scenario and its outcome on each column.
    public struct Row: Sendable, Hashable, Codable {
        /// The scenario's number in ``ConformanceKit/scenarios`` (from 1).
        public var number: Int
        /// The scenario's name.
        public var name: String
        /// The items of <doc:KitChecklist> it covers.
        public var checklist: [String]
        /// One per column, in column order; `nil` where it has not run.
        public var outcomes: [ConformanceOutcome?]

        public init(number: Int, name: String, checklist: [String], outcomes: [ConformanceOutcome?]) {
            self.number = number
            self.name = name
            self.checklist = checklist
            self.outcomes = outcomes
        }
    }

    /// How many cells ended which way.
    public struct Summary: Sendable, Hashable, Codable {
        public var passed = 0
        public var failed = 0
        public var skipped = 0
        /// Cells the run did not reach (it was stopped), or of a status this version does not know.
        public var notRun = 0

        public init(passed: Int = 0, failed: Int = 0, skipped: Int = 0, notRun: Int = 0) {
            self.passed = passed
            self.failed = failed
            self.skipped = skipped
            self.notRun = notRun
        }
    }

    /// The counts of a report: its size, how its cells ended, how long it took.
    public struct Totals: Sendable, Hashable, Codable {
        /// Rows.
        public var scenarios: Int
        /// Columns.
        public var pairs: Int
        /// Cells: scenarios × pairs.
        public var runs: Int
        public var passed: Int
        public var failed: Int
        public var skipped: Int
        /// Cells the run did not reach, or of a status this version does not know.
        public var notRun: Int
        /// Wall-clock seconds the whole run took.
        public var seconds: Double

        public init(scenarios: Int, pairs: Int, runs: Int, passed: Int, failed: Int, skipped: Int, notRun: Int, seconds: Double) {
            self.scenarios = scenarios
            self.pairs = pairs
            self.runs = runs
            self.passed = passed
            self.failed = failed
            self.skipped = skipped
            self.notRun = notRun
            self.seconds = seconds
        }
    }

    /// How a run was chosen and where it ran: what a reader of a saved report needs to
    /// run it again or to tell why scenarios were skipped.
    public struct Settings: Sendable, Hashable, Codable {
        /// The tool's arguments as given (`["--backend", "unix", "--scenario", "1-3"]`).
        public var arguments: [String]
        /// The backends the selected pairs use, each once, in the order of the pairs.
        public var backends: [String]
        /// The selected pairs, `client→server`, in the order they ran.
        public var pairs: [String]
        /// The selected scenarios' numbers, in the order they ran.
        public var scenarios: [Int]
        /// Whether the run was made as root: the scenarios that need network namespaces
        /// run only then, and are skipped otherwise.
        public var root: Bool
        /// The backend libraries loaded for the run (`--backend-library`), as given.
        public var backendLibraries: [String]

        public init(arguments: [String], backends: [String], pairs: [String], scenarios: [Int], root: Bool, backendLibraries: [String]) {
            self.arguments = arguments
            self.backends = backends
            self.pairs = pairs
            self.scenarios = scenarios
            self.root = root
            self.backendLibraries = backendLibraries
        }
    }

    /// ``formatVersion`` when made; what the JSON said when read.
    public var version: Int
    /// ``ConformanceKit/version`` when made; what the JSON said when read (`nil` for a
    /// report written before reports carried it).
    public var kitVersion: String?
    /// How the run was chosen; `nil` unless its maker filled it in (the tool does).
    public var settings: Settings?
    /// The pairs, in the order they run.
    public var columns: [Column]
    /// The scenarios, in the order they run, each with a cell per column.
    public var rows: [Row]
    /// Wall-clock seconds the whole run took.
    public var seconds: Double

    /// A report of `rows` over `columns`; every row must have one cell per column.
    public init(columns: [Column], rows: [Row], seconds: Double = 0) {
        // Programmer misuse only: the runner and the JSON decoder build rows from the columns.
        precondition(rows.allSatisfy { $0.outcomes.count == columns.count }, "every row needs one cell per column (a programming error)")
        self.version = Self.formatVersion
        self.kitVersion = ConformanceKit.version
        self.columns = columns
        self.rows = rows
        self.seconds = seconds
    }

    /// An empty report (every cell not run yet) for these scenarios over these pairs.
    public init(scenarios: [ConformanceRunner.Entry], pairs: [ConformancePair]) {
        let columns = pairs.map { Column(client: $0.client.name, server: $0.server.name) }
        self.init(
            columns: columns,
            rows: scenarios.map {
                Row(number: $0.number, name: $0.scenario.name, checklist: $0.scenario.checklist,
                    outcomes: Array(repeating: nil, count: columns.count))
            })
    }

    /// Puts `outcome` in the row of scenario `number`, in the column of its pair.
    /// - Returns: whether there was such a cell.
    @discardableResult
    public mutating func record(_ outcome: ConformanceOutcome, scenario number: Int) -> Bool {
        guard let row = rows.firstIndex(where: { $0.number == number }),
            let column = columns.firstIndex(of: Column(client: outcome.client, server: outcome.server)),
            column < rows[row].outcomes.count
        else { return false }
        rows[row].outcomes[column] = outcome
        return true
    }

    /// The outcome of scenario `number` on `column`, if it ran.
    public func outcome(scenario number: Int, column: Column) -> ConformanceOutcome? {
        guard let row = rows.first(where: { $0.number == number }),
            let index = columns.firstIndex(of: column), index < row.outcomes.count
        else { return nil }
        return row.outcomes[index]
    }

    /// Every outcome, row by row.
    public var outcomes: [ConformanceOutcome] { rows.flatMap { $0.outcomes.compactMap { $0 } } }

    /// The cells counted by how they ended.
    public var summary: Summary {
        var summary = Summary()
        for row in rows {
            for outcome in row.outcomes {
                switch outcome?.status {
                case .passed?: summary.passed += 1
                case .failed?: summary.failed += 1
                case .skipped?: summary.skipped += 1
                default: summary.notRun += 1
                }
            }
        }
        return summary
    }

    /// The report's size, the cells counted by how they ended, and ``seconds``.
    public var totals: Totals {
        let summary = self.summary
        return Totals(
            scenarios: rows.count, pairs: columns.count, runs: rows.count * columns.count,
            passed: summary.passed, failed: summary.failed, skipped: summary.skipped, notRun: summary.notRun,
            seconds: seconds)
    }

    /// Whether any run failed. Skips are not failures.
    public var hasFailures: Bool { outcomes.contains { $0.status == .failed } }

    /// The exit status a runner reports: 0 when no run failed (skips are not failures),
    /// 1 when one did. (The tool exits 2 for bad arguments, before there is a report.)
    public var exitStatus: Int32 { hasFailures ? 1 : 0 }
}

extension ConformanceReport.Settings {
    /// The settings of a run of `runner`'s selection: its backends, pairs and scenarios,
    /// with what the runner cannot know.
    ///
    /// - Parameters:
    ///   - runner: the selection.
    ///   - arguments: the tool's arguments as given.
    ///   - root: whether the run is made as root.
    ///   - backendLibraries: the backend libraries loaded for it.
    public init(runner: ConformanceRunner, arguments: [String], root: Bool, backendLibraries: [String]) {
        var backends: [String] = []
        for pair in runner.pairs {
            for name in [pair.client.name, pair.server.name] where !backends.contains(name) { backends.append(name) }
        }
        self.init(
            arguments: arguments, backends: backends, pairs: runner.pairs.map(\.description),
            scenarios: runner.scenarios.map(\.number), root: root, backendLibraries: backendLibraries)
    }
}
