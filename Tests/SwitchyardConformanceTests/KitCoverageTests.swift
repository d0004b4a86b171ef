import Foundation
import SwitchyardConformance
import Testing

/// The coverage tables of the kit's documentation (`KitCoverage.md` in
/// SwitchyardConformance.docc) are made from the scenarios' own checklist fields
/// (`ConformanceScenario.checklist`) and the items of `KitChecklist.md`: these tests render
/// them and fail when the committed tables say something else, so the documentation
/// cannot drift from what the scenarios claim. After changing a scenario's checklist,
/// `SWITCHYARD_WRITE_KIT_COVERAGE=1 swift test --filter KitCoverageTests` writes the
/// tables anew; review the diff and commit it.
@Suite("The kit's coverage tables")
struct KitCoverageTests {
    /// The package's root: three levels above this file.
    static let root = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    static let catalog = root.appendingPathComponent("Sources/SwitchyardConformance/SwitchyardConformance.docc")

    @Test("The committed coverage tables are what the scenarios' checklist fields make")
    func committedTablesAgree() throws {
        let checklist = try KitCoverage.items(ofChecklist: String(contentsOf: Self.catalog.appendingPathComponent("KitChecklist.md"), encoding: .utf8))
        let rendered = KitCoverage.render(scenarios: ConformanceKit.scenarios, checklist: checklist)
        let url = Self.catalog.appendingPathComponent("KitCoverage.md")
        let article = try String(contentsOf: url, encoding: .utf8)
        let parts = try KitCoverage.split(article)
        guard parts.generated != rendered else { return }
        if ProcessInfo.processInfo.environment["SWITCHYARD_WRITE_KIT_COVERAGE"] == "1" {
            try (parts.before + rendered + parts.after).write(to: url, atomically: true, encoding: .utf8)
            return
        }
        let committed = parts.generated.split(separator: "\n", omittingEmptySubsequences: false)
        let expected = rendered.split(separator: "\n", omittingEmptySubsequences: false)
        let index = zip(committed, expected).enumerated().first { $0.element.0 != $0.element.1 }?.offset ?? min(committed.count, expected.count)
        let have = index < committed.count ? String(committed[index]) : "(the end)"
        let want = index < expected.count ? String(expected[index]) : "(the end)"
        Issue.record(
            """
            KitCoverage.md's generated tables disagree with the scenarios' checklist fields, first at its table line \(index + 1):
              committed: \(have)
              scenarios: \(want)
            Run `SWITCHYARD_WRITE_KIT_COVERAGE=1 swift test --filter KitCoverageTests` to write them anew, then review and commit.
            """)
    }

    @Test("Every scenario names at least one checklist item, and only items the checklist has")
    func scenariosNameChecklistItems() throws {
        let checklist = try KitCoverage.items(ofChecklist: String(contentsOf: Self.catalog.appendingPathComponent("KitChecklist.md"), encoding: .utf8))
        let ids = Set(checklist.map(\.id))
        #expect(ids.count == checklist.count, "an item is listed twice in KitChecklist.md")
        #expect(checklist.count >= 70, "found only \(checklist.count) items in KitChecklist.md: the parser or the file is wrong")
        for (index, scenario) in ConformanceKit.scenarios.enumerated() {
            #expect(!scenario.checklist.isEmpty, "scenario \(index + 1) (\(scenario.name)) names no checklist item")
            for item in scenario.checklist where !ids.contains(item) {
                Issue.record("scenario \(index + 1) (\(scenario.name)) names \(item), which KitChecklist.md does not have")
            }
        }
    }

    @Test("The renderer lists the scenarios of each item, and each scenario's items, in checklist order")
    func renderer() throws {
        let checklist = try KitCoverage.items(
            ofChecklist: "Intro\n\n### A. Connect\n\n- **A1** Connect; addresses right. N U\n- **A2** Refused | typed, spread\n  over two lines. U\n\n### B. Integrity\n\n- **B1** Byte-exact. N\n")
        #expect(checklist.map(\.id) == ["A1", "A2", "B1"])
        #expect(checklist[1].text == "Refused | typed, spread over two lines. U")
        let scenarios = [
            ConformanceScenario("First", checklist: ["B1", "A1"]) { _ in },
            ConformanceScenario("Second", checklist: ["A1"]) { _ in },
        ]
        let rendered = KitCoverage.render(scenarios: scenarios, checklist: checklist)
        #expect(rendered.contains("| A1 | Connect; addresses right. N U | 1, 2 |\n"))
        #expect(rendered.contains("| A2 | Refused \\| typed, spread over two lines. U | none (see below) |\n"))
        #expect(rendered.contains("| 1 | First | A1, B1 |\n"))
        let article = "# T\n\nText.\n\n\(KitCoverage.beginMarker)\nold\n\(KitCoverage.endMarker)\n\nMore.\n"
        let parts = try KitCoverage.split(article)
        #expect(parts.generated == "old\n")
        #expect(parts.before + "new\n" + parts.after == "# T\n\nText.\n\n\(KitCoverage.beginMarker)\nnew\n\(KitCoverage.endMarker)\n\nMore.\n")
    }
}

/// Renders the coverage tables of `KitCoverage.md` from the scenarios and the checklist.
enum KitCoverage {
    struct Item: Equatable {
        var id: String
        var text: String
    }

    struct MissingMarkers: Error, CustomStringConvertible {
        var description: String { "KitCoverage.md has no `\(KitCoverage.beginMarker)` … `\(KitCoverage.endMarker)` region" }
    }

    static let beginMarker = "<!-- The tables down to the end marker are generated from the scenarios' checklist fields by KitCoverageTests: do not edit them by hand. -->"
    static let endMarker = "<!-- End of the generated tables. -->"

    /// The items of the checklist article, in its order: each `- **ID** text` line, with
    /// the indented lines that continue it.
    static func items(ofChecklist markdown: String) throws -> [Item] {
        var items: [Item] = []
        for line in markdown.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("- **"), let close = line.dropFirst(4).firstRange(of: "** ") {
                let id = String(line[line.index(line.startIndex, offsetBy: 4)..<close.lowerBound])
                items.append(Item(id: id, text: String(line[close.upperBound...])))
            } else if line.hasPrefix("  "), !line.trimmingCharacters(in: .whitespaces).isEmpty, !items.isEmpty {
                items[items.count - 1].text += " " + line.trimmingCharacters(in: .whitespaces)
            }
        }
        return items
    }

    /// The two tables: each checklist item with the numbers of the scenarios that name it
    /// (their places in `scenarios`, from 1), and each scenario with the items it names.
    static func render(scenarios: [ConformanceScenario], checklist: [Item]) -> String {
        let order = Dictionary(uniqueKeysWithValues: checklist.enumerated().map { ($1.id, $0) })
        var lines = ["### By checklist item", "", "| item | what the peers' suites check | scenarios |", "|---|---|---|"]
        for item in checklist {
            let numbers = scenarios.indices.filter { scenarios[$0].checklist.contains(item.id) }.map { String($0 + 1) }
            lines.append("| \(item.id) | \(cell(item.text)) | \(numbers.isEmpty ? "none (see below)" : numbers.joined(separator: ", ")) |")
        }
        lines += ["", "### By scenario", "", "| # | scenario | items |", "|---:|---|---|"]
        for (index, scenario) in scenarios.enumerated() {
            let items = scenario.checklist.sorted { (order[$0] ?? .max, $0) < (order[$1] ?? .max, $1) }
            lines.append("| \(index + 1) | \(cell(scenario.name)) | \(items.joined(separator: ", ")) |")
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// The article around its generated region, and the region (the lines between the markers).
    static func split(_ article: String) throws -> (before: String, generated: String, after: String) {
        guard let begin = article.range(of: beginMarker + "\n"),
            let end = article.range(of: endMarker, range: begin.upperBound..<article.endIndex)
        else { throw MissingMarkers() }
        return (String(article[..<begin.upperBound]), String(article[begin.upperBound..<end.lowerBound]), String(article[end.lowerBound...]))
    }

    /// Text for a table cell: a `|` would end the cell.
    static func cell(_ text: String) -> String {
        text.replacingOccurrences(of: "|", with: "\\|")
    }
}
