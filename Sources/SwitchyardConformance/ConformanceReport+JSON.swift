#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

extension ConformanceReport {
    /// The report as JSON for machines: pretty-printed, keys sorted, UTF-8. Outcomes carry
    /// `status` (`passed`, `failed`, `skipped`), `reason`, `file` and `line`, `seconds`,
    /// and `measurements` (`name`, `value`, `unit`: `ms`, `bytes`, `count`); a cell not
    /// run is `null`.
    public func json() throws -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        return Array(try encoder.encode(self)) + [UInt8(ascii: "\n")]
    }

    /// Reads a report ``json()`` wrote.
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

/// A JSON report this version cannot read, and why.
public struct ConformanceReportFormatError: Error, Sendable, CustomStringConvertible {
    /// What is wrong with it.
    public var message: String

    public init(_ message: String) {
        self.message = message
    }

    public var description: String { message }
}
