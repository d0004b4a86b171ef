#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

extension ConformanceReport {
    /// The report as JSON for machines: pretty-printed, keys sorted, UTF-8.
    ///
    /// At the top: `version` (``formatVersion``), `kitVersion`, `totals` (`scenarios`,
    /// `pairs`, `runs`, `passed`, `failed`, `skipped`, `notRun`, `seconds`: ``totals``),
    /// `settings` when the maker filled them in (`arguments`, `backends`, `pairs`,
    /// `scenarios`, `root`, `backendLibraries`: ``Settings``), `seconds`, `columns`
    /// (`client`, `server`) and `rows` (`number`, `name`, `checklist`, `outcomes`, one per
    /// column). Outcomes carry `status` (`passed`, `failed`, `skipped`), `reason`, `file`
    /// and `line`, `seconds`, and `measurements` (`name`, `value`, `unit`: `ms`, `bytes`,
    /// `count`); a cell not run is `null`.
    public func json() throws -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        return Array(try encoder.encode(self)) + [UInt8(ascii: "\n")]
    }

    /// Reads a report ``json()`` wrote (`totals` is not read: it is worked out from the
    /// rows; a report without `kitVersion` or `settings` reads with them `nil`).
    /// - Throws: a `DecodingError` for text that is not such a report, or a
    ///   ``ConformanceReportFormatError`` for a report of another ``formatVersion`` or
    ///   one whose rows do not have a cell per column.
    public init(json: [UInt8]) throws {
        self = try JSONDecoder().decode(ConformanceReport.self, from: Data(json))
        guard version == Self.formatVersion else {
            throw ConformanceReportFormatError(
                "the report is of format version \(version); this version reads version \(Self.formatVersion)")
        }
        if let row = rows.first(where: { $0.outcomes.count != columns.count }) {
            throw ConformanceReportFormatError(
                "scenario \(row.number) has \(row.outcomes.count) cells for \(columns.count) columns")
        }
    }
}

extension ConformanceReport {
    private enum CodingKeys: String, CodingKey {
        case version, kitVersion, settings, totals, columns, rows, seconds
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        version = try container.decode(Int.self, forKey: .version)
        kitVersion = try container.decodeIfPresent(String.self, forKey: .kitVersion)
        settings = try container.decodeIfPresent(Settings.self, forKey: .settings)
        columns = try container.decode([Column].self, forKey: .columns)
        rows = try container.decode([Row].self, forKey: .rows)
        seconds = try container.decode(Double.self, forKey: .seconds)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(version, forKey: .version)
        try container.encodeIfPresent(kitVersion, forKey: .kitVersion)
        try container.encodeIfPresent(settings, forKey: .settings)
        try container.encode(totals, forKey: .totals)
        try container.encode(columns, forKey: .columns)
        try container.encode(rows, forKey: .rows)
        try container.encode(seconds, forKey: .seconds)
    }
}

/// A JSON report this version cannot read, and why.
public struct ConformanceReportFormatError: Error, Sendable, CustomStringConvertible {
    /// What is wrong with it.
    public var message: String

    public init(_ message: String) {
        self.message = message
    }

    public var description: String { message }
}
