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

    @Test("The text report has a row per scenario and a column per pair, with measurements, and footnotes long reasons once")
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

        // Row 11: FAILED with a footnote that has the reason and the file and line; not run.
        let row11 = lines.first { $0.hasPrefix("11  ") }
        #expect(row11?.contains("FAILED [1]") == true)
        #expect(row11?.contains("not run") == true)
        #expect(lines.contains("[1] FAILED: how many write completions ran for 1000 writes: expected 1000, received 2000 (SwitchyardConformance/Scenarios/IntegrityScenarios.swift:142)"))

        // Row 30: a long skip reason is footnoted; the measurements of the passed cell follow.
        let row30 = lines.firstIndex { $0.hasPrefix("30  With a stall timeout") }
        #expect(row30.map { lines[$0].contains("skipped [2]") && lines[$0].contains("passed") } == true)
        #expect(row30.map { lines[$0 + 1].contains("data in flight 2236 ms") && lines[$0 + 2].contains("awaiting a reply 2012 ms") } == true)
        #expect(lines.contains("[2] skipped: memory→memory has no TCP sockets to put in network namespaces"))

        // Row 2: a short reason stays in the cell; the same long reason reuses footnote 2.
        let row2 = lines.first { $0.hasPrefix(" 2  IPv6 loopback") }
        #expect(row2?.contains("skipped: no IPv6") == true)
        #expect(row2?.contains("skipped [2]") == true)
        #expect(!lines.contains { $0.hasPrefix("[3]") })

        // A long name wraps to two lines and is cut with an ellipsis; no line ends in spaces.
        if let row30 {
            #expect(lines[row30 + 1].contains("…"))
        }
        #expect(!lines.contains { $0.hasSuffix(" ") })
    }

    @Test("The JSON report reads back equal, says each status as a word, and a cell not run is null")
    func jsonRoundTrip() throws {
        let report = Self.sample()
        let json = try report.json()
        let text = String(decoding: json, as: UTF8.self)
        #expect(text.contains("\"status\" : \"failed\""))
        #expect(text.contains("\"status\" : \"skipped\""))
        #expect(text.contains("\"unit\" : \"ms\""))
        #expect(text.contains("null"))
        #expect(text.contains("\"version\" : 1"))
        let read = try ConformanceReport(json: json)
        #expect(read == report)
        #expect(read.outcome(scenario: 30, column: .init(client: "bsd", server: "bsd"))?.measurements.map(\.name) == ["data in flight", "awaiting a reply"])
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
