/// The Huffman code of RFC 7541 (Appendix B) for string literals.
///
/// The encoder appends each octet's code and pads the last octet with the high bits of
/// EOS (ones). The decoder uses the code being canonical: codes of one length are
/// consecutive, so the next 30 bits, left-aligned, fall below the end of exactly one
/// length's range, and the offset in that range picks the symbol. Per RFC 7541 section
/// 5.2 it rejects padding longer than 7 bits, padding that is not all ones (not a prefix
/// of EOS) and an encoded EOS.
package enum HPACKHuffman {
    /// The length of `bytes` Huffman-coded, in octets.
    package static func encodedCount(of bytes: [UInt8]) -> Int {
        let lengths = Self.lengths
        var bits = 0
        for byte in bytes { bits += Int(lengths[Int(byte)]) }
        return (bits + 7) / 8
    }

    /// Appends `bytes` Huffman-coded, padded to an octet with ones.
    package static func encode(_ bytes: [UInt8], into output: inout [UInt8]) {
        let codes = Self.codes
        let lengths = Self.lengths
        var buffer: UInt64 = 0
        var bits = 0
        for byte in bytes {
            let length = Int(lengths[Int(byte)])
            buffer = buffer << UInt64(length) | UInt64(codes[Int(byte)])
            bits += length
            while bits >= 8 {
                bits -= 8
                output.append(UInt8(truncatingIfNeeded: buffer >> UInt64(bits)))
            }
            buffer &= (1 << UInt64(bits)) - 1
        }
        if bits > 0 {
            output.append(UInt8(truncatingIfNeeded: buffer << UInt64(8 - bits)) | (0xFF >> UInt8(bits)))
        }
    }

    /// Appends the octets that `input`, Huffman-coded, stands for.
    ///
    /// - Throws: ``HPACKError/Code/huffmanPaddingTooLong``,
    ///   ``HPACKError/Code/huffmanPaddingNotEOS`` or ``HPACKError/Code/huffmanEOS``.
    package static func decode(_ input: UnsafeRawBufferPointer, into output: inout [UInt8]) throws(HPACKError) {
        let table = decoding
        var buffer: UInt64 = 0
        var bits = 0
        var index = 0
        while true {
            while bits <= 56 && index < input.count {
                buffer = buffer << 8 | UInt64(input[index])
                index += 1
                bits += 8
            }
            if bits == 0 { return }
            // The next 30 bits (the longest code), left-aligned; past the end, ones.
            let peek: UInt32
            if bits >= 30 {
                peek = UInt32(truncatingIfNeeded: buffer >> UInt64(bits - 30)) & 0x3FFF_FFFF
            } else {
                let pad = UInt64(30 - bits)
                peek = UInt32(truncatingIfNeeded: buffer << pad | ((1 << pad) - 1)) & 0x3FFF_FFFF
            }
            var length = 5
            while peek >= table.limits[length] { length += 1 }
            if length > bits {
                // No code ends within the input: what is left is padding.
                let rest = buffer & ((1 << UInt64(bits)) - 1)
                guard rest == (1 << UInt64(bits)) - 1 else {
                    throw HPACKError(
                        code: .huffmanPaddingNotEOS,
                        message: "the Huffman-coded string ends with \(bits) bits 0b\(binary(rest, bits)), not a prefix of EOS (ones)")
                }
                guard bits <= 7 else {
                    throw HPACKError(
                        code: .huffmanPaddingTooLong,
                        message: "the Huffman-coded string ends with \(bits) bits of padding; at most 7 are allowed")
                }
                return
            }
            let offset = Int(peek >> UInt32(30 - length)) - Int(table.firstCodes[length])
            let symbol = table.symbols[Int(table.offsets[length]) + offset]
            guard symbol != 256 else {
                throw HPACKError(code: .huffmanEOS, message: "the Huffman-coded string contains EOS (input octet \(index - (bits + 7) / 8))")
            }
            output.append(UInt8(symbol))
            bits -= length
            buffer &= (1 << UInt64(bits)) - 1
        }
    }

    private static func binary(_ value: UInt64, _ bits: Int) -> String {
        let text = String(value, radix: 2)
        return String(repeating: "0", count: max(0, bits - text.count)) + text
    }

    /// The canonical code's ranges, by length (1 to 30).
    private struct Decoding {
        /// Per length, the end of its codes left-aligned to 30 bits: the codes shorter than
        /// or as long as the length are exactly the 30-bit prefixes below it.
        var limits: [UInt32]
        /// Per length, its first code (right-aligned).
        var firstCodes: [UInt32]
        /// Per length, where its symbols begin in `symbols`.
        var offsets: [UInt16]
        /// The symbols ordered by code.
        var symbols: [UInt16]

        init() {
            let lengths = HPACKHuffman.lengths
            symbols = (0...256).map(UInt16.init).sorted { (lengths[Int($0)], $0) < (lengths[Int($1)], $1) }
            limits = Array(repeating: 0, count: 31)
            firstCodes = Array(repeating: 0, count: 31)
            offsets = Array(repeating: 0, count: 31)
            var code: UInt32 = 0
            var position = 0
            for length in 1...30 {
                firstCodes[length] = code
                offsets[length] = UInt16(position)
                var count: UInt32 = 0
                while position < symbols.count && Int(lengths[Int(symbols[position])]) == length {
                    count += 1
                    position += 1
                }
                code += count
                limits[length] = code << UInt32(30 - length)
                code <<= 1
            }
        }
    }

    private static let decoding = Decoding()
}
