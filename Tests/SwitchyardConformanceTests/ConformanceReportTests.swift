import Foundation
import SwitchyardConformance
import Testing

@Suite("Conformance report")
struct ConformanceReportTests {
    /// Two columns, four rows: passed with measurements, failed, skipped (short and long
    /// reasons), and a cell not run.
    static func sample() -> ConformanceReport {
        let memory = ConformanceReport.Column(client: "memory", server: "memory")
        let bsd = ConformanceReport.Column(client: "bsd", server: "bsd")
        func outcome(
            _ column: ConformanceReport.Column, _ scenario: String, _ status: ConformanceOutcome.Status,
            reason: String? = nil, file: String? = nil, line: Int? = nil, measurements: [ConformanceMeasurement] = []
        ) -> ConformanceOutcome {
            ConformanceOutcome(
                scenario: scenario, client: column.client, server: column.server, status: status, reason: reason,
                file: file, line: line, seconds: 0.25, measurements: measurements)
        }
        let refused = "Connecting to a port nobody listens on fails at once with unavailable (refused)"
        let completions = "Write completions run in order, each exactly once"
        let stall = "With a stall timeout, taking the link down ends a call with data in flight and a call awaiting a reply with unavailable (stalled) within the stall timeout plus one second"
        let ipv6 = "IPv6 loopback"
        return ConformanceReport(
            columns: [memory, bsd],
            rows: [
                .init(number: 8, name: refused, checklist: ["A2", "A5"], outcomes: [
                    outcome(memory, refused, .passed, measurements: [ConformanceMeasurement("refused", .microseconds(40))]),
                    outcome(bsd, refused, .passed, measurements: [ConformanceMeasurement("refused", .microseconds(210))]),
                ]),
                .init(number: 11, name: completions, checklist: ["F1"], outcomes: [
                    outcome(memory, completions, .failed, reason: "how many write completions ran for 1000 writes: expected 1000, received 2000",
                            file: "SwitchyardConformance/Scenarios/IntegrityScenarios.swift", line: 142),
                    nil,
                ]),
                .init(number: 30, name: stall, checklist: ["I2", "E6"], outcomes: [
                    outcome(memory, stall, .skipped, reason: "memory→memory has no TCP sockets to put in network namespaces"),
                    outcome(bsd, stall, .passed, measurements: [
                        ConformanceMeasurement("data in flight", .milliseconds(2236)),
                        ConformanceMeasurement("awaiting a reply", .milliseconds(2012)),
                    ]),
                ]),
                .init(number: 2, name: ipv6, checklist: ["H1"], outcomes: [
                    outcome(memory, ipv6, .skipped, reason: "no IPv6"),
                    outcome(bsd, ipv6, .skipped, reason: "memory→memory has no TCP sockets to put in network namespaces"),
                ]),
            ],
            seconds: 12.3)
    }

    @Test("A measurement says its value with a unit fit for people")
    func measurementFormatting() {
        #expect(ConformanceMeasurement("detection", .milliseconds(2012)).description == "detection 2012 ms")
        #expect(ConformanceMeasurement("refused", .microseconds(2345)).formattedValue == "2.3 ms")
        #expect(ConformanceMeasurement("refused", .microseconds(40)).formattedValue == "0.04 ms")
        #expect(ConformanceMeasurement("held", bytes: 134_217).formattedValue == "131 KiB")
        #expect(ConformanceMeasurement("held", bytes: 5_000).formattedValue == "4.9 KiB")
        #expect(ConformanceMeasurement("held", bytes: 512).formattedValue == "512 B")
        #expect(ConformanceMeasurement("sent", bytes: 3 << 20).formattedValue == "3.0 MiB")
        #expect(ConformanceMeasurement("changes", count: 2).formattedValue == "2")
        #expect(ConformanceMeasurement("ratio", value: 0.5, unit: .init(rawValue: "x")).formattedValue == "0.50 x")
    }

    @Test("The summary counts passed, failed, skipped and not-run cells, and only a failure makes the exit status 1")
    func summary() {
        let report = Self.sample()
        #expect(report.summary == ConformanceReport.Summary(passed: 3, failed: 1, skipped: 3, notRun: 1))
        #expect(report.hasFailures)
        #expect(report.exitStatus == 1)

        var skipsOnly = report
        skipsOnly.rows.removeAll { $0.number == 11 }
        #expect(!skipsOnly.hasFailures)
        #expect(skipsOnly.exitStatus == 0)
    }

    @Test("The text report has a row per scenario and a column per pair, with measurements, and notes long reasons under the table")
    func text() {
        let text = Self.sample().text()
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        #expect(lines[0] == "Switchyard conformance: 4 scenarios on 2 pairs: 3 passed, 1 FAILED, 3 skipped, 1 not run (12.3 s)")
        let header = lines.first { $0.hasPrefix(" #  scenario") }
        #expect(header?.contains("memory→memory") == true && header?.contains("bsd→bsd") == true)

        // Row 8: both passed, each with its measurement under it, in its column.
        let row8 = lines.firstIndex { $0.hasPrefix(" 8  Connecting to a port") }
        #expect(row8 != nil)
        if let row8, let header {
            let memoryColumn = header.range(of: "memory→memory")!.lowerBound.utf16Offset(in: header)
            let bsdColumn = header.range(of: "bsd→bsd")!.lowerBound.utf16Offset(in: header)
            #expect(lines[row8].utf16Offset(of: "passed") == memoryColumn)
            #expect(lines[row8].utf16Offset(of: "passed", after: memoryColumn + 1) == bsdColumn)
            #expect(lines[row8 + 1].utf16Offset(of: "refused 0.04 ms") == memoryColumn)
            #expect(lines[row8 + 1].utf16Offset(of: "refused 0.21 ms") == bsdColumn)
        }

        // Row 11: FAILED, its reason below the table; not run.
        let row11 = lines.first { $0.hasPrefix("11  ") }
        #expect(row11?.contains("FAILED, see below") == true)
        #expect(row11?.contains("not run") == true)

        // Row 30: a long skip reason is noted below; the measurements of the passed cell follow.
        let row30 = lines.firstIndex { $0.hasPrefix("30  With a stall timeout") }
        #expect(row30.map { lines[$0].contains("skipped, see below") && lines[$0].contains("passed") } == true)
        #expect(row30.map { lines[$0 + 1].contains("data in flight 2236 ms") && lines[$0 + 2].contains("awaiting a reply 2012 ms") } == true)

        // Row 2: a short reason stays in the cell.
        let row2 = lines.first { $0.hasPrefix(" 2  IPv6 loopback") }
        #expect(row2?.contains("skipped: no IPv6") == true)
        #expect(row2?.contains("skipped, see below") == true)

        // A long name wraps to two lines and is cut with an ellipsis; no line ends in spaces.
        if let row30 {
            #expect(lines[row30 + 1].contains("…"))
        }
        #expect(!lines.contains { $0.hasSuffix(" ") })
    }

    @Test("Under the table, each long reason is on a line led by its scenario's number and pair, under the scenario's number and whole name: skips first, then failures, and no footnote numbers")
    func notes() throws {
        let report = Self.sample()
        let text = report.text()
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        let stall = report.rows[2].name
        let skipped = try #require(lines.firstIndex(of: "Skipped, and why:"), "\(text)")
        let failed = try #require(lines.firstIndex(of: "FAILED, and why:"), "\(text)")
        #expect(skipped < failed)
        #expect(Array(lines[skipped...]) == [
            "Skipped, and why:",
            "",
            "30. \(stall)",
            "    [30 memory→memory] skipped: memory→memory has no TCP sockets to put in network namespaces",
            "",
            "2. IPv6 loopback",
            "    [2 bsd→bsd] skipped: memory→memory has no TCP sockets to put in network namespaces",
            "",
            "FAILED, and why:",
            "",
            "11. Write completions run in order, each exactly once",
            "    [11 memory→memory] FAILED: how many write completions ran for 1000 writes: expected 1000, received 2000 (SwitchyardConformance/Scenarios/IntegrityScenarios.swift:142)",
            "",
        ])
        // Nothing reads as a footnote number: no `[n]` anywhere.
        #expect(text.range(of: #"\[[0-9]+\]"#, options: .regularExpression) == nil, "\(text)")
    }

    @Test("Pairs of one scenario that share a reason share its line; every pair of three or more is 'all N pairs'")
    func sharedNotes() {
        let columns = ["bsd", "libuv", "memory"].map { ConformanceReport.Column(client: $0, server: $0) }
        func failed(_ column: ConformanceReport.Column, _ reason: String) -> ConformanceOutcome {
            ConformanceOutcome(scenario: "s", client: column.client, server: column.server, status: .failed, reason: reason, seconds: 1)
        }
        let report = ConformanceReport(
            columns: columns,
            rows: [
                .init(number: 4, name: "Four", checklist: [], outcomes: columns.map { failed($0, "the same") }),
                .init(number: 5, name: "Five", checklist: [], outcomes: [failed(columns[0], "one"), failed(columns[1], "two"), failed(columns[2], "one")]),
            ])
        let lines = report.text().split(separator: "\n").map(String.init)
        #expect(lines.contains("    [4 all 3 pairs] FAILED: the same"))
        #expect(lines.contains("    [5 bsd→bsd, memory→memory] FAILED: one"))
        #expect(lines.contains("    [5 libuv→libuv] FAILED: two"))
    }

    @Test("The JSON report reads back equal, says each status as a word, and a cell not run is null")
    func jsonRoundTrip() throws {
        var report = Self.sample()
        report.settings = .init(
            arguments: ["--backend", "memory"], backends: ["memory", "bsd"], pairs: ["memory→memory", "bsd→bsd"],
            scenarios: [8, 11, 30, 2], root: false, backendLibraries: ["/tmp/libX.so"])
        let json = try report.json()
        let text = String(decoding: json, as: UTF8.self)
        #expect(text.contains("\"status\" : \"failed\""))
        #expect(text.contains("\"status\" : \"skipped\""))
        #expect(text.contains("\"unit\" : \"ms\""))
        #expect(text.contains("null"))
        #expect(text.contains("\"version\" : 1"))
        let read = try ConformanceReport(json: json)
        #expect(read == report)
        #expect(read.settings?.backendLibraries == ["/tmp/libX.so"])
        #expect(read.outcome(scenario: 30, column: .init(client: "bsd", server: "bsd"))?.measurements.map(\.name) == ["data in flight", "awaiting a reply"])
    }

    @Test("The JSON report has the totals, the kit's version and the settings at its top")
    func jsonTotals() throws {
        var report = Self.sample()
        report.settings = .init(arguments: [], backends: ["memory"], pairs: ["memory→memory"], scenarios: [8], root: true, backendLibraries: [])
        let object = try #require(try JSONSerialization.jsonObject(with: Data(try report.json())) as? [String: Any])
        let totals = try #require(object["totals"] as? [String: Any])
        #expect(totals["scenarios"] as? Int == 4)
        #expect(totals["pairs"] as? Int == 2)
        #expect(totals["runs"] as? Int == 8)
        #expect(totals["passed"] as? Int == 3)
        #expect(totals["failed"] as? Int == 1)
        #expect(totals["skipped"] as? Int == 3)
        #expect(totals["notRun"] as? Int == 1)
        #expect(totals["seconds"] as? Double == 12.3)
        #expect(object["kitVersion"] as? String == ConformanceKit.version)
        let settings = try #require(object["settings"] as? [String: Any])
        #expect(settings["root"] as? Bool == true)
        #expect(settings["pairs"] as? [String] == ["memory→memory"])
        #expect(report.totals == ConformanceReport.Totals(scenarios: 4, pairs: 2, runs: 8, passed: 3, failed: 1, skipped: 3, notRun: 1, seconds: 12.3))
    }

    @Test("A JSON report written before reports carried totals, the kit's version and settings reads, with those nil")
    func jsonWithoutNewFields() throws {
        var object = try #require(try JSONSerialization.jsonObject(with: Data(try Self.sample().json())) as? [String: Any])
        object["totals"] = nil
        object["kitVersion"] = nil
        let older = try JSONSerialization.data(withJSONObject: object)
        let read = try ConformanceReport(json: Array(older))
        #expect(read.kitVersion == nil)
        #expect(read.settings == nil)
        #expect(read.rows == Self.sample().rows)
    }

    @Test("A JSON report of another format version, or with a row short of cells, is refused saying why")
    func jsonRefused() throws {
        let text = String(decoding: try Self.sample().json(), as: UTF8.self)
        let otherVersion = text.replacingOccurrences(of: "\"version\" : 1", with: "\"version\" : 7")
        let version = #expect(throws: ConformanceReportFormatError.self) { try ConformanceReport(json: Array(otherVersion.utf8)) }
        #expect(version?.message == "the report is of format version 7; this version reads version 1")

        var short = Self.sample()
        short.rows[1].outcomes.removeLast()
        let shortText = try short.json()
        let cells = #expect(throws: ConformanceReportFormatError.self) { try ConformanceReport(json: shortText) }
        #expect(cells?.message == "scenario 11 has 1 cells for 2 columns")
        #expect(throws: (any Error).self) { try ConformanceReport(json: Array("{}".utf8)) }
    }

    @Test("A recorded outcome lands in its scenario's row and its pair's column, and nowhere else")
    func record() {
        var report = Self.sample()
        let outcome = ConformanceOutcome(scenario: "x", client: "bsd", server: "bsd", status: .passed, seconds: 1)
        let recorded = report.record(outcome, scenario: 11)
        #expect(recorded)
        #expect(report.outcome(scenario: 11, column: .init(client: "bsd", server: "bsd")) == outcome)
        let noRow = report.record(outcome, scenario: 99)
        #expect(!noRow)
        let noColumn = report.record(ConformanceOutcome(scenario: "x", client: "libuv", server: "bsd", status: .passed, seconds: 1), scenario: 11)
        #expect(!noColumn)
        #expect(report.summary.notRun == 0)
    }
}

extension String {
    /// The UTF-16 offset where `needle` first occurs at or after the UTF-16 offset `start`.
    func utf16Offset(of needle: String, after start: Int = 0) -> Int? {
        let from = String.Index(utf16Offset: min(start, utf16.count), in: self)
        return range(of: needle, range: from..<endIndex)?.lowerBound.utf16Offset(in: self)
    }
}
