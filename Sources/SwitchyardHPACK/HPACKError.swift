/// Why a header block could not be decoded.
///
/// Every case is a compression error to HTTP/2 (RFC 9113 section 4.3: a
/// `COMPRESSION_ERROR` connection error), except ``Code/headerListTooLarge``: the block
/// was decoded in full and the dynamic table is in step with the peer's, so the
/// connection can go on and only the stream fails. The ``code`` says which cause; the
/// ``message`` names the value that was wrong, for people (do not parse it).
package struct HPACKError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Which rule of RFC 7541 (or limit of this decoder) the block broke.
    package var code: Code
    /// What was wrong, naming the value.
    package var message: String

    package init(code: Code, message: String) {
        self.code = code
        self.message = message
    }

    package var description: String { "\(code): \(message)" }
}

extension HPACKError {
    /// The cause of an ``HPACKError``: a struct over a private enum, so causes can be added
    /// without breaking a `switch`.
    package struct Code: Sendable, Hashable, CustomStringConvertible {
        private enum Value: UInt8, Sendable, Hashable {
            case truncated, integerOverflow, indexZero, indexOutOfRange
            case huffmanPaddingTooLong, huffmanPaddingNotEOS, huffmanEOS
            case tableSizeUpdateAboveLimit, tableSizeUpdateAfterField, missingTableSizeUpdate
            case headerListTooLarge
        }
        private let value: Value
        private init(_ value: Value) { self.value = value }

        /// The block ends inside an integer or a string literal.
        package static let truncated = Code(.truncated)
        /// An integer (an index, a length, a table size) is larger than 2^32 - 1 or takes
        /// more octets than such a value needs (RFC 7541 section 5.1).
        package static let integerOverflow = Code(.integerOverflow)
        /// An indexed representation names index 0 (RFC 7541 section 6.1).
        package static let indexZero = Code(.indexZero)
        /// An index past the static and the dynamic table (RFC 7541 section 2.3.3).
        package static let indexOutOfRange = Code(.indexOutOfRange)
        /// A Huffman-coded string ends with more than 7 bits of padding (RFC 7541 section 5.2).
        package static let huffmanPaddingTooLong = Code(.huffmanPaddingTooLong)
        /// A Huffman-coded string ends with bits that are not a prefix of EOS (not all ones).
        package static let huffmanPaddingNotEOS = Code(.huffmanPaddingNotEOS)
        /// A Huffman-coded string contains the EOS symbol.
        package static let huffmanEOS = Code(.huffmanEOS)
        /// A dynamic table size update above the limit the decoder was given (its
        /// SETTINGS_HEADER_TABLE_SIZE; RFC 7541 section 6.3).
        package static let tableSizeUpdateAboveLimit = Code(.tableSizeUpdateAboveLimit)
        /// A dynamic table size update after a field of the block (RFC 7541 section 4.2: only
        /// at the beginning of a block).
        package static let tableSizeUpdateAfterField = Code(.tableSizeUpdateAfterField)
        /// The limit was lowered below the table's size and the next block did not begin with
        /// a size update within it (RFC 7541 section 4.2).
        package static let missingTableSizeUpdate = Code(.missingTableSizeUpdate)
        /// The decoded header list is larger than the decoder's maximum header list size
        /// (RFC 9113 section 6.5.2: name + value + 32 octets per field). Not a compression
        /// error: the whole block was decoded and the dynamic table is in step.
        package static let headerListTooLarge = Code(.headerListTooLarge)

        package var description: String {
            switch value {
            case .truncated: "truncated"
            case .integerOverflow: "integer overflow"
            case .indexZero: "index zero"
            case .indexOutOfRange: "index out of range"
            case .huffmanPaddingTooLong: "Huffman padding too long"
            case .huffmanPaddingNotEOS: "Huffman padding not EOS"
            case .huffmanEOS: "Huffman EOS"
            case .tableSizeUpdateAboveLimit: "table size update above limit"
            case .tableSizeUpdateAfterField: "table size update after a field"
            case .missingTableSizeUpdate: "missing table size update"
            case .headerListTooLarge: "header list too large"
            }
        }
    }
}
