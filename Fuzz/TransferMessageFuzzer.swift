// libFuzzer target for `TransferMessage`, the transfer protocol's messages
// (Sources/SwitchyardTransfer/TransferMessage.swift): what a receiver or a sender decodes
// from its peer.
//
// Not a SwiftPM target: `scripts/fuzz` compiles this file with the message's source and
// the core's TransportError.swift into one instrumented binary,
// `swiftc -sanitize=fuzzer,address`. Any broken invariant below is a `fatalError`, which
// libFuzzer reports as a crash and saves as an artifact.
//
// Input layout:
//   byte 0: a parameter for the chunk builders: the `fill` result of
//           `chunk(offset:count:fill:)` is `byte 0 - 4` (so -4...251), its count the
//           message's length;
//   rest:   one message, as a call delivers it.
//
// Checked, for every input:
// - `init(decoding:)` never traps; it throws only `internal`/`protocol violation`, with a
//   message, and only for a message that really is malformed (empty, an unknown kind,
//   shorter than its kind's fixed fields, an offer whose id is cut short or not UTF-8);
// - a decoded message has bounded parts (SHA-256 32 bytes, an id of the length its field
//   says, a chunk's bytes exactly the rest of the message) and fields read from the
//   right bytes;
// - encoding: `decode(x.encoded) == x`, and `x.encoded` is the message's first bytes (a
//   chunk: the whole message; what follows a fixed-size message is not read);
// - `chunk(in:)` agrees with `init(decoding:)` (nil for other kinds, the same offset and
//   bytes for a chunk, a throw for a short one);
// - the three chunk builders (`.chunk(...).encoded`, `chunk(offset:bytes:)` and
//   `chunk(offset:count:fill:)`, whatever count `fill` returns) give the same bytes.

@inline(never)
private func check(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition { fatalError("TransferMessage invariant broken: \(message())") }
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

private func uint64(_ bytes: [UInt8], at index: Int) -> UInt64 {
    bytes[index..<(index + 8)].reduce(0) { $0 << 8 | UInt64($1) }
}

/// Whether the reference reading of the wire format (the table in TransferMessage's doc
/// comment) calls `message` malformed.
private func malformed(_ message: [UInt8]) -> Bool {
    guard let kind = message.first else { return true }
    switch kind {
    case 1:
        guard message.count >= 48 else { return true }
        let idLength = Int(message[46]) << 8 | Int(message[47])
        guard message.count >= 48 + idLength else { return true }
        return String(validating: message[48..<(48 + idLength)], as: UTF8.self) == nil
    case 2, 3, 4: return message.count < 9
    case 5: return false
    case 6: return message.count < 41
    default: return true
    }
}

private func checkDecoded(_ decoded: TransferMessage, from message: [UInt8]) {
    // Fields from the right bytes, parts bounded.
    switch decoded {
    case .offer(let version, let id, let size, let sha256, let window):
        check(message[0] == 1, "kind \(message[0]) decoded as an offer")
        check(version == message[1] && size == uint64(message, at: 2), "offer header fields")
        check(sha256.count == 32 && sha256[...] == message[10..<42], "offer SHA-256 \(hex(sha256))")
        check(window == message[42..<46].reduce(0) { $0 << 8 | UInt32($1) }, "offer window \(window)")
        check(id.utf8.count == Int(message[46]) << 8 | Int(message[47]), "id of \(id.utf8.count) bytes")
        check(id.utf8.elementsEqual(message[48..<(48 + id.utf8.count)]), "offer id bytes")
    case .resume(let offset):
        check(message[0] == 2 && offset == uint64(message, at: 1), "resume \(offset) from \(hex(message))")
    case .chunk(let offset, let bytes):
        check(message[0] == 3 && offset == uint64(message, at: 1), "chunk offset \(offset) from \(hex(message))")
        check(bytes.count == message.count - 9 && bytes[...] == message[9...], "chunk bytes")
    case .ack(let offset):
        check(message[0] == 4 && offset == uint64(message, at: 1), "ack \(offset) from \(hex(message))")
    case .end:
        check(message[0] == 5, "kind \(message[0]) decoded as end")
    case .done(let size, let sha256):
        check(message[0] == 6 && size == uint64(message, at: 1), "done size \(size)")
        check(sha256.count == 32 && sha256[...] == message[9..<41], "done SHA-256 \(hex(sha256))")
    }

    // Encoding: the message's own bytes, and they decode to the same message.
    let encoded = decoded.encoded
    check(encoded.count <= message.count && encoded[...] == message[..<encoded.count],
          "\(decoded) encodes as \(hex(encoded)), decoded from \(hex(message))")
    if case .chunk = decoded { check(encoded == message, "a chunk re-encodes shorter: \(encoded.count) of \(message.count) bytes") }
    do {
        let again = try TransferMessage(decoding: encoded)
        check(again == decoded, "round trip: \(decoded) -> \(hex(encoded)) -> \(again)")
    } catch {
        fatalError("the encoding of \(decoded) does not decode: \(hex(encoded)): \(error)")
    }
}

private func checkChunkReader(_ message: [UInt8], decoded: TransferMessage?) {
    let chunk: (offset: UInt64, bytes: ArraySlice<UInt8>)?
    do {
        chunk = try TransferMessage.chunk(in: message)
    } catch {
        check(error.code == .internal && error.reason == .protocolViolation, "chunk(in:) threw \(error)")
        check(message.first == 3 && decoded == nil, "chunk(in:) threw for \(hex(message)), which decodes as \(String(describing: decoded))")
        return
    }
    guard let chunk else {
        check(message.first != 3, "chunk(in:) returned nil for a chunk: \(hex(message))")
        return
    }
    guard case .chunk(let offset, let bytes) = decoded else {
        fatalError("chunk(in:) read a chunk where init(decoding:) gave \(String(describing: decoded))")
    }
    check(chunk.offset == offset && chunk.bytes.elementsEqual(bytes), "chunk(in:) and init(decoding:) disagree")
}

private func checkChunkBuilders(offset: UInt64, bytes: ArraySlice<UInt8>, filled: Int) {
    let reference = TransferMessage.chunk(offset: offset, bytes: Array(bytes)).encoded
    let sliced = TransferMessage.chunk(offset: offset, bytes: bytes)
    check(sliced == reference, "chunk(offset:bytes:) \(hex(sliced)) differs from .chunk.encoded \(hex(reference))")

    // `fill` writes every byte it is given, then claims `filled` (maybe more, maybe
    // negative): the builder keeps the claimed bytes, bounded by the count.
    let count = bytes.count
    var calls = 0
    let built = TransferMessage.chunk(offset: offset, count: count) { buffer in
        calls += 1
        check(buffer.count == count, "fill got \(buffer.count) bytes for a count of \(count)")
        buffer.copyBytes(from: bytes)
        return filled
    }
    check(calls == 1, "fill called \(calls) times")
    let kept = min(max(filled, 0), count)
    check(built.count == 9 + kept, "chunk(offset:count:fill:) kept \(built.count - 9) bytes, fill claimed \(filled) of \(count)")
    check(built[...] == reference[..<(9 + kept)], "chunk(offset:count:fill:) \(hex(built)) is not the start of \(hex(reference))")
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size >= 1 else { return 0 }
    let input = Array(UnsafeBufferPointer(start: data, count: size))
    let filled = Int(input[0]) - 4
    let message = Array(input[1...])

    var decoded: TransferMessage?
    do {
        decoded = try TransferMessage(decoding: message)
    } catch {
        check(error.code == .internal && error.reason == .protocolViolation, "init(decoding:) threw \(error)")
        check(!error.message.isEmpty, "an error without a message")
        check(malformed(message), "init(decoding: \(hex(message))) rejected a well-formed message: \(error)")
    }
    if let decoded {
        check(!malformed(message), "init(decoding: \(hex(message))) accepted a malformed message as \(decoded)")
        checkDecoded(decoded, from: message)
    }
    checkChunkReader(message, decoded: decoded)

    // The builders, on the message's bytes as a chunk's payload and offset.
    let offset = message.count >= 8 ? uint64(message, at: 0) : UInt64(message.count)
    checkChunkBuilders(offset: offset, bytes: message[...], filled: filled)
    return 0
}
