import SwitchyardHPACK
import Testing

@Suite("The Huffman code (RFC 7541 Appendix B, 5.2)")
struct HPACKHuffmanTests {
    static func encode(_ bytes: [UInt8]) -> [UInt8] {
        var output: [UInt8] = []
        HPACKHuffman.encode(bytes, into: &output)
        return output
    }

    static func decode(_ bytes: [UInt8]) throws(HPACKError) -> [UInt8] {
        let result = bytes.withUnsafeBytes { (raw) -> Result<[UInt8], HPACKError> in
            Result { () throws(HPACKError) in
                var output: [UInt8] = []
                try HPACKHuffman.decode(raw, into: &output)
                return output
            }
        }
        return try result.get()
    }

    @Test("The RFC's coded strings (C.4, C.6) encode and decode")
    func rfcStrings() throws {
        let examples: KeyValuePairs<String, String> = [
            "www.example.com": "f1e3 c2e5 f23a 6ba0 ab90 f4ff",
            "no-cache": "a8eb 1064 9cbf",
            "custom-key": "25a8 49e9 5ba9 7d7f",
            "custom-value": "25a8 49e9 5bb8 e8b4 bf",
            "302": "6402",
            "307": "640e ff",
            "private": "aec3 771a 4b",
            "Mon, 21 Oct 2013 20:13:21 GMT": "d07a be94 1054 d444 a820 0595 040b 8166 e082 a62d 1bff",
            "https://www.example.com": "9d29 ad17 1863 c78f 0b97 c8e9 ae82 ae43 d3",
            "gzip": "9bd9 ab",
            "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1":
                "94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f 9587 3160 65c0 03ed 4ee5 b106 3d50 07",
        ]
        for (text, hex) in examples {
            let coded = [UInt8](hex: hex)
            #expect(Self.encode(Array(text.utf8)) == coded, "\(text)")
            #expect(HPACKHuffman.encodedCount(of: Array(text.utf8)) == coded.count, "\(text)")
            #expect(try Self.decode(coded) == Array(text.utf8), "\(text)")
        }
        #expect(try Self.decode([]) == [])
        #expect(Self.encode([]) == [])
    }

    @Test("Every octet value round-trips, alone and in runs of 1 to 9")
    func everyOctet() throws {
        for byte in UInt8.min...UInt8.max {
            for count in 1...9 {
                let text = [UInt8](repeating: byte, count: count)
                let coded = Self.encode(text)
                #expect(coded.count == HPACKHuffman.encodedCount(of: text))
                #expect(try Self.decode(coded) == text, "\(byte) x \(count)")
            }
        }
        let all = Array(UInt8.min...UInt8.max)
        #expect(try Self.decode(Self.encode(all)) == all)
        #expect(try Self.decode(Self.encode(all.reversed())) == all.reversed())
    }

    @Test("Padding longer than 7 bits fails")
    func longPadding() {
        // 'a' is 00011 (5 bits): with a full octet of ones after it, 11 bits of padding.
        expectHPACKError(.huffmanPaddingTooLong, naming: ["11 bits"]) { _ = try Self.decode([0b0001_1111, 0xFF]) }
        // A whole octet of ones alone: 8 bits of padding.
        expectHPACKError(.huffmanPaddingTooLong, naming: ["8 bits"]) { _ = try Self.decode([0xFF]) }
        // "302" coded (6402) plus an octet of ones.
        expectHPACKError(.huffmanPaddingTooLong) { _ = try Self.decode([0x64, 0x02, 0xFF]) }
    }

    @Test("Padding that is not a prefix of EOS (not all ones) fails")
    func paddingNotEOS() {
        // 'a' (00011) then 000: zeros are not EOS's bits.
        expectHPACKError(.huffmanPaddingNotEOS, naming: ["0b000"]) { _ = try Self.decode([0b0001_1000]) }
        // 'a' then 101.
        expectHPACKError(.huffmanPaddingNotEOS, naming: ["0b101"]) { _ = try Self.decode([0b0001_1101]) }
        // 'a' is not complete in one zero octet: 00000000 is '0' (00000) then 000.
        expectHPACKError(.huffmanPaddingNotEOS) { _ = try Self.decode([0x00]) }
    }

    @Test("An encoded EOS fails")
    func eos() {
        // EOS is 30 ones; padded with two more ones to 4 octets.
        expectHPACKError(.huffmanEOS) { _ = try Self.decode([0xFF, 0xFF, 0xFF, 0xFF]) }
        // 'a' then EOS then padding.
        let aThenEOS: [UInt8] = [0b0001_1111, 0xFF, 0xFF, 0xFF, 0b1111_1111]
        expectHPACKError(.huffmanEOS) { _ = try Self.decode(aThenEOS) }
    }

    @Test("Codes are never longer than 30 bits, so an octet codes to at most 4 octets")
    func lengths() {
        for byte in UInt8.min...UInt8.max {
            #expect(HPACKHuffman.encodedCount(of: [byte]) <= 4)
        }
        #expect(HPACKHuffman.encodedCount(of: Array("0".utf8)) == 1)  // 00000, 5 bits
        #expect(HPACKHuffman.encodedCount(of: [0x0A]) == 4)  // LF: 30 bits
    }
}
