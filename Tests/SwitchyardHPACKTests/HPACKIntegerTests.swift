import SwitchyardHPACK
import Testing

@Suite("Integers with an N-bit prefix (RFC 7541 5.1)")
struct HPACKIntegerTests {
    static func decode(_ bytes: [UInt8], prefixBits: Int) throws(HPACKError) -> (value: Int, consumed: Int) {
        var index = 0
        let result = bytes.withUnsafeBytes { (raw) -> Result<Int, HPACKError> in
            Result { () throws(HPACKError) in try HPACKInteger.decode(raw, at: &index, prefixBits: prefixBits) }
        }
        return (try result.get(), index)
    }

    static func encode(_ value: Int, prefixBits: Int, flags: UInt8 = 0) -> [UInt8] {
        var output: [UInt8] = []
        HPACKInteger.encode(value, prefixBits: prefixBits, flags: flags, into: &output)
        return output
    }

    @Test("C.1.1: 10 with a 5-bit prefix is one octet")
    func c11() throws {
        #expect(Self.encode(10, prefixBits: 5) == [0b0000_1010])
        // The bits above the prefix are the representation's and are ignored.
        #expect(try Self.decode([0b1110_1010], prefixBits: 5) == (10, 1))
    }

    @Test("C.1.2: 1337 with a 5-bit prefix is 31, 154, 10")
    func c12() throws {
        #expect(Self.encode(1337, prefixBits: 5) == [0b0001_1111, 0b1001_1010, 0b0000_1010])
        #expect(Self.encode(1337, prefixBits: 5, flags: 0xE0) == [0xFF, 0b1001_1010, 0b0000_1010])
        #expect(try Self.decode([0b0001_1111, 0b1001_1010, 0b0000_1010, 0xFF], prefixBits: 5) == (1337, 3))
    }

    @Test("C.1.3: 42 at an octet boundary (8-bit prefix)")
    func c13() throws {
        #expect(Self.encode(42, prefixBits: 8) == [42])
        #expect(try Self.decode([42], prefixBits: 8) == (42, 1))
    }

    @Test("Values at and around every prefix's limit round-trip", arguments: 1...8)
    func limits(prefixBits: Int) throws {
        let limit = (1 << prefixBits) - 1
        for value in [0, 1, limit - 1, limit, limit + 1, limit + 127, limit + 128, 16_383, 1 << 21, HPACKInteger.maximum] {
            let encoded = Self.encode(value, prefixBits: prefixBits)
            #expect(try Self.decode(encoded, prefixBits: prefixBits) == (value, encoded.count), "\(value)")
        }
    }

    @Test("An integer cut short is truncated")
    func truncated() {
        expectHPACKError(.truncated, naming: ["integer"]) { _ = try Self.decode([], prefixBits: 5) }
        expectHPACKError(.truncated, naming: ["integer"]) { _ = try Self.decode([0x1F], prefixBits: 5) }
        expectHPACKError(.truncated, naming: ["integer"]) { _ = try Self.decode([0x1F, 0x9A], prefixBits: 5) }
    }

    @Test("An integer above 2^32 - 1 or longer than such a value needs overflows")
    func overflow() {
        // 2^32 - 1 + 1 with a 7-bit prefix: 127 then 2^32 - 127.
        let tooLarge = Self.encode(HPACKInteger.maximum + 1, prefixBits: 7)
        expectHPACKError(.integerOverflow, naming: ["4294967295"]) { _ = try Self.decode(tooLarge, prefixBits: 7) }
        // Zeros carried on past five continuation octets.
        expectHPACKError(.integerOverflow, naming: ["octets"]) {
            _ = try Self.decode([0x7F, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00], prefixBits: 7)
        }
        // Many continuation octets: stopped without reading them all.
        expectHPACKError(.integerOverflow) {
            _ = try Self.decode([0x7F] + [UInt8](repeating: 0xFF, count: 100), prefixBits: 7)
        }
    }
}
