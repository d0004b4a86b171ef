import SwitchyardHPACK
import Testing

extension Array where Element == UInt8 {
    /// Octets from hex digits, spaces and newlines ignored (the RFC's hex dumps).
    init(hex: String) {
        let digits = hex.unicodeScalars.filter { !$0.properties.isWhitespace }.map { Character($0) }
        precondition(digits.count % 2 == 0, "an odd number of hex digits: \(hex)")
        self = stride(from: 0, to: digits.count, by: 2).map { UInt8(String(digits[$0...$0 + 1]), radix: 16)! }
    }

    var hex: String { map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined() }
}

/// The fields of a header list from (name, value) pairs, all indexable.
func fields(_ pairs: KeyValuePairs<String, String>) -> [HPACKField] {
    pairs.map { HPACKField($0.key, $0.value) }
}

/// The RFC's "Dynamic Table (after decoding)": entries newest first, and the size.
func expectTable(
    _ table: HPACKDynamicTable, _ entries: KeyValuePairs<String, String>, size: Int,
    sourceLocation: SourceLocation = #_sourceLocation
) {
    #expect(table.entries == fields(entries), sourceLocation: sourceLocation)
    #expect(table.size == size, sourceLocation: sourceLocation)
}

/// Expects `body` to throw an HPACKError with `code` and a message naming `words`.
func expectHPACKError(
    _ code: HPACKError.Code, naming words: [String] = [], sourceLocation: SourceLocation = #_sourceLocation,
    _ body: () throws -> Void
) {
    do {
        try body()
        Issue.record("expected \(code), nothing was thrown", sourceLocation: sourceLocation)
    } catch let error as HPACKError {
        #expect(error.code == code, "\(error)", sourceLocation: sourceLocation)
        for word in words {
            #expect(error.message.contains(word), "'\(word)' not in: \(error.message)", sourceLocation: sourceLocation)
        }
    } catch {
        Issue.record("expected an HPACKError \(code), got \(error)", sourceLocation: sourceLocation)
    }
}
