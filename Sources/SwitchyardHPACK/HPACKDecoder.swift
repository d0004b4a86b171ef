/// Decodes header blocks (RFC 7541 section 6) into fields, keeping the dynamic table that
/// the peer's encoder fills.
///
/// One decoder per connection direction: blocks must be decoded in the order they arrive,
/// each in full (an HTTP/2 HEADERS frame and its CONTINUATION frames put together).
///
/// Limits:
/// - ``maxTableSizeLimit`` is this side's SETTINGS_HEADER_TABLE_SIZE: a dynamic table size
///   update above it fails the block. When it is lowered below the table's current maximum
///   (``setMaxTableSizeLimit(_:)``, called once the peer acknowledged the SETTINGS), the
///   next block must begin with a size update within it.
/// - ``maxHeaderListSize`` is this side's SETTINGS_MAX_HEADER_LIST_SIZE, counted as RFC 9113
///   counts it (name + value + 32 per field). A larger list still decodes to its end, so
///   that the dynamic table stays in step with the peer's encoder, and then fails with
///   ``HPACKError/Code/headerListTooLarge``: the stream fails, the connection need not.
///
/// Any other error is a compression error: the table is no longer in step, and the
/// connection must end (HTTP/2 `COMPRESSION_ERROR`).
package struct HPACKDecoder: Sendable {
    /// The fields the peer's encoder added.
    package private(set) var dynamicTable: HPACKDynamicTable
    /// The largest dynamic table size the peer's encoder may choose (this side's
    /// SETTINGS_HEADER_TABLE_SIZE).
    package private(set) var maxTableSizeLimit: Int
    /// The largest header list a block may decode to, in octets (name + value + 32 per field).
    package var maxHeaderListSize: Int
    /// Whether the next block must begin with a size update (the limit went below the
    /// table's maximum size).
    private var sizeUpdateRequired = false

    /// - Parameters:
    ///   - maxTableSize: this side's SETTINGS_HEADER_TABLE_SIZE, the dynamic table's
    ///     initial maximum size and the limit on size updates (HTTP/2's default is 4,096).
    ///   - maxHeaderListSize: the largest header list a block may decode to.
    package init(maxTableSize: Int = 4096, maxHeaderListSize: Int = .max) {
        precondition(maxTableSize >= 0 && maxHeaderListSize >= 0, "negative HPACK limits")
        self.dynamicTable = HPACKDynamicTable(maxSize: maxTableSize)
        self.maxTableSizeLimit = maxTableSize
        self.maxHeaderListSize = maxHeaderListSize
    }

    /// Sets the limit on the dynamic table's size (this side's new
    /// SETTINGS_HEADER_TABLE_SIZE, once acknowledged). Below the table's current maximum
    /// size, the next block must begin with a size update within the new limit.
    package mutating func setMaxTableSizeLimit(_ limit: Int) {
        precondition(limit >= 0, "a negative HPACK table size limit: \(limit)")
        maxTableSizeLimit = limit
        if limit < dynamicTable.maxSize { sizeUpdateRequired = true }
    }

    /// Decodes one header block, appending its fields to `fields` in order.
    ///
    /// - Throws: an ``HPACKError``; then `fields` is as it was (no field of the block is
    ///   appended).
    package mutating func decode(_ block: UnsafeRawBufferPointer, into fields: inout [HPACKField]) throws(HPACKError) {
        let start = fields.count
        do {
            try decodeBlock(block, into: &fields)
        } catch {
            fields.removeSubrange(start...)
            throw error
        }
    }

    /// Decodes one header block, appending its fields to `fields` in order.
    ///
    /// - Throws: an ``HPACKError``; then `fields` is as it was.
    package mutating func decode(_ block: [UInt8], into fields: inout [HPACKField]) throws(HPACKError) {
        // withUnsafeBytes rethrows `any Error`: the error comes out as a value instead.
        let failure = block.withUnsafeBytes { (bytes) -> HPACKError? in
            do throws(HPACKError) {
                try decode(bytes, into: &fields)
                return nil
            } catch {
                return error
            }
        }
        if let failure { throw failure }
    }

    /// Decodes one header block into its fields.
    package mutating func decode(_ block: [UInt8]) throws(HPACKError) -> [HPACKField] {
        var fields: [HPACKField] = []
        try decode(block, into: &fields)
        return fields
    }

    private mutating func decodeBlock(_ block: UnsafeRawBufferPointer, into fields: inout [HPACKField]) throws(HPACKError) {
        var index = 0
        var sawField = false
        var listSize = 0
        while index < block.count {
            let first = block[index]
            let offset = index
            if first & 0xE0 == 0x20 {
                // Dynamic table size update (6.3): 001xxxxx.
                guard !sawField else {
                    throw HPACKError(
                        code: .tableSizeUpdateAfterField,
                        message: "a dynamic table size update at offset \(offset), after the block's first field")
                }
                let size = try HPACKInteger.decode(block, at: &index, prefixBits: 5)
                guard size <= maxTableSizeLimit else {
                    throw HPACKError(
                        code: .tableSizeUpdateAboveLimit,
                        message: "a dynamic table size update to \(size) at offset \(offset), above the limit \(maxTableSizeLimit)")
                }
                dynamicTable.setMaxSize(size)
                sizeUpdateRequired = false
                continue
            }
            if !sawField {
                guard !sizeUpdateRequired else {
                    throw HPACKError(
                        code: .missingTableSizeUpdate,
                        message: "the limit was lowered to \(maxTableSizeLimit), below the table's size \(dynamicTable.maxSize), "
                            + "and the block does not begin with a size update")
                }
                sawField = true
            }
            let field: HPACKField
            if first & 0x80 != 0 {
                // Indexed (6.1): 1xxxxxxx.
                field = try entry(at: try HPACKInteger.decode(block, at: &index, prefixBits: 7), offset: offset)
            } else if first & 0x40 != 0 {
                // Literal with incremental indexing (6.2.1): 01xxxxxx.
                field = try literal(block, at: &index, prefixBits: 6, indexing: .indexable)
                dynamicTable.add(name: field.name, value: field.value)
            } else {
                // Literal without indexing (6.2.2): 0000xxxx; never indexed (6.2.3): 0001xxxx.
                let indexing: HPACKField.Indexing = first & 0x10 != 0 ? .neverIndexed : .withoutIndexing
                field = try literal(block, at: &index, prefixBits: 4, indexing: indexing)
            }
            listSize += field.size
            // Past the limit, decoding goes on (the table must follow the peer's) but keeps
            // no more fields.
            if listSize <= maxHeaderListSize { fields.append(field) }
        }
        if !sawField && sizeUpdateRequired {
            throw HPACKError(
                code: .missingTableSizeUpdate,
                message: "the limit was lowered to \(maxTableSizeLimit), below the table's size \(dynamicTable.maxSize), "
                    + "and the block does not begin with a size update")
        }
        guard listSize <= maxHeaderListSize else {
            throw HPACKError(
                code: .headerListTooLarge,
                message: "the header list is \(listSize) octets (name + value + 32 per field), above the limit \(maxHeaderListSize)")
        }
    }

    /// The field at an HPACK index: the static table's, then the dynamic table's.
    private func entry(at index: Int, offset: Int) throws(HPACKError) -> HPACKField {
        guard index != 0 else {
            throw HPACKError(code: .indexZero, message: "index 0 at offset \(offset)")
        }
        let staticCount = HPACKStaticTable.entries.count
        if index <= staticCount { return HPACKStaticTable.entries[index - 1] }
        guard index - staticCount <= dynamicTable.count else {
            throw HPACKError(
                code: .indexOutOfRange,
                message: "index \(index) at offset \(offset), past the tables (\(staticCount) static and "
                    + "\(dynamicTable.count) dynamic entries)")
        }
        return dynamicTable[index - staticCount - 1]
    }

    /// A literal field: a name index (0 for a literal name) with a `prefixBits`-bit prefix,
    /// then the name if literal, then the value.
    private func literal(
        _ block: UnsafeRawBufferPointer, at index: inout Int, prefixBits: Int, indexing: HPACKField.Indexing
    ) throws(HPACKError) -> HPACKField {
        let offset = index
        let nameIndex = try HPACKInteger.decode(block, at: &index, prefixBits: prefixBits)
        let name =
            nameIndex == 0
            ? try HPACKStringLiteral.decode(block, at: &index)
            : try entry(at: nameIndex, offset: offset).name
        let value = try HPACKStringLiteral.decode(block, at: &index)
        return HPACKField(name: name, value: value, indexing: indexing)
    }
}
