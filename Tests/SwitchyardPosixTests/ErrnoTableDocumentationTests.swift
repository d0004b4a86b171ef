import Glibc
import Switchyard
@testable import SwitchyardPosix
import Testing

/// The errno table in docs/ERRORS.md is the one in the code, row for row.
@Suite("Errno table")
struct ErrnoTableDocumentationTests {
    struct Row: Equatable, CustomStringConvertible {
        var errno: String
        var code: String
        var reason: String
        var description: String { "\(errno) -> \(code) / \(reason)" }
    }

    static func documentedRows() throws -> [Row] {
        var path = "\(#filePath)"
        for _ in 0..<3 { path = String(path[..<path.lastIndex(of: "/")!]) }
        let file = fopen(path + "/docs/ERRORS.md", "r")
        try #require(file != nil, "docs/ERRORS.md not found next to \(path)")
        defer { fclose(file) }
        var text = ""
        var line: UnsafeMutablePointer<CChar>?
        var capacity = 0
        while getline(&line, &capacity, file) > 0 { text += String(cString: line!) }
        free(line)
        let table = try #require(text.split(separator: "<!-- errno-table:start -->").last?.split(separator: "<!-- errno-table:end -->").first)
        return table.split(separator: "\n").compactMap { line -> Row? in
            let cells = line.split(separator: "|").map { $0.trimmingCharacters() }
            guard cells.count == 4, cells[0].hasPrefix("E") else { return nil }
            return Row(errno: cells[0], code: cells[2], reason: cells[3])
        }
    }

    @Test("docs/ERRORS.md lists exactly the errno mappings the code has")
    func tableMatchesDocs() throws {
        let documented = try Self.documentedRows()
        let coded = ErrnoTable.entries.map { Row(errno: $0.name, code: $0.code.description, reason: $0.reason.description) }
        #expect(documented == coded)
        #expect(coded.count >= 9)
    }

    @Test("Mapped errors carry the errno and its name")
    func mapping() {
        let error = ErrnoTable.error(errno: ECONNREFUSED, message: "connecting")
        #expect(error.code == .unavailable)
        #expect(error.reason == .refused)
        #expect(error.native == .init(domain: .errno, code: ECONNREFUSED, name: "ECONNREFUSED"))
        let unknown = ErrnoTable.error(errno: EROFS, message: "x")
        #expect(unknown.code == .internal)
        #expect(unknown.reason == .ioError)
    }
}

extension Substring {
    fileprivate func trimmingCharacters() -> String {
        String(drop { $0 == " " }.reversed().drop { $0 == " " }.reversed())
    }
}
