/// Encodes header lists into header blocks (RFC 7541 section 6), keeping the dynamic table
/// that the peer's decoder will hold.
///
/// For each field: a field in a table (name and value) is sent as its index (the static
/// table first); otherwise a literal, its name as an index when a table has the name (the
/// lowest index: the static table first), and its octets Huffman-coded when that is not
/// longer (``Configuration/huffman``). An ``HPACKField/Indexing/indexable`` field is added
/// to the dynamic table (literal with incremental indexing) unless it is larger than the
/// table, which adding would only empty; ``HPACKField/Indexing/withoutIndexing`` is a
/// literal without indexing; ``HPACKField/Indexing/neverIndexed`` is always a never-indexed
/// literal, even when a table holds the field, so that its flag reaches every hop.
///
/// Sensitive fields (RFC 7541 section 7.1.3), when
/// ``Configuration/neverIndexesSensitiveFields`` is on (the default), are never indexed
/// whatever their hint: `authorization` and `proxy-authorization` (credentials), and a
/// `cookie` whose value is shorter than 20 octets (short values are the ones a guessing
/// attacker can confirm through the compressed size; a longer cookie, typically a random
/// session token, stays indexable, since sending it literally on every request costs
/// more than it protects). Any other field is never indexed only when its caller marks it.
///
/// The peer's SETTINGS_HEADER_TABLE_SIZE goes in through ``setPeerMaxTableSize(_:)``; the
/// next block begins with the size update(s): the smallest size since the last block
/// then the final one when the size went down and up again, else the final one.
package struct HPACKEncoder: Sendable {
    /// How the encoder chooses representations.
    package struct Configuration: Sendable, Hashable {
        /// Whether string literals are Huffman-coded when the code is not longer than the
        /// octets (the RFC's examples C.4 and C.6 code a value of equal length too).
        package var huffman: Bool
        /// The largest dynamic table this encoder uses, whatever the peer allows.
        package var maxTableSize: Int
        /// Whether `authorization`, `proxy-authorization` and short cookies are never
        /// indexed whatever their hint (see ``HPACKEncoder``).
        package var neverIndexesSensitiveFields: Bool

        package init(huffman: Bool = true, maxTableSize: Int = 4096, neverIndexesSensitiveFields: Bool = true) {
            precondition(maxTableSize >= 0, "a negative HPACK table size: \(maxTableSize)")
            self.huffman = huffman
            self.maxTableSize = maxTableSize
            self.neverIndexesSensitiveFields = neverIndexesSensitiveFields
        }
    }

    package let configuration: Configuration
    /// The fields this encoder added, as the peer's decoder holds them after the last block.
    package private(set) var dynamicTable: HPACKDynamicTable
    /// The smallest size chosen since the last block, and the last one: the size updates
    /// the next block begins with.
    private var pendingSmallestSize: Int?
    private var pendingSize: Int?

    /// - Parameters:
    ///   - peerMaxTableSize: the size the peer's decoder starts from, its
    ///     SETTINGS_HEADER_TABLE_SIZE before any SETTINGS (HTTP/2's default: 4,096).
    ///   - configuration: how to choose representations.
    package init(peerMaxTableSize: Int = 4096, configuration: Configuration = Configuration()) {
        precondition(peerMaxTableSize >= 0, "a negative HPACK table size: \(peerMaxTableSize)")
        self.configuration = configuration
        self.dynamicTable = HPACKDynamicTable(maxSize: peerMaxTableSize)
        if configuration.maxTableSize < peerMaxTableSize {
            pendingSize = configuration.maxTableSize
            pendingSmallestSize = configuration.maxTableSize
        }
    }

    /// Takes the peer's new SETTINGS_HEADER_TABLE_SIZE: the table's size becomes the smaller
    /// of it and ``Configuration/maxTableSize`` at the next block, which begins with the
    /// size update(s).
    package mutating func setPeerMaxTableSize(_ size: Int) {
        precondition(size >= 0, "a negative HPACK table size: \(size)")
        let chosen = min(size, configuration.maxTableSize)
        pendingSmallestSize = min(pendingSmallestSize ?? chosen, chosen)
        pendingSize = chosen
    }

    /// Appends the header block of `fields` to `output`.
    package mutating func encode(_ fields: some Sequence<HPACKField>, into output: inout [UInt8]) {
        encodeSizeUpdates(into: &output)
        for field in fields { encode(field, into: &output) }
    }

    /// The header block of `fields`.
    package mutating func encode(_ fields: some Sequence<HPACKField>) -> [UInt8] {
        var output: [UInt8] = []
        encode(fields, into: &output)
        return output
    }

    private mutating func encodeSizeUpdates(into output: inout [UInt8]) {
        guard let size = pendingSize else { return }
        let smallest = pendingSmallestSize ?? size
        pendingSize = nil
        pendingSmallestSize = nil
        if smallest < min(size, dynamicTable.maxSize) {
            HPACKInteger.encode(smallest, prefixBits: 5, flags: 0x20, into: &output)
            dynamicTable.setMaxSize(smallest)
        }
        if size != dynamicTable.maxSize {
            HPACKInteger.encode(size, prefixBits: 5, flags: 0x20, into: &output)
            dynamicTable.setMaxSize(size)
        }
    }

    private mutating func encode(_ field: HPACKField, into output: inout [UInt8]) {
        var indexing = field.indexing
        if configuration.neverIndexesSensitiveFields && Self.isSensitive(field) { indexing = .neverIndexed }

        var nameIndex = 0
        if let found = HPACKStaticTable.find(name: field.name, value: field.value) {
            if indexing != .neverIndexed, let fieldIndex = found.fieldIndex {
                HPACKInteger.encode(fieldIndex, prefixBits: 7, flags: 0x80, into: &output)
                return
            }
            nameIndex = found.nameIndex
        }
        let firstDynamic = HPACKStaticTable.entries.count + 1
        for offset in 0..<dynamicTable.count {
            let entry = dynamicTable[offset]
            guard entry.name == field.name else { continue }
            if indexing != .neverIndexed && entry.value == field.value {
                HPACKInteger.encode(firstDynamic + offset, prefixBits: 7, flags: 0x80, into: &output)
                return
            }
            if nameIndex == 0 { nameIndex = firstDynamic + offset }
            if indexing == .neverIndexed { break }
        }

        if indexing == .indexable && field.size > dynamicTable.maxSize { indexing = .withoutIndexing }
        switch indexing {
        case .indexable: HPACKInteger.encode(nameIndex, prefixBits: 6, flags: 0x40, into: &output)
        case .withoutIndexing: HPACKInteger.encode(nameIndex, prefixBits: 4, flags: 0x00, into: &output)
        case .neverIndexed: HPACKInteger.encode(nameIndex, prefixBits: 4, flags: 0x10, into: &output)
        }
        if nameIndex == 0 { HPACKStringLiteral.encode(field.name, huffman: configuration.huffman, into: &output) }
        HPACKStringLiteral.encode(field.value, huffman: configuration.huffman, into: &output)
        if indexing == .indexable { dynamicTable.add(name: field.name, value: field.value) }
    }

    private static let authorization = Array("authorization".utf8)
    private static let proxyAuthorization = Array("proxy-authorization".utf8)
    private static let cookie = Array("cookie".utf8)

    /// The fields never indexed by default (see ``HPACKEncoder``).
    private static func isSensitive(_ field: HPACKField) -> Bool {
        switch field.name.count {
        case 6: return field.value.count < 20 && field.name == cookie
        case 13: return field.name == authorization
        case 19: return field.name == proxyAuthorization
        default: return false
        }
    }
}
