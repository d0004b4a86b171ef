extension ConformanceReport {
    /// The report for people, as a terminal table: a summary line, then one row per
    /// scenario (its number and name, wrapped to two lines) and one column per pair. A
    /// cell says `passed`, `FAILED, see below`, `skipped: reason` (or `skipped, see below`
    /// when the reason is long), or `not run`, and below it what the run measured.
    ///
    /// Under the table, the notes: first the long skip reasons, then the failures, each
    /// under its scenario's number and whole name, on a line that starts with the
    /// scenario's number and the pair in brackets (no footnote numbers to mistake for
    /// scenario numbers); the pairs of one scenario with the same reason share a line:
    ///
    /// ```text
    /// FAILED, and why:
    ///
    /// 11. Write completions run in order, each exactly once
    ///     [11 bsd→libuv] FAILED: how many write completions ran … (file:line)
    /// ```
    ///
    /// - Parameter nameWidth: the width of the scenario column's text.
    public func text(nameWidth: Int = 40) -> String {
        let nameWidth = max(nameWidth, 12)
        let cellLimit = 28
        let seeBelow = ", see below"
        var skipNotes = Notes()
        var failureNotes = Notes()

        // Each cell as lines: its status, then one line per measurement.
        let cells: [[[String]]] = rows.map { row in
            columns.indices.map { column in
                guard column < row.outcomes.count, let outcome = row.outcomes[column] else { return ["not run"] }
                var lines: [String]
                switch outcome.status {
                case .passed:
                    lines = ["passed"]
                case .skipped:
                    let reason = outcome.reason ?? "no reason given"
                    let inline = "skipped: \(reason)"
                    if inline.count <= cellLimit {
                        lines = [inline]
                    } else {
                        lines = ["skipped" + seeBelow]
                        skipNotes.add(row: row, column: columns[column], text: inline)
                    }
                case .failed:
                    lines = ["FAILED" + seeBelow]
                    failureNotes.add(row: row, column: columns[column], text: "FAILED: \(outcome.explanation ?? "no reason given")")
                default:
                    let text = "\(outcome.status)" + (outcome.explanation.map { ": \($0)" } ?? "")
                    if text.count <= cellLimit {
                        lines = [text]
                    } else {
                        lines = ["\(outcome.status)" + seeBelow]
                        skipNotes.add(row: row, column: columns[column], text: text)
                    }
                }
                lines += outcome.measurements.map { truncated($0.description, to: cellLimit) }
                return lines
            }
        }

        let numberWidth = max(2, String(rows.map(\.number).max() ?? 0).count)
        let widths = columns.indices.map { column in
            cells.reduce(columns[column].description.count) { widest, row in
                row[column].reduce(widest) { max($0, $1.count) }
            }
        }
        func line(_ number: String, _ name: String, _ values: [String]) -> String {
            var text = pad(number, to: numberWidth, right: true) + "  " + pad(name, to: nameWidth)
            for (index, value) in values.enumerated() { text += "  " + pad(value, to: widths[index]) }
            while text.last == " " { text.removeLast() }
            return text
        }

        var output = headline() + "\n\n"
        output += line("#", "scenario", columns.map(\.description)) + "\n"
        for (index, row) in rows.enumerated() {
            output += "\n"
            let names = wrapped(row.name, width: nameWidth, lines: 2)
            let height = max(names.count, cells[index].map(\.count).max() ?? 1)
            for lineIndex in 0..<height {
                output += line(
                    lineIndex == 0 ? String(row.number) : "",
                    lineIndex < names.count ? names[lineIndex] : "",
                    cells[index].map { lineIndex < $0.count ? $0[lineIndex] : "" }) + "\n"
            }
        }
        output += skipNotes.text(heading: "Skipped, and why:", columnCount: columns.count)
        output += failureNotes.text(heading: "FAILED, and why:", columnCount: columns.count)
        return output
    }

    /// One line: what ran, how it ended, how long it took.
    public func headline() -> String {
        let summary = self.summary
        var parts = ["\(summary.passed) passed", "\(summary.failed) FAILED", "\(summary.skipped) skipped"]
        if summary.notRun > 0 { parts.append("\(summary.notRun) not run") }
        let scenarios = rows.count == 1 ? "1 scenario" : "\(rows.count) scenarios"
        let pairs = columns.count == 1 ? "1 pair" : "\(columns.count) pairs"
        return "Switchyard conformance: \(scenarios) on \(pairs): " + parts.joined(separator: ", ")
            + " (\(formattedSeconds(seconds)))"
    }
}

/// The notes under the table: per scenario, in row order, each distinct text once with
/// the pairs that share it.
private struct Notes {
    struct Scenario {
        var number: Int
        var name: String
        /// Each text with the pairs it is about, in the order first met.
        var texts: [(text: String, pairs: [String])] = []
    }

    var scenarios: [Scenario] = []

    mutating func add(row: ConformanceReport.Row, column: ConformanceReport.Column, text: String) {
        if scenarios.last?.number != row.number { scenarios.append(Scenario(number: row.number, name: row.name)) }
        let last = scenarios.count - 1
        if let index = scenarios[last].texts.firstIndex(where: { $0.text == text }) {
            scenarios[last].texts[index].pairs.append(column.description)
        } else {
            scenarios[last].texts.append((text, [column.description]))
        }
    }

    /// The section: a blank line, the heading, then per scenario a blank line, `N. name`
    /// and a line `    [N pair, pair] text` per distinct text (`[N all 9 pairs]` when every
    /// pair of three or more shares it); empty when there are no notes.
    func text(heading: String, columnCount: Int) -> String {
        guard !scenarios.isEmpty else { return "" }
        var output = "\n" + heading + "\n"
        for scenario in scenarios {
            output += "\n\(scenario.number). \(scenario.name)\n"
            for (text, pairs) in scenario.texts {
                let which = pairs.count == columnCount && columnCount > 2 ? "all \(columnCount) pairs" : pairs.joined(separator: ", ")
                output += "    [\(scenario.number) \(which)] \(text)\n"
            }
        }
        return output
    }
}

/// `text` padded with spaces to `width` (on the left when `right`).
private func pad(_ text: String, to width: Int, right: Bool = false) -> String {
    let padding = String(repeating: " ", count: max(0, width - text.count))
    return right ? padding + text : text + padding
}

/// `text` cut to `width` characters, the last one an ellipsis when it was cut.
private func truncated(_ text: String, to width: Int) -> String {
    text.count <= width ? text : String(text.prefix(width - 1)) + "…"
}

/// `text` broken at spaces into at most `lines` lines of at most `width` characters; the
/// last line ends with an ellipsis when text was left out.
func wrapped(_ text: String, width: Int, lines maximum: Int) -> [String] {
    var lines: [String] = []
    var current = ""
    for word in text.split(separator: " ", omittingEmptySubsequences: true) {
        let word = String(word)
        if current.isEmpty {
            current = word
        } else if current.count + 1 + word.count <= width {
            current += " " + word
        } else {
            lines.append(current)
            current = word
        }
    }
    if !current.isEmpty { lines.append(current) }
    lines = lines.map { truncated($0, to: width) }
    if lines.count > maximum {
        lines = Array(lines.prefix(maximum))
        var last = lines[maximum - 1]
        if last.count >= width { last = String(last.prefix(width - 1)) }
        lines[maximum - 1] = last + "…"
    }
    return lines.isEmpty ? [""] : lines
}

/// Seconds for people: `0.04 s`, `12.3 s`, `4 min 12 s`.
func formattedSeconds(_ seconds: Double) -> String {
    if seconds < 1 { return "\(decimal(seconds, places: 2)) s" }
    if seconds < 60 { return "\(decimal(seconds, places: 1)) s" }
    let whole = Int(seconds.rounded())
    return "\(whole / 60) min \(whole % 60) s"
}
