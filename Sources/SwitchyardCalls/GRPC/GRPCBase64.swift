/// Base64 (RFC 4648 section 4, the standard alphabet) for the values of `-bin` metadata
/// keys.
///
/// gRPC's PROTOCOL-HTTP2: implementations "MUST accept padded and un-padded values and
/// should emit un-padded values". So ``encode(_:)`` writes no `=`, and ``decode(_:)``
/// takes either form; it refuses anything else (a character outside the alphabet, `=`
/// anywhere but at the end or more of it than the length allows, a length that leaves
/// one lone character). Bits after the last byte are ignored, as most decoders do.
package enum GRPCBase64 {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    /// `bytes` in base64, without padding.
    package static func encode(_ bytes: some Collection<UInt8>) -> [UInt8] {
        var encoded: [UInt8] = []
        encoded.reserveCapacity((bytes.count * 4 + 2) / 3)
        var iterator = bytes.makeIterator()
        while let first = iterator.next() {
            let second = iterator.next()
            let third = second == nil ? nil : iterator.next()
            let group = UInt32(first) << 16 | UInt32(second ?? 0) << 8 | UInt32(third ?? 0)
            encoded.append(alphabet[Int(group >> 18 & 0x3F)])
            encoded.append(alphabet[Int(group >> 12 & 0x3F)])
            if second != nil { encoded.append(alphabet[Int(group >> 6 & 0x3F)]) }
            if third != nil { encoded.append(alphabet[Int(group & 0x3F)]) }
        }
        return encoded
    }

    /// The bytes `text` encodes, padded or not; nil if it is not base64.
    package static func decode(_ text: some Collection<UInt8>) -> [UInt8]? {
        var characters = Array(text)
        // Padding: at most two '=', only at the end, and only to a multiple of 4.
        var padding = 0
        while characters.last == 0x3D, padding < 2 {
            characters.removeLast()
            padding += 1
        }
        if padding > 0, (characters.count + padding) % 4 != 0 { return nil }
        if characters.count % 4 == 1 { return nil }
        var decoded: [UInt8] = []
        decoded.reserveCapacity(characters.count * 3 / 4)
        var group: UInt32 = 0
        var held = 0
        for character in characters {
            guard let value = sextet(character) else { return nil }
            group = group << 6 | UInt32(value)
            held += 1
            if held == 4 {
                decoded.append(UInt8(truncatingIfNeeded: group >> 16))
                decoded.append(UInt8(truncatingIfNeeded: group >> 8))
                decoded.append(UInt8(truncatingIfNeeded: group))
                group = 0
                held = 0
            }
        }
        switch held {
        case 2:
            decoded.append(UInt8(truncatingIfNeeded: group >> 4))
        case 3:
            decoded.append(UInt8(truncatingIfNeeded: group >> 10))
            decoded.append(UInt8(truncatingIfNeeded: group >> 2))
        default:
            break
        }
        return decoded
    }

    private static func sextet(_ character: UInt8) -> UInt8? {
        switch character {
        case 0x41...0x5A: character - 0x41
        case 0x61...0x7A: character - 0x61 + 26
        case 0x30...0x39: character - 0x30 + 52
        case 0x2B: 62
        case 0x2F: 63
        default: nil
        }
    }
}
