/// The payloads of the metadata frames (``Frame/Kind/headers`` and ``Frame/Kind/trailers``;
/// the frame layout is in ``Frame``'s documentation).
///
/// A headers payload is the method name, then the pairs; a trailers payload is the pairs
/// alone:
///
/// ```
/// headers:  method length (2 bytes, big-endian) | method (UTF-8) | pair*
/// trailers: pair*
/// pair:     key length (1 byte, 1...255) | key (ASCII) | value length (4 bytes, big-endian) | value
/// ```
///
/// The pairs run to the end of the payload. A value is UTF-8 text, or bytes when its key
/// ends in `-bin`. Decoding holds what arrives to ``CallMetadata``'s rules; a payload that
/// breaks them (cut short, a bad key, a string that is not UTF-8 or holds a control
/// character, a method name that does) is `internal`, reason `protocol violation`, with
/// a message that says which frame and what is wrong.
extension CallMetadata {
    /// A whole headers frame (prefix included) for a call to `method` with `metadata`:
    /// made once per call, written with one write.
    static func headersFrame(method: String, metadata: CallMetadata) -> [UInt8] {
        var payload: [UInt8] = []
        payload.reserveCapacity(2 + method.utf8.count + metadata.encodedSize)
        let length = method.utf8.count
        // Programmer misuse only: the method was checked (``problem(method:)``) first.
        precondition(length <= Int(UInt16.max), "a method name is at most 65535 bytes (a programming error: it was not checked)")
        payload.append(UInt8(truncatingIfNeeded: length >> 8))
        payload.append(UInt8(truncatingIfNeeded: length))
        payload.append(contentsOf: method.utf8)
        metadata.encode(into: &payload)
        return Frame.encode(.headers, payload: payload)
    }

    /// A whole trailers frame (prefix included) for `metadata`.
    static func trailersFrame(_ metadata: CallMetadata) -> [UInt8] {
        var payload: [UInt8] = []
        payload.reserveCapacity(metadata.encodedSize)
        metadata.encode(into: &payload)
        return Frame.encode(.trailers, payload: payload)
    }

    /// The bytes the pairs take on the wire.
    var encodedSize: Int {
        entries.reduce(0) { size, entry in
            let value = switch entry.value {
            case .string(let string): string.utf8.count
            case .binary(let bytes): bytes.count
            }
            return size + 1 + entry.key.utf8.count + 4 + value
        }
    }

    /// Appends the pairs to `bytes`.
    func encode(into bytes: inout [UInt8]) {
        for entry in self {
            bytes.append(UInt8(entry.key.utf8.count))
            bytes.append(contentsOf: entry.key.utf8)
            let count: Int
            switch entry.value {
            case .string(let string): count = string.utf8.count
            case .binary(let value): count = value.count
            }
            // Programmer misuse only: a value over 4 GiB is over any peer's limit.
            precondition(count <= Int(UInt32.max), "a metadata value is at most 4 GiB; this one has \(count) bytes (a programming error)")
            bytes.append(UInt8(truncatingIfNeeded: count >> 24))
            bytes.append(UInt8(truncatingIfNeeded: count >> 16))
            bytes.append(UInt8(truncatingIfNeeded: count >> 8))
            bytes.append(UInt8(truncatingIfNeeded: count))
            switch entry.value {
            case .string(let string): bytes.append(contentsOf: string.utf8)
            case .binary(let value): bytes.append(contentsOf: value)
            }
        }
    }

    /// Decodes a headers payload.
    /// - Throws: `internal`, reason `protocol violation`, for a malformed payload.
    static func decodeHeaders(_ payload: [UInt8]) throws(TransportError) -> (method: String, metadata: CallMetadata) {
        guard payload.count >= 2 else {
            throw malformed("headers", "\(payload.count) byte\(payload.count == 1 ? "" : "s"); a headers frame has at least 2")
        }
        let length = Int(payload[0]) << 8 | Int(payload[1])
        guard payload.count >= 2 + length else {
            throw malformed("headers", "the method name's length \(length) runs past the frame's \(payload.count) bytes")
        }
        guard let method = String(validating: payload[2..<(2 + length)], as: UTF8.self) else {
            throw malformed("headers", "the method name is not UTF-8")
        }
        if let problem = problem(method: method) { throw malformed("headers", problem) }
        let metadata = try decodePairs(payload[(2 + length)...], frame: "headers")
        return (method, metadata)
    }

    /// Decodes a trailers payload.
    /// - Throws: `internal`, reason `protocol violation`, for a malformed payload.
    static func decodeTrailers(_ payload: [UInt8]) throws(TransportError) -> CallMetadata {
        try decodePairs(payload[...], frame: "trailers")
    }

    private static func decodePairs(_ bytes: ArraySlice<UInt8>, frame: String) throws(TransportError) -> CallMetadata {
        var metadata = CallMetadata()
        var index = bytes.startIndex
        while index < bytes.endIndex {
            let pair = metadata.entries.count
            let keyLength = Int(bytes[index])
            index += 1
            guard keyLength > 0 else { throw malformed(frame, "pair \(pair) has an empty key") }
            guard bytes.endIndex - index >= keyLength + 4 else {
                throw malformed(frame, "pair \(pair) runs past the end of the frame (its key is \(keyLength) bytes)")
            }
            // ASCII was checked byte by byte below, so this decoding changes nothing.
            let keyBytes = bytes[index..<(index + keyLength)]
            if let bad = keyBytes.first(where: { $0 >= 0x80 }) {
                throw malformed(frame, "the key of pair \(pair) holds the byte 0x\(String(bad, radix: 16)); keys are ASCII")
            }
            let key = String(decoding: keyBytes, as: UTF8.self)
            if let problem = problem(key: key) { throw malformed(frame, "invalid key \(quoted(key)): \(problem)") }
            index += keyLength
            var valueLength = 0
            for offset in 0..<4 { valueLength = valueLength << 8 | Int(bytes[index + offset]) }
            index += 4
            guard bytes.endIndex - index >= valueLength else {
                throw malformed(frame, "the value of \(quoted(key)) announces \(valueLength) bytes; \(bytes.endIndex - index) are left in the frame")
            }
            let valueBytes = bytes[index..<(index + valueLength)]
            index += valueLength
            let value: Value
            if isBinary(key: key) {
                value = .binary(Array(valueBytes))
            } else {
                guard let string = String(validating: valueBytes, as: UTF8.self) else {
                    throw malformed(frame, "the value of \(quoted(key)) is not UTF-8")
                }
                value = .string(string)
            }
            if let problem = problem(value, forKey: key) { throw malformed(frame, problem) }
            metadata.entries.append(Entry(key: key, value: value))
        }
        return metadata
    }

    private static func malformed(_ frame: String, _ why: String) -> TransportError {
        TransportError(code: .internal, reason: .protocolViolation, message: "malformed \(frame) frame: \(why)")
    }
}
