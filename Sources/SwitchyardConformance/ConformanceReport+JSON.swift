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
    ///   ``ConformanceReportFormatError`` for a report of another ``formatVersion``.
    public init(json: [UInt8]) throws {
        self = try JSONDecoder().decode(ConformanceReport.self, from: Data(json))
        guard version == Self.formatVersion else {
            throw ConformanceReportFormatError(version: version)
        }
    }
}

/// A report written in a JSON layout this version does not read.
public struct ConformanceReportFormatError: Error, Sendable, CustomStringConvertible {
    /// The version the JSON says it is.
    public var version: Int

    public init(version: Int) {
        self.version = version
    }

    public var description: String {
        "the report is of format version \(version); this version reads version \(ConformanceReport.formatVersion)"
    }
}
