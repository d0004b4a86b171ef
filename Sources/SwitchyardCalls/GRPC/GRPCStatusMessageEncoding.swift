/// The percent-encoding of a `grpc-message` value (gRPC's PROTOCOL-HTTP2
/// "Percent-Encoded"): the message's UTF-8 bytes, with every byte outside space to `~`
/// (0x20 to 0x7E), and `%` itself, written as `%` and two upper-case hex digits.
///
/// Decoding is lenient, as the spec requires ("implementations MUST NOT error or throw
/// away the message"): a `%` not followed by two hex digits (either case) stays as it
/// is, and bytes that do not form UTF-8 after decoding become U+FFFD.
package enum GRPCStatusMessageEncoding {
    /// `message` percent-encoded.
    package static func encode(_ message: String) -> [UInt8] {
        var encoded: [UInt8] = []
        encoded.reserveCapacity(message.utf8.count)
        for byte in message.utf8 {
            if byte >= 0x20, byte <= 0x7E, byte != 0x25 {
                encoded.append(byte)
            } else {
                encoded.append(0x25)
                encoded.append(hexDigit(byte >> 4))
                encoded.append(hexDigit(byte & 0x0F))
            }
        }
        return encoded
    }

    /// The message `value` percent-encodes (see the type's rules for broken escapes).
    package static func decode(_ value: some Collection<UInt8>) -> String {
        let bytes = Array(value)
        guard bytes.contains(0x25) else { return String(decoding: bytes, as: UTF8.self) }
        var decoded: [UInt8] = []
        decoded.reserveCapacity(bytes.count)
        var index = 0
        while index < bytes.count {
            if bytes[index] == 0x25, index + 2 < bytes.count, let high = hexValue(bytes[index + 1]),
                let low = hexValue(bytes[index + 2])
            {
                decoded.append(high << 4 | low)
                index += 3
            } else {
                decoded.append(bytes[index])
                index += 1
            }
        }
        return String(decoding: decoded, as: UTF8.self)
    }

    private static func hexDigit(_ nibble: UInt8) -> UInt8 {
        nibble < 10 ? 0x30 + nibble : 0x41 + nibble - 10
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case 0x30...0x39: byte - 0x30
        case 0x41...0x46: byte - 0x41 + 10
        case 0x61...0x66: byte - 0x61 + 10
        default: nil
        }
    }
}
