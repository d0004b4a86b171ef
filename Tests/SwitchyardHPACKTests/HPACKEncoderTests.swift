import SwitchyardHPACK
import Testing

@Suite("The encoder's choices")
struct HPACKEncoderTests {
    static let plain = HPACKEncoder.Configuration(huffman: false)

    @Test("authorization, proxy-authorization and short cookies are never indexed by default")
    func sensitiveByDefault() throws {
        var encoder = HPACKEncoder(configuration: Self.plain)
        var decoder = HPACKDecoder()
        let list = [
            HPACKField("authorization", "Bearer abc"),
            HPACKField("proxy-authorization", "Basic xyz"),
            HPACKField("cookie", "id=1"),
            HPACKField("cookie", "session=0123456789abcdef0123"),
        ]
        let block = encoder.encode(list)
        // authorization: never indexed (0001), name index 23 = 15 + 8.
        #expect(Array(block.prefix(2)) == [0x1F, 0x08])
        let decoded = try decoder.decode(block)
        #expect(decoded.map(\.indexing) == [.neverIndexed, .neverIndexed, .neverIndexed, .indexable])
        #expect(decoded.map(\.value) == list.map(\.value))
        // Only the long cookie went into the tables.
        expectTable(encoder.dynamicTable, ["cookie": "session=0123456789abcdef0123"], size: 6 + 28 + 32)
        #expect(decoder.dynamicTable.entries == encoder.dynamicTable.entries)
        // Sent again, still literal: a never-indexed field is never an index.
        let again = encoder.encode([list[0]])
        #expect(again.first == 0x1F)
    }

    @Test("With the policy off, credentials are indexed like any field")
    func policyOff() throws {
        var encoder = HPACKEncoder(configuration: .init(huffman: false, neverIndexesSensitiveFields: false))
        let block = encoder.encode([HPACKField("authorization", "Bearer abc")])
        #expect(block.prefix(1) == [0x57])  // 01 then 23
        #expect(encoder.encode([HPACKField("authorization", "Bearer abc")]) == [0xBE])
    }

    @Test("A field marked never indexed is a literal even when the static table holds it")
    func callerNeverIndexed() throws {
        var encoder = HPACKEncoder(configuration: Self.plain)
        let block = encoder.encode([HPACKField(":method", "GET", indexing: .neverIndexed)])
        #expect(block == [0x12, 0x03, 0x47, 0x45, 0x54])
        var decoder = HPACKDecoder()
        #expect(try decoder.decode(block) == [HPACKField(":method", "GET", indexing: .neverIndexed)])
    }

    @Test("Without indexing still sends an index for a field a table holds, and adds nothing")
    func withoutIndexing() throws {
        var encoder = HPACKEncoder(configuration: Self.plain)
        #expect(encoder.encode([HPACKField(":method", "GET", indexing: .withoutIndexing)]) == [0x82])
        let block = encoder.encode([HPACKField("x-trace", "1", indexing: .withoutIndexing)])
        #expect(block == [0x00, 0x07] + Array("x-trace".utf8) + [0x01, 0x31])
        #expect(encoder.dynamicTable.count == 0)
    }

    @Test("A field larger than the table goes without indexing rather than emptying it")
    func largerThanTable() throws {
        var encoder = HPACKEncoder(peerMaxTableSize: 64, configuration: Self.plain)
        var decoder = HPACKDecoder(maxTableSize: 64)
        _ = try decoder.decode(encoder.encode([HPACKField("a", "b")]))
        let big = HPACKField("x-big", String(repeating: "v", count: 40))
        let block = encoder.encode([big])
        #expect(block.first == 0x00)
        expectTable(encoder.dynamicTable, ["a": "b"], size: 34)
        #expect(try decoder.decode(block) == [HPACKField("x-big", String(repeating: "v", count: 40), indexing: .withoutIndexing)])
    }

    @Test("Huffman is used when it is not longer than the octets")
    func huffmanChoice() {
        var encoder = HPACKEncoder()
        // 0xFF codes to 26 bits: longer than the octet, so raw (H bit clear).
        #expect(encoder.encode([HPACKField(name: Array("x-a".utf8), value: [0xFF])]).suffix(2) == [0x01, 0xFF])
        // "307" codes to 3 octets, as long as itself: Huffman, as in C.6.2.
        let block = encoder.encode([HPACKField(":status", "307")])
        #expect(block == [0x48, 0x83, 0x64, 0x0E, 0xFF])
    }

    @Test("A smaller peer table size is announced at the start of the next block, once")
    func shrink() throws {
        var encoder = HPACKEncoder(configuration: Self.plain)
        var decoder = HPACKDecoder()
        _ = try decoder.decode(encoder.encode([HPACKField("custom-key", "custom-value")]))
        encoder.setPeerMaxTableSize(256)
        decoder.setMaxTableSizeLimit(256)
        let block = encoder.encode([HPACKField(":method", "GET")])
        #expect(block == [0x3F, 0xE1, 0x01, 0x82])
        _ = try decoder.decode(block)
        #expect(decoder.dynamicTable.maxSize == 256 && encoder.dynamicTable.maxSize == 256)
        #expect(encoder.encode([HPACKField(":method", "GET")]) == [0x82])
        // The same size again changes nothing.
        encoder.setPeerMaxTableSize(256)
        #expect(encoder.encode([HPACKField(":method", "GET")]) == [0x82])
    }

    @Test("A size that went down and up between blocks is announced as the minimum, then the final size")
    func shrinkThenGrow() throws {
        var encoder = HPACKEncoder(configuration: Self.plain)
        var decoder = HPACKDecoder()
        _ = try decoder.decode(encoder.encode([HPACKField("custom-key", "custom-value")]))
        encoder.setPeerMaxTableSize(0)
        encoder.setPeerMaxTableSize(1000)
        encoder.setPeerMaxTableSize(4096)
        let block = encoder.encode([HPACKField(":method", "GET")])
        #expect(block == [0x20, 0x3F, 0xE1, 0x1F, 0x82])
        #expect(encoder.dynamicTable.count == 0 && encoder.dynamicTable.maxSize == 4096)
        _ = try decoder.decode(block)
        #expect(decoder.dynamicTable.count == 0 && decoder.dynamicTable.maxSize == 4096)
    }

    @Test("A peer allowing more than the configured maximum: the encoder keeps to its own")
    func configuredMaximum() throws {
        var encoder = HPACKEncoder(peerMaxTableSize: 4096, configuration: .init(huffman: false, maxTableSize: 1024))
        // The first block brings the table from 4,096 down to the configured 1,024.
        #expect(encoder.encode([HPACKField(":method", "GET")]) == [0x3F, 0xE1, 0x07, 0x82])
        encoder.setPeerMaxTableSize(65_536)
        #expect(encoder.encode([HPACKField(":method", "GET")]) == [0x82])
        #expect(encoder.dynamicTable.maxSize == 1024)
    }

    @Test("Names match the lowest index: the static table's before the dynamic table's")
    func nameMatch() throws {
        var encoder = HPACKEncoder(configuration: Self.plain)
        _ = encoder.encode([HPACKField("x-name", "one")])
        // x-name is at 62 now; a new value refers to the name by index 62 (0x40 | 62).
        #expect(encoder.encode([HPACKField("x-name", "two")]).prefix(1) == [0x7E])
        // :status 302 is not in the static table; its name is at 8 (the first :status).
        #expect(encoder.encode([HPACKField(":status", "302")]).prefix(1) == [0x48])
    }
}
