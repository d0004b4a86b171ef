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
//   byte 0: ignored (kept so the corpus's inputs stay valid);
//   rest:   one message, as a call delivers it.
//
// Checked, for every input:
// - `init(decoding:)` never traps; it throws only `internal`/`protocol violation`, with a
//   message, and only for a message that really is malformed (empty, an unknown kind,
//   shorter than its kind's fixed fields, a version 3 offer whose id is cut short or not
//   UTF-8), and `unimplemented`/`protocol violation` only for a version 3 offer of an
//   unknown leaf digest;
// - a decoded message has bounded parts (digests 32 bytes, an id of the length its field
//   says, a chunk's bytes exactly the rest of the message) and fields read from the
//   right bytes; an offer of another version has only its version;
// - encoding: `decode(x.encoded) == x`, and `x.encoded` is the message's first bytes (a
//   chunk: the whole message; what follows a fixed-size message is not read);
// - `chunk(in:)` agrees with `init(decoding:)` (nil for other kinds, the same offset,
//   digest and bytes for a chunk, a throw for a short one).
// The chunk builders (`chunk(offset:bytes:using:)`, `chunk(offset:count:using:fill:)`)
// digest their bytes and are tested in TransferMessageTests, not here.

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
        guard message.count >= 2 else { return true }
        guard message[1] == 3 else { return false }  // another version: refused by version
        guard message.count >= 17 else { return true }
        let idLength = Int(message[15]) << 8 | Int(message[16])
        guard message.count >= 17 + idLength else { return true }
        return String(validating: message[17..<(17 + idLength)], as: UTF8.self) == nil
    case 2, 3, 6: return message.count < 41
    case 4: return message.count < 9
    case 5: return message.count < 33
    default: return true
    }
}

/// Whether `message` is a version 3 offer, long enough for its fixed fields, of a leaf
/// digest this version does not know (refused as `unimplemented` before the id is read).
private func unknownLeafDigest(_ message: [UInt8]) -> Bool {
    message.count >= 17 && message[0] == 1 && message[1] == 3 && TransferLeafDigest(rawValue: message[2]) == nil
}

private func checkDecoded(_ decoded: TransferMessage, from message: [UInt8]) {
    // Fields from the right bytes, parts bounded.
    switch decoded {
    case .offer(let version, let id, let size, let window, let leafDigest):
        check(message[0] == 1 && version == message[1], "offer version \(version) from \(hex(message))")
        guard version == TransferMessage.version else {
            check(id.isEmpty && size == 0 && window == 0, "an offer of version \(version) decoded more than its version")
            return  // not re-encoded: only its version was read
        }
        check(leafDigest.rawValue == message[2], "offer leaf digest \(leafDigest) from \(hex(message))")
        check(size == uint64(message, at: 3), "offer size \(size)")
        check(window == message[11..<15].reduce(0) { $0 << 8 | UInt32($1) }, "offer window \(window)")
        check(id.utf8.count == Int(message[15]) << 8 | Int(message[16]), "id of \(id.utf8.count) bytes")
        check(id.utf8.elementsEqual(message[17..<(17 + id.utf8.count)]), "offer id bytes")
    case .resume(let offset, let sha256):
        check(message[0] == 2 && offset == uint64(message, at: 1), "resume \(offset) from \(hex(message))")
        check(sha256.count == 32 && sha256[...] == message[9..<41], "resume digest \(hex(sha256))")
    case .chunk(let offset, let sha256, let bytes):
        check(message[0] == 3 && offset == uint64(message, at: 1), "chunk offset \(offset) from \(hex(message))")
        check(sha256.count == 32 && sha256[...] == message[9..<41], "chunk digest \(hex(sha256))")
        check(bytes.count == message.count - 41 && bytes[...] == message[41...], "chunk bytes")
    case .ack(let offset):
        check(message[0] == 4 && offset == uint64(message, at: 1), "ack \(offset) from \(hex(message))")
    case .end(let sha256):
        check(message[0] == 5 && sha256.count == 32 && sha256[...] == message[1..<33], "end digest \(hex(sha256))")
    case .done(let size, let sha256):
        check(message[0] == 6 && size == uint64(message, at: 1), "done size \(size)")
        check(sha256.count == 32 && sha256[...] == message[9..<41], "done digest \(hex(sha256))")
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
    let chunk: (offset: UInt64, sha256: ArraySlice<UInt8>, bytes: ArraySlice<UInt8>)?
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
    guard case .chunk(let offset, let sha256, let bytes) = decoded else {
        fatalError("chunk(in:) read a chunk where init(decoding:) gave \(String(describing: decoded))")
    }
    check(chunk.offset == offset && chunk.sha256.elementsEqual(sha256) && chunk.bytes.elementsEqual(bytes),
          "chunk(in:) and init(decoding:) disagree")
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size >= 1 else { return 0 }
    let message = Array(UnsafeBufferPointer(start: data + 1, count: size - 1))
    var decoded: TransferMessage?
    do {
        decoded = try TransferMessage(decoding: message)
    } catch {
        check(!error.message.isEmpty, "an error without a message")
        if unknownLeafDigest(message) {
            check(error.code == .unimplemented && error.reason == .protocolViolation, "an unknown leaf digest threw \(error)")
        } else {
            check(error.code == .internal && error.reason == .protocolViolation, "init(decoding:) threw \(error)")
            check(malformed(message), "init(decoding: \(hex(message))) rejected a well-formed message: \(error)")
        }
    }
    if let decoded {
        check(!unknownLeafDigest(message), "init(decoding: \(hex(message))) accepted an unknown leaf digest as \(decoded)")
        check(!malformed(message), "init(decoding: \(hex(message))) accepted a malformed message as \(decoded)")
        checkDecoded(decoded, from: message)
    }
    checkChunkReader(message, decoded: decoded)
    return 0
}
