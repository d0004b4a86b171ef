/// Integers with an N-bit prefix (RFC 7541 section 5.1): the value in the low N bits of
/// the first octet when it fits below 2^N - 1, else 2^N - 1 there and the rest in 7-bit
/// groups, least significant first, the high bit set on all but the last.
package enum HPACKInteger {
    /// The largest integer the decoder accepts: indexes, string lengths and table sizes
    /// never need more (SETTINGS values are 32 bits).
    package static let maximum = Int(UInt32.max)

    /// Appends `value` with a `prefixBits`-bit prefix; `flags` holds the first octet's bits
    /// above the prefix (the representation's pattern).
    package static func encode(_ value: Int, prefixBits: Int, flags: UInt8, into output: inout [UInt8]) {
        precondition(value >= 0 && (1...8).contains(prefixBits), "HPACK integer \(value) with a \(prefixBits)-bit prefix")
        let limit = (1 << prefixBits) - 1
        if value < limit {
            output.append(flags | UInt8(value))
            return
        }
        output.append(flags | UInt8(limit))
        var rest = value - limit
        while rest >= 128 {
            output.append(UInt8(rest & 0x7F) | 0x80)
            rest >>= 7
        }
        output.append(UInt8(rest))
    }

    /// Reads an integer with a `prefixBits`-bit prefix at `index` (the bits above the
    /// prefix are ignored) and moves `index` past it.
    ///
    /// - Throws: ``HPACKError/Code/truncated`` if the input ends inside the integer;
    ///   ``HPACKError/Code/integerOverflow`` if it exceeds ``maximum`` or uses more
    ///   continuation octets than ``maximum`` needs (five).
    package static func decode(
        _ input: UnsafeRawBufferPointer, at index: inout Int, prefixBits: Int
    ) throws(HPACKError) -> Int {
        let start = index
        guard index < input.count else {
            throw HPACKError(code: .truncated, message: "the block ends where an integer should begin (offset \(index))")
        }
        let limit = (1 << prefixBits) - 1
        var value = Int(input[index]) & limit
        index += 1
        if value < limit { return value }
        var shift = 0
        while true {
            guard index < input.count else {
                throw HPACKError(
                    code: .truncated,
                    message: "the block ends inside the integer at offset \(start) after \(index - start) octets")
            }
            let octet = input[index]
            index += 1
            value += Int(octet & 0x7F) << shift
            guard value <= maximum else {
                throw HPACKError(
                    code: .integerOverflow, message: "the integer at offset \(start) exceeds \(maximum) (at least \(value))")
            }
            if octet & 0x80 == 0 { return value }
            shift += 7
            guard shift <= 28 else {
                throw HPACKError(
                    code: .integerOverflow,
                    message: "the integer at offset \(start) runs past 6 octets; no value up to \(maximum) needs more")
            }
        }
    }
}
