/// A header field: a name, a value and how it is (or was) indexed.
///
/// Names and values are octets, as on the wire: HTTP/2 field values may hold octets that
/// are not UTF-8 (RFC 9113 section 8.2.1), and the dynamic table counts octets, so a field
/// is never converted through `String` on the way. HPACK checks neither case nor
/// characters; the HTTP/2 layer validates fields (lowercase names, no CR, LF or NUL).
package struct HPACKField: Sendable, Hashable, CustomStringConvertible {
    /// How a field is represented (RFC 7541 section 6.2).
    package enum Indexing: Sendable, Hashable {
        /// The encoder may add the field to the dynamic table (literal with incremental
        /// indexing) or send it as an index, unless its policy for sensitive fields says
        /// otherwise (``HPACKEncoder/Configuration/neverIndexesSensitiveFields``). A decoded
        /// field has it when it came as an index or a literal with incremental indexing.
        case indexable
        /// A literal that is not added to the dynamic table; an intermediary may index it
        /// when it forwards it. The encoder still sends an index when the field is in a table.
        case withoutIndexing
        /// A literal that is never added to a dynamic table, here or by any intermediary
        /// (RFC 7541 section 7.1.3): for values worth guessing, such as credentials. The
        /// encoder always sends it as a literal; the decoder keeps the flag on the field so a
        /// proxy forwards it the same way.
        case neverIndexed
    }

    package var name: [UInt8]
    package var value: [UInt8]
    package var indexing: Indexing

    package init(name: [UInt8], value: [UInt8], indexing: Indexing = .indexable) {
        self.name = name
        self.value = value
        self.indexing = indexing
    }

    /// A field from strings, as their UTF-8.
    package init(_ name: String, _ value: String, indexing: Indexing = .indexable) {
        self.init(name: Array(name.utf8), value: Array(value.utf8), indexing: indexing)
    }

    /// The field's size in the dynamic table (RFC 7541 section 4.1) and in a header list
    /// (RFC 9113 section 6.5.2): name and value octets plus 32.
    package var size: Int { name.count + value.count + 32 }

    package var description: String {
        let text = "\(String(decoding: name, as: UTF8.self)): \(String(decoding: value, as: UTF8.self))"
        switch indexing {
        case .indexable: return text
        case .withoutIndexing: return text + " (without indexing)"
        case .neverIndexed: return text + " (never indexed)"
        }
    }
}
