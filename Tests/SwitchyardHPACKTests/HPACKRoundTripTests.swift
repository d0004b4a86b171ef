import SwitchyardHPACK
import Testing

@Suite("Random header lists through the encoder and the decoder")
struct HPACKRoundTripTests {
    /// A seeded generator (SplitMix64), so a failure repeats.
    struct SeededGenerator: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    static let names = [
        ":method", ":path", ":status", ":authority", "content-type", "cookie", "authorization", "user-agent",
        "x-request-id", "grpc-status", "grpc-message", "te", "x-a", "x-binary-bin",
    ].map { Array($0.utf8) }
    static let values = ["GET", "POST", "/", "/index.html", "200", "404", "trailers", "application/grpc", ""].map { Array($0.utf8) }

    static func randomField(_ random: inout SeededGenerator) -> HPACKField {
        let name: [UInt8] =
            Int.random(in: 0..<10, using: &random) == 0
            ? (0..<Int.random(in: 1...12, using: &random)).map { _ in UInt8.random(in: 0x61...0x7A, using: &random) }
            : names.randomElement(using: &random)!
        let value: [UInt8]
        switch Int.random(in: 0..<4, using: &random) {
        case 0: value = values.randomElement(using: &random)!
        case 1: value = (0..<Int.random(in: 0...80, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }
        default: value = (0..<Int.random(in: 0...30, using: &random)).map { _ in UInt8.random(in: 0x20...0x7E, using: &random) }
        }
        let indexing: HPACKField.Indexing =
            switch Int.random(in: 0..<10, using: &random) {
            case 0: .neverIndexed
            case 1: .withoutIndexing
            default: .indexable
            }
        return HPACKField(name: name, value: value, indexing: indexing)
    }

    @Test("Decoded lists equal the encoded ones and both tables stay equal after every block", arguments: [
        (seed: UInt64(1), tableSize: 0, huffman: true),
        (seed: 2, tableSize: 64, huffman: false),
        (seed: 3, tableSize: 256, huffman: true),
        (seed: 4, tableSize: 256, huffman: false),
        (seed: 5, tableSize: 4096, huffman: true),
    ])
    func roundTrip(seed: UInt64, tableSize: Int, huffman: Bool) throws {
        var random = SeededGenerator(state: seed)
        var encoder = HPACKEncoder(peerMaxTableSize: tableSize, configuration: .init(huffman: huffman))
        var decoder = HPACKDecoder(maxTableSize: tableSize)
        var evictions = 0
        for blockNumber in 0..<300 {
            // Now and then the decoder's limit (its SETTINGS_HEADER_TABLE_SIZE) changes, the
            // encoder following: sometimes twice between blocks.
            if blockNumber % 37 == 36 {
                for _ in 0..<Int.random(in: 1...2, using: &random) {
                    let size = [0, 32, 100, tableSize, tableSize / 2].randomElement(using: &random)!
                    decoder.setMaxTableSizeLimit(size)
                    encoder.setPeerMaxTableSize(size)
                }
            }
            let list = (0..<Int.random(in: 0...12, using: &random)).map { _ in Self.randomField(&random) }
            let countBefore = encoder.dynamicTable.count
            let block = encoder.encode(list)
            let decoded = try decoder.decode(block)
            #expect(decoded.map(\.name) == list.map(\.name), "block \(blockNumber)")
            #expect(decoded.map(\.value) == list.map(\.value), "block \(blockNumber)")
            for (sent, received) in zip(list, decoded) where sent.indexing == .neverIndexed {
                #expect(received.indexing == .neverIndexed, "block \(blockNumber)")
            }
            #expect(decoder.dynamicTable.entries == encoder.dynamicTable.entries, "block \(blockNumber)")
            #expect(decoder.dynamicTable.size == encoder.dynamicTable.size, "block \(blockNumber)")
            #expect(decoder.dynamicTable.maxSize == encoder.dynamicTable.maxSize, "block \(blockNumber)")
            #expect(encoder.dynamicTable.size <= encoder.dynamicTable.maxSize)
            if encoder.dynamicTable.count < countBefore { evictions += 1 }
        }
        if tableSize > 0 { #expect(evictions > 0, "the table never evicted: the test would not exercise eviction") }
    }
}
