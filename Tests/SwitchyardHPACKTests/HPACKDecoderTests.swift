import SwitchyardHPACK
import Testing

@Suite("The decoder's errors and limits")
struct HPACKDecoderTests {
    static func integer(_ value: Int, prefixBits: Int, flags: UInt8) -> [UInt8] {
        var output: [UInt8] = []
        HPACKInteger.encode(value, prefixBits: prefixBits, flags: flags, into: &output)
        return output
    }

    /// C.3.1: four fields, 180 octets as a header list; adds :authority to the table.
    static let request1 = [UInt8](hex: "8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d")
    static let request2 = [UInt8](hex: "8286 84be 5808 6e6f 2d63 6163 6865")

    @Test("Index 0 fails, as an indexed field and as a literal's name")
    func indexZero() {
        var decoder = HPACKDecoder()
        expectHPACKError(.indexZero, naming: ["index 0"]) { _ = try decoder.decode([0x80]) }
        // 0x40 with index 0 is a literal name, not index 0; 0x80 is the only index-0 form.
        #expect(throws: Never.self) { _ = try decoder.decode([0x40, 0x01, 0x61, 0x00]) }
    }

    @Test("An index past the static and dynamic tables fails, as a field and as a name")
    func indexPastTables() {
        var decoder = HPACKDecoder()
        // 62 with an empty dynamic table.
        expectHPACKError(.indexOutOfRange, naming: ["index 62", "61 static", "0 dynamic"]) { _ = try decoder.decode([0xBE]) }
        expectHPACKError(.indexOutOfRange, naming: ["index 62"]) { _ = try decoder.decode([0x7E, 0x00]) }
        expectHPACKError(.indexOutOfRange, naming: ["index 70"]) { _ = try decoder.decode(Self.integer(70, prefixBits: 4, flags: 0x10) + [0]) }
        // After C.3.1 index 62 is :authority, 63 is past.
        var filled = HPACKDecoder()
        #expect(throws: Never.self) { _ = try filled.decode(Self.request1) }
        #expect(throws: Never.self) { _ = try filled.decode([0xBE]) }
        expectHPACKError(.indexOutOfRange, naming: ["index 63", "1 dynamic"]) { _ = try filled.decode([0xBF]) }
    }

    @Test("A size update above the decoder's limit fails; at or below it the table follows")
    func sizeUpdateLimit() throws {
        var decoder = HPACKDecoder(maxTableSize: 4096)
        expectHPACKError(.tableSizeUpdateAboveLimit, naming: ["4097", "4096"]) {
            _ = try decoder.decode(Self.integer(4097, prefixBits: 5, flags: 0x20) + [0x82])
        }
        var ok = HPACKDecoder(maxTableSize: 4096)
        // Two updates at the start (the smallest, then the final size) are allowed.
        _ = try ok.decode([0x20] + Self.integer(4096, prefixBits: 5, flags: 0x20) + Self.request1)
        #expect(ok.dynamicTable.maxSize == 4096)
        _ = try ok.decode(Self.integer(60, prefixBits: 5, flags: 0x20))
        #expect(ok.dynamicTable.maxSize == 60)
        #expect(ok.dynamicTable.count == 1)  // 57 octets still fit
        _ = try ok.decode([0x20])
        #expect(ok.dynamicTable.count == 0 && ok.dynamicTable.size == 0)
    }

    @Test("A size update after a field fails")
    func sizeUpdateAfterField() {
        var decoder = HPACKDecoder()
        expectHPACKError(.tableSizeUpdateAfterField, naming: ["offset 1"]) { _ = try decoder.decode([0x82, 0x20]) }
        var other = HPACKDecoder()
        expectHPACKError(.tableSizeUpdateAfterField) { _ = try other.decode(Self.request1 + [0x3F, 0x01]) }
    }

    @Test("After the limit went below the table's size, the next block must begin with an update within it")
    func requiredSizeUpdate() throws {
        var decoder = HPACKDecoder(maxTableSize: 4096)
        decoder.setMaxTableSizeLimit(100)
        expectHPACKError(.missingTableSizeUpdate, naming: ["100"]) { _ = try decoder.decode([0x82]) }

        var updated = HPACKDecoder(maxTableSize: 4096)
        _ = try updated.decode(Self.request1)
        updated.setMaxTableSizeLimit(100)
        expectHPACKError(.tableSizeUpdateAboveLimit) { _ = try updated.decode(Self.integer(200, prefixBits: 5, flags: 0x20)) }
        #expect(try updated.decode(Self.integer(100, prefixBits: 5, flags: 0x20) + [0x82]) == [HPACKField(":method", "GET")])
        #expect(updated.dynamicTable.maxSize == 100)
        // Only the first block after the change needs one; raising the limit needs none.
        #expect(throws: Never.self) { _ = try updated.decode([0x82]) }
        updated.setMaxTableSizeLimit(8192)
        #expect(throws: Never.self) { _ = try updated.decode([0x82]) }
        #expect(updated.dynamicTable.maxSize == 100)
    }

    @Test("An integer or a string cut short is truncated")
    func truncated() {
        let blocks: [(bytes: [UInt8], words: [String])] = [
            ([0xFF], ["integer"]),  // an index with its continuation missing
            ([0xFF, 0x80], ["integer"]),
            ([0x3F], ["integer"]),  // a size update
            ([0x41], ["string"]),  // :authority with no value
            ([0x41, 0x0F, 0x77, 0x77], ["15 octets", "2 are left"]),  // value of 15, 2 given
            ([0x40, 0x0A, 0x63], ["string"]),  // a literal name of 10, 1 given
            ([0x40, 0x01, 0x61], ["string"]),  // a name and no value
            ([0x41, 0x8C, 0xF1, 0xE3], ["12 octets"]),  // Huffman-coded, cut short
            ([0x41, 0x7F], ["integer"]),  // a string length with its continuation missing
            (Array(Self.request1.dropLast()), ["string"]),
        ]
        for block in blocks {
            var decoder = HPACKDecoder()
            expectHPACKError(.truncated, naming: block.words) { _ = try decoder.decode(block.bytes) }
        }
    }

    @Test("An integer that overflows fails: an index, a string length, a size update")
    func overflow() {
        // 127 + 127 + 127 << 7 + ... + 15 << 28: 2^32 + 126.
        let huge: [UInt8] = [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x0F]
        for block in [[0xFF] + huge.dropFirst(), [0x41, 0x7F] + huge.dropFirst(), [0x3F] + huge.dropFirst()] {
            var decoder = HPACKDecoder()
            expectHPACKError(.integerOverflow) { _ = try decoder.decode(Array(block)) }
        }
        var decoder = HPACKDecoder()
        expectHPACKError(.integerOverflow) { _ = try decoder.decode([0xFF] + [UInt8](repeating: 0x80, count: 10) + [0x00]) }
    }

    @Test("A header list over the limit fails with its own error after the whole block, the table in step")
    func headerListTooLarge() throws {
        // C.3.1 is 42 + 43 + 38 + 57 = 180 octets as a header list.
        var exact = HPACKDecoder(maxHeaderListSize: 180)
        #expect(try exact.decode(Self.request1).count == 4)

        var decoder = HPACKDecoder(maxHeaderListSize: 179)
        var list = [HPACKField("x-kept", "1")]
        expectHPACKError(.headerListTooLarge, naming: ["180", "179"]) { try decoder.decode(Self.request1, into: &list) }
        #expect(list == [HPACKField("x-kept", "1")])
        // The literal with indexing was still added: the next block's index 62 resolves.
        expectTable(decoder.dynamicTable, [":authority": "www.example.com"], size: 57)
        decoder.maxHeaderListSize = 1000
        #expect(try decoder.decode(Self.request2).last == HPACKField("cache-control", "no-cache"))
    }

    @Test("A failed block leaves the caller's list as it was")
    func failureKeepsList() {
        var decoder = HPACKDecoder()
        var list = [HPACKField("a", "b")]
        expectHPACKError(.indexZero) { try decoder.decode([0x82, 0x86, 0x80], into: &list) }
        #expect(list == [HPACKField("a", "b")])
    }

    @Test("The never-indexed flag survives an indexed name, and values need not be UTF-8")
    func neverIndexedAndOctets() throws {
        // Never indexed, name index 23 (authorization: 23 = 15 + 8), value 3 raw octets.
        var decoder = HPACKDecoder()
        let decoded = try decoder.decode([0x1F, 0x08, 0x03, 0xFF, 0x00, 0x80])
        #expect(decoded == [HPACKField(name: Array("authorization".utf8), value: [0xFF, 0x00, 0x80], indexing: .neverIndexed)])
        #expect(decoder.dynamicTable.count == 0)
    }

    @Test("A literal with indexing larger than the table empties it and is still decoded")
    func entryLargerThanTable() throws {
        var decoder = HPACKDecoder(maxTableSize: 64)
        _ = try decoder.decode([0x40, 0x01, 0x61, 0x01, 0x62])  // a: b, 34 octets
        expectTable(decoder.dynamicTable, ["a": "b"], size: 34)
        let value = [UInt8](repeating: 0x76, count: 40)  // 1 + 40 + 32 = 73 > 64
        let decoded = try decoder.decode([0x40, 0x01, 0x63, 0x28] + value)
        #expect(decoded == [HPACKField(name: [0x63], value: value)])
        expectTable(decoder.dynamicTable, [:], size: 0)
    }

    @Test("An empty block decodes to no fields")
    func emptyBlock() throws {
        var decoder = HPACKDecoder()
        #expect(try decoder.decode([]) == [])
    }
}
