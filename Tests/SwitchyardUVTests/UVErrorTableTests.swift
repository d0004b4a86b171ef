import CLibUV
import Glibc
import Switchyard
import SwitchyardBackendKit
@testable import SwitchyardUV
import Testing

/// The libuv error table against `docs/ERRORS.md` and against the BSD backend's errno table.
@Suite("libuv error table")
struct UVErrorTableTests {
    struct Row: Sendable, CustomStringConvertible {
        var errno: String
        var libuv: String
        var code: String
        var reason: String
        var description: String { "\(errno) | \(libuv) | \(code) | \(reason)" }
    }

    /// The rows between the errno-table markers of docs/ERRORS.md, found from this file.
    static func documentedRows(filePath: String = #filePath) throws -> [Row] {
        var parts = filePath.split(separator: "/", omittingEmptySubsequences: false)
        parts.removeLast(3)  // SwitchyardUVTests/<file>, Tests
        let path = parts.joined(separator: "/") + "/docs/ERRORS.md"
        let text = try #require(readTextFile(path), "cannot read \(path)")
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        let start = try #require(lines.firstIndex { $0.contains("<!-- errno-table:start -->") })
        let end = try #require(lines.firstIndex { $0.contains("<!-- errno-table:end -->") })
        var rows: [Row] = []
        var header: [String]?
        for line in lines[(start + 1)..<end] where line.hasPrefix("|") {
            let cells = line.split(separator: "|", omittingEmptySubsequences: false)
                .dropFirst().dropLast()
                .map { $0.trimmingCharacters() }
            if header == nil {
                header = cells
                continue
            }
            if cells.allSatisfy({ $0.allSatisfy { $0 == "-" || $0 == ":" } }) { continue }
            guard let header else { continue }
            func cell(_ name: String) -> String { header.firstIndex(of: name).map { cells[$0] } ?? "" }
            rows.append(Row(errno: cell("errno"), libuv: cell("libuv"), code: cell("code"), reason: cell("reason")))
        }
        return rows
    }

    @Test("The libuv table in code is exactly the libuv column of docs/ERRORS.md, row by row")
    func tableMatchesDocument() throws {
        let rows = try Self.documentedRows()
        #expect(rows.count >= 20)
        let documented = rows.map(\.libuv)
        #expect(documented == UVErrorTable.entries.map(\.name), "the code's order or names differ from the document")
        for row in rows {
            let entry = try #require(UVErrorTable.entries.first { $0.name == row.libuv }, "\(row.libuv) is documented but not in UVErrorTable")
            #expect("\(entry.transportCode)" == row.code, "\(row)")
            #expect(entry.reason.name == row.reason, "\(row)")
            // The mapping the backend applies, end to end.
            let mapped = UVErrorTable.error(entry.code, "test")
            #expect(mapped.code == entry.transportCode && mapped.reason == entry.reason, "\(row)")
            #expect(mapped.native == TransportError.NativeError(domain: .libuv, code: entry.code, name: row.libuv))
        }
    }

    @Test("Each libuv row gives the code and reason its errno gives in the BSD table, for the same number")
    func tableAgreesWithErrno() throws {
        for row in try Self.documentedRows() {
            let errnoEntry = try #require(ErrnoTable.entries.first { $0.name == row.errno }, "\(row.errno) is not in ErrnoTable")
            let uvEntry = try #require(UVErrorTable.entries.first { $0.name == row.libuv })
            #expect(row.libuv == "UV_" + row.errno, "\(row)")
            #expect(uvEntry.code == -errnoEntry.errno, "on Linux \(row.libuv) is -\(row.errno)")
            #expect(uvEntry.transportCode == errnoEntry.code, "\(row)")
            #expect(uvEntry.reason == errnoEntry.reason, "\(row)")
            #expect("\(errnoEntry.code)" == row.code && errnoEntry.reason.name == row.reason, "\(row)")
        }
    }

    @Test("Codes outside the table map to internal (i/o error) and keep the libuv code")
    func unknownCodes() {
        let error = UVErrorTable.error(UV_EIO.rawValue, "reading")
        #expect(error.code == .internal)
        #expect(error.reason == .ioError)
        #expect(error.native?.name == "UV_EIO")
        #expect(error.native?.code == UV_EIO.rawValue)
    }

    @Test("With a stall timeout the kernel's stall errors end a connection as stalled; without one they keep the table's reasons")
    func stallMapping() {
        for code in [UV_ETIMEDOUT.rawValue, UV_EHOSTUNREACH.rawValue, UV_ENETUNREACH.rawValue] {
            let stalled = UVErrorTable.connectionError(code, "reading", stallDetection: true)
            #expect(stalled.code == .unavailable && stalled.reason == .stalled, "\(stalled)")
            #expect(stalled.native?.code == code)
            #expect(UVErrorTable.connectionError(code, "reading", stallDetection: false) == UVErrorTable.error(code, "reading"))
            // The same fault gives the same error on the BSD backend.
            let bsd = ErrnoTable.connectionError(errno: -code, message: "reading", stallDetection: true)
            #expect(bsd.code == stalled.code && bsd.reason == stalled.reason)
        }
        #expect(UVErrorTable.connectionError(UV_ECONNRESET.rawValue, "reading", stallDetection: true).reason == .reset)
    }

    @Test("A failed uv_getaddrinfo is unavailable (name resolution) with its UV_EAI code")
    func nameResolutionCodes() {
        for code in [UV_EAI_NONAME, UV_EAI_AGAIN, UV_EAI_FAIL, UV_EAI_NODATA] {
            let error = UVErrorTable.nameResolution(code.rawValue, host: "example")
            #expect(error.code == .unavailable)
            #expect(error.reason == .nameResolution)
            #expect(error.native?.domain == .libuv)
            #expect(error.native?.name.hasPrefix("UV_EAI_") == true)
        }
    }
}

extension Substring {
    fileprivate func trimmingCharacters() -> String {
        String(drop { $0 == " " }.reversed().drop { $0 == " " }.reversed())
    }
}
