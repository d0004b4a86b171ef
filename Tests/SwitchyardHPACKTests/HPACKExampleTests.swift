import SwitchyardHPACK
import Testing

/// RFC 7541 Appendix C, C.2 to C.6: each block decoded (the list and the dynamic table
/// after it) and each list encoded with the RFC's settings to the RFC's octets. The hex
/// strings are the RFC's hex dumps.
@Suite("RFC 7541 Appendix C examples")
struct HPACKExampleTests {
    struct Step: Sendable {
        var block: String
        var fields: [HPACKField]
        var table: [HPACKField]
        var tableSize: Int
    }

    static func step(
        _ block: String, _ list: KeyValuePairs<String, String>, table: KeyValuePairs<String, String>, size: Int
    ) -> Step {
        Step(block: block, fields: fields(list), table: fields(table), tableSize: size)
    }

    // C.3 and C.4: requests, a 4,096-octet table.
    static let request1: KeyValuePairs<String, String> = [
        ":method": "GET", ":scheme": "http", ":path": "/", ":authority": "www.example.com",
    ]
    static let request2: KeyValuePairs<String, String> = [
        ":method": "GET", ":scheme": "http", ":path": "/", ":authority": "www.example.com", "cache-control": "no-cache",
    ]
    static let request3: KeyValuePairs<String, String> = [
        ":method": "GET", ":scheme": "https", ":path": "/index.html", ":authority": "www.example.com",
        "custom-key": "custom-value",
    ]
    static let requestTable1: KeyValuePairs<String, String> = [":authority": "www.example.com"]
    static let requestTable2: KeyValuePairs<String, String> = ["cache-control": "no-cache", ":authority": "www.example.com"]
    static let requestTable3: KeyValuePairs<String, String> = [
        "custom-key": "custom-value", "cache-control": "no-cache", ":authority": "www.example.com",
    ]

    static let c3 = [
        step("8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d", request1, table: requestTable1, size: 57),
        step("8286 84be 5808 6e6f 2d63 6163 6865", request2, table: requestTable2, size: 110),
        step(
            "8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65", request3, table: requestTable3,
            size: 164),
    ]
    static let c4 = [
        step("8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff", request1, table: requestTable1, size: 57),
        step("8286 84be 5886 a8eb 1064 9cbf", request2, table: requestTable2, size: 110),
        step("8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf", request3, table: requestTable3, size: 164),
    ]

    // C.5 and C.6: responses, a 256-octet table (evictions).
    static let response1: KeyValuePairs<String, String> = [
        ":status": "302", "cache-control": "private", "date": "Mon, 21 Oct 2013 20:13:21 GMT",
        "location": "https://www.example.com",
    ]
    static let response2: KeyValuePairs<String, String> = [
        ":status": "307", "cache-control": "private", "date": "Mon, 21 Oct 2013 20:13:21 GMT",
        "location": "https://www.example.com",
    ]
    static let response3: KeyValuePairs<String, String> = [
        ":status": "200", "cache-control": "private", "date": "Mon, 21 Oct 2013 20:13:22 GMT",
        "location": "https://www.example.com", "content-encoding": "gzip",
        "set-cookie": "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1",
    ]
    static let responseTable1: KeyValuePairs<String, String> = [
        "location": "https://www.example.com", "date": "Mon, 21 Oct 2013 20:13:21 GMT", "cache-control": "private",
        ":status": "302",
    ]
    static let responseTable2: KeyValuePairs<String, String> = [
        ":status": "307", "location": "https://www.example.com", "date": "Mon, 21 Oct 2013 20:13:21 GMT",
        "cache-control": "private",
    ]
    static let responseTable3: KeyValuePairs<String, String> = [
        "set-cookie": "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1", "content-encoding": "gzip",
        "date": "Mon, 21 Oct 2013 20:13:22 GMT",
    ]

    static let c5 = [
        step(
            """
            4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133
            2032 303a 3133 3a32 3120 474d 546e 1768 7474 7073 3a2f 2f77 7777 2e65 7861 6d70
            6c65 2e63 6f6d
            """, response1, table: responseTable1, size: 222),
        step("4803 3330 37c1 c0bf", response2, table: responseTable2, size: 222),
        step(
            """
            88c1 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3220 474d
            54c0 5a04 677a 6970 7738 666f 6f3d 4153 444a 4b48 514b 425a 584f 5157 454f 5049
            5541 5851 5745 4f49 553b 206d 6178 2d61 6765 3d33 3630 303b 2076 6572 7369 6f6e
            3d31
            """, response3, table: responseTable3, size: 215),
    ]
    static let c6 = [
        step(
            """
            4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6
            2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3
            """, response1, table: responseTable1, size: 222),
        step("4883 640e ffc1 c0bf", response2, table: responseTable2, size: 222),
        step(
            """
            88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab
            77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f
            9587 3160 65c0 03ed 4ee5 b106 3d50 07
            """, response3, table: responseTable3, size: 215),
    ]

    enum Sequence: String, CaseIterable, Sendable {
        case c3 = "C.3", c4 = "C.4", c5 = "C.5", c6 = "C.6"

        var steps: [Step] {
            switch self {
            case .c3: HPACKExampleTests.c3
            case .c4: HPACKExampleTests.c4
            case .c5: HPACKExampleTests.c5
            case .c6: HPACKExampleTests.c6
            }
        }
        var tableSize: Int { self == .c3 || self == .c4 ? 4096 : 256 }
        var huffman: Bool { self == .c4 || self == .c6 }
    }

    @Test("C.2.1: a literal with indexing, literal name, is added to the table")
    func c21() throws {
        let block = [UInt8](hex: "400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572")
        var decoder = HPACKDecoder()
        #expect(try decoder.decode(block) == [HPACKField("custom-key", "custom-header")])
        expectTable(decoder.dynamicTable, ["custom-key": "custom-header"], size: 55)

        var encoder = HPACKEncoder(configuration: .init(huffman: false))
        #expect(encoder.encode([HPACKField("custom-key", "custom-header")]) == block)
        expectTable(encoder.dynamicTable, ["custom-key": "custom-header"], size: 55)
    }

    @Test("C.2.2: a literal without indexing, indexed name, leaves the table empty")
    func c22() throws {
        let block = [UInt8](hex: "040c 2f73 616d 706c 652f 7061 7468")
        let field = HPACKField(":path", "/sample/path", indexing: .withoutIndexing)
        var decoder = HPACKDecoder()
        #expect(try decoder.decode(block) == [field])
        expectTable(decoder.dynamicTable, [:], size: 0)

        var encoder = HPACKEncoder(configuration: .init(huffman: false))
        #expect(encoder.encode([field]) == block)
        expectTable(encoder.dynamicTable, [:], size: 0)
    }

    @Test("C.2.3: a never-indexed literal keeps its flag and leaves the table empty")
    func c23() throws {
        let block = [UInt8](hex: "1008 7061 7373 776f 7264 0673 6563 7265 74")
        let field = HPACKField("password", "secret", indexing: .neverIndexed)
        var decoder = HPACKDecoder()
        #expect(try decoder.decode(block) == [field])
        expectTable(decoder.dynamicTable, [:], size: 0)

        var encoder = HPACKEncoder(configuration: .init(huffman: false))
        #expect(encoder.encode([field]) == block)
        expectTable(encoder.dynamicTable, [:], size: 0)
    }

    @Test("C.2.4: an indexed field from the static table")
    func c24() throws {
        var decoder = HPACKDecoder()
        #expect(try decoder.decode([0x82]) == [HPACKField(":method", "GET")])
        expectTable(decoder.dynamicTable, [:], size: 0)

        var encoder = HPACKEncoder(configuration: .init(huffman: false))
        #expect(encoder.encode([HPACKField(":method", "GET")]) == [0x82])
    }

    @Test("C.3 to C.6: three blocks decode to the RFC's lists and dynamic tables", arguments: Sequence.allCases)
    func decoding(_ sequence: Sequence) throws {
        var decoder = HPACKDecoder(maxTableSize: sequence.tableSize)
        for (number, step) in sequence.steps.enumerated() {
            let decoded = try decoder.decode([UInt8](hex: step.block))
            #expect(decoded == step.fields, "\(sequence.rawValue).\(number + 1)")
            #expect(decoder.dynamicTable.entries == step.table, "\(sequence.rawValue).\(number + 1)")
            #expect(decoder.dynamicTable.size == step.tableSize, "\(sequence.rawValue).\(number + 1)")
        }
    }

    @Test("C.3 to C.6: the same lists encode to the RFC's octets, with its settings", arguments: Sequence.allCases)
    func encoding(_ sequence: Sequence) throws {
        var encoder = HPACKEncoder(peerMaxTableSize: sequence.tableSize, configuration: .init(huffman: sequence.huffman))
        for (number, step) in sequence.steps.enumerated() {
            let block = encoder.encode(step.fields)
            #expect(block.hex == [UInt8](hex: step.block).hex, "\(sequence.rawValue).\(number + 1)")
            #expect(encoder.dynamicTable.entries == step.table, "\(sequence.rawValue).\(number + 1)")
            #expect(encoder.dynamicTable.size == step.tableSize, "\(sequence.rawValue).\(number + 1)")
        }
    }

    @Test("The blocks decode the same from a raw buffer, appended after existing fields")
    func rawBuffer() throws {
        var decoder = HPACKDecoder(maxTableSize: 256)
        var list = [HPACKField("x-before", "1")]
        for step in Self.c6 {
            let block = [UInt8](hex: step.block)
            let start = list.count
            let failure = block.withUnsafeBytes { (raw) -> HPACKError? in
                do throws(HPACKError) {
                    try decoder.decode(raw, into: &list)
                    return nil
                } catch {
                    return error
                }
            }
            #expect(failure == nil)
            #expect(Array(list[start...]) == step.fields)
        }
        #expect(list.first == HPACKField("x-before", "1"))
    }
}
