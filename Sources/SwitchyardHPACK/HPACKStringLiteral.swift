/// String literals (RFC 7541 section 5.2): the H bit (Huffman-coded or not), the length in
/// octets with a 7-bit prefix, then the octets.
package enum HPACKStringLiteral {
    /// Appends `bytes` as a string literal: Huffman-coded when `huffman` is true and the
    /// code is not longer than the octets themselves, else as they are.
    package static func encode(_ bytes: [UInt8], huffman: Bool, into output: inout [UInt8]) {
        if huffman {
            let coded = HPACKHuffman.encodedCount(of: bytes)
            if coded <= bytes.count {
                HPACKInteger.encode(coded, prefixBits: 7, flags: 0x80, into: &output)
                HPACKHuffman.encode(bytes, into: &output)
                return
            }
        }
        HPACKInteger.encode(bytes.count, prefixBits: 7, flags: 0, into: &output)
        output.append(contentsOf: bytes)
    }

    /// Reads a string literal at `index`, decoding its Huffman code if it has one, and moves
    /// `index` past it.
    ///
    /// - Throws: ``HPACKError/Code/truncated`` if the input ends inside it, the integer's
    ///   errors for its length, and the Huffman decoder's for its code.
    package static func decode(_ input: UnsafeRawBufferPointer, at index: inout Int) throws(HPACKError) -> [UInt8] {
        let start = index
        guard index < input.count else {
            throw HPACKError(code: .truncated, message: "the block ends where a string should begin (offset \(index))")
        }
        let huffman = input[index] & 0x80 != 0
        let length = try HPACKInteger.decode(input, at: &index, prefixBits: 7)
        guard length <= input.count - index else {
            throw HPACKError(
                code: .truncated,
                message: "the string at offset \(start) is \(length) octets long but \(input.count - index) are left")
        }
        let octets = UnsafeRawBufferPointer(rebasing: input[index..<(index + length)])
        index += length
        if !huffman { return Array(octets) }
        var decoded: [UInt8] = []
        // The shortest code is 5 bits: at most 8 symbols per 5 octets.
        decoded.reserveCapacity(length * 8 / 5)
        try HPACKHuffman.decode(octets, into: &decoded)
        return decoded
    }
}
