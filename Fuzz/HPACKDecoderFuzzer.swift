// libFuzzer target for `HPACKDecoder`, HPACK's header block decoder
// (Sources/SwitchyardHPACK/HPACKDecoder.swift and the files it uses): what an HTTP/2
// connection will decode from its peer.
//
// Not a SwiftPM target: `scripts/fuzz` compiles this file with SwitchyardHPACK's sources
// into one instrumented binary, `swiftc -sanitize=fuzzer,address`. Any broken invariant
// below is a `fatalError`, which libFuzzer reports as a crash and saves as an artifact.
//
// Input layout:
//   byte 0: settings: bits 0-1 the decoder's table size (0, 64, 256, 4096), bits 2-3 its
//           maximum header list size (none, 100, 1000, 8192), bit 4 Huffman on in the
//           re-encoding, bit 5 the limit lowered to half before the second block;
//   rest:   header blocks, each a length octet then that many octets (the last one cut
//           short by the input's end is decoded as it is): one connection's blocks, in order.
//
// Checked, for every input:
// - decoding never traps; a failure is an HPACKError with a message, and leaves the
//   caller's list as it was; after a failure other than `headerListTooLarge` no more blocks
//   are decoded (the connection would end);
// - after every block, failed or not, the dynamic table's size is the sum of its entries'
//   sizes and at most its maximum size; after a block decoded to its end, the maximum size
//   is at most the limit (a block that failed may have failed before the size update a
//   lowered limit requires, so the table keeps the peer's last size);
// - a decoded list is within the maximum header list size, and `headerListTooLarge` is
//   thrown only for a list over it (the table still follows the block);
// - re-encoding: every decoded list, encoded by an encoder and decoded by a decoder that
//   follow each other from the start, gives the same names, values and never-indexed flags,
//   and the two tables are equal after every block.

private let tableSizes = [0, 64, 256, 4096]
private let listSizes = [Int.max, 100, 1000, 8192]

@inline(never)
private func check(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition { fatalError("HPACKDecoder invariant broken: \(message())") }
}

private func hex(_ bytes: some Sequence<UInt8>, limit: Int = 64) -> String {
    var text = ""
    var n = 0
    for b in bytes {
        if n == limit { text += "..."; break }
        text += (b < 16 ? "0" : "") + String(b, radix: 16)
        n += 1
    }
    return text
}

private func checkTable(_ table: HPACKDynamicTable, limit: Int?, _ what: String) {
    let entries = table.entries
    check(entries.count == table.count, "\(what): \(entries.count) entries, count \(table.count)")
    check(table.size == entries.reduce(0) { $0 + $1.size }, "\(what): size \(table.size) is not the entries' sum")
    check(table.size <= table.maxSize, "\(what): size \(table.size) above the maximum \(table.maxSize)")
    if let limit {
        check(table.maxSize <= limit, "\(what): maximum size \(table.maxSize) above the limit \(limit)")
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size >= 1 else { return 0 }
    let input = Array(UnsafeBufferPointer(start: data, count: size))
    let settings = input[0]
    let tableSize = tableSizes[Int(settings & 3)]
    let listSize = listSizes[Int(settings >> 2 & 3)]
    let huffman = settings & 0x10 != 0
    let lowerLimit = settings & 0x20 != 0

    var blocks: [ArraySlice<UInt8>] = []
    var index = 1
    while index < input.count {
        let length = Int(input[index])
        let end = min(input.count, index + 1 + length)
        blocks.append(input[(index + 1)..<end])
        index = end
    }

    var decoder = HPACKDecoder(maxTableSize: tableSize, maxHeaderListSize: listSize)
    var encoder = HPACKEncoder(peerMaxTableSize: tableSize, configuration: .init(huffman: huffman))
    var mirror = HPACKDecoder(maxTableSize: tableSize)
    var limit = tableSize
    let sentinel = HPACKField("x-sentinel", "kept")

    for (number, block) in blocks.enumerated() {
        if number == 1 && lowerLimit {
            limit = tableSize / 2
            decoder.setMaxTableSizeLimit(limit)
        }
        var list = [sentinel]
        var failure: HPACKError?
        do {
            try decoder.decode(Array(block), into: &list)
        } catch {
            failure = error
        }
        // headerListTooLarge comes only after the whole block, its size updates included.
        let decodedToEnd = failure == nil || failure?.code == .headerListTooLarge
        checkTable(decoder.dynamicTable, limit: decodedToEnd ? limit : nil, "block \(number) \(hex(block))")

        if let failure {
            check(!failure.message.isEmpty, "an error without a message: \(failure.code)")
            check(list == [sentinel], "a failed block (\(failure)) changed the caller's list")
            // Only a header list over the limit leaves the decoder usable.
            guard failure.code == .headerListTooLarge else { return 0 }
            continue
        }
        let fields = Array(list.dropFirst())
        let listBytes = fields.reduce(0) { $0 + $1.size }
        check(listBytes <= listSize, "a list of \(listBytes) octets passed the limit \(listSize)")

        // Re-encoded and decoded again: the same fields, the tables in step.
        let encoded = encoder.encode(fields)
        let again: [HPACKField]
        do {
            again = try mirror.decode(encoded)
        } catch {
            fatalError("HPACKDecoder invariant broken: the encoder's block \(hex(encoded)) failed to decode: \(error)")
        }
        check(again.map(\.name) == fields.map(\.name), "re-encoding changed the names of block \(number)")
        check(again.map(\.value) == fields.map(\.value), "re-encoding changed the values of block \(number)")
        for (original, decoded) in zip(fields, again) where original.indexing == .neverIndexed {
            check(decoded.indexing == .neverIndexed, "re-encoding lost the never-indexed flag of \(original)")
        }
        check(mirror.dynamicTable.entries == encoder.dynamicTable.entries, "the encoder's and its decoder's tables differ")
        checkTable(encoder.dynamicTable, limit: tableSize, "the encoder's table after block \(number)")
    }
    return 0
}
