// libFuzzer target for `FrameDecoder` (and the status payload, `CallStatus(decoding:)`,
// and the metadata payloads, `CallMetadata.decodeHeaders`/`decodeTrailers`).
//
// Not a SwiftPM target: `scripts/fuzz` compiles this file together with the core's own
// sources that the decoder needs (Frame.swift, CallStatus.swift, TransportError.swift,
// Metadata.swift, CallMetadata+Frame.swift)
// into one instrumented binary, `swiftc -sanitize=fuzzer,address`. Any broken invariant
// below is a `fatalError`, which libFuzzer reports as a crash and saves as an artifact.
//
// Input layout:
//   byte 0: the decoder's maximumMessageSize. Low 3 bits choose a base from
//           `maximumSizes`, the high 5 bits (0...31) are added to it (except for the
//           default, which is used as is). So 0...4127, or 4 MiB. The maximum metadata
//           size is half of it when bit 3 is set, else twice it plus 3, so headers and
//           trailers frames meet a bound of their own, below and above the messages'.
//   byte 1: the split pattern. Low 3 bits choose how the stream is cut into appends
//           (see `ChunkPattern`), the high 5 bits seed the generator with byte 2.
//   byte 2: more seed.
//   rest:   the byte stream, fed to the decoder in chunks.
//
// After every append the decoder is drained (`next()` until nil or an error), and each
// step is checked against a reference model that reads the same stream independently:
// which frame comes next, when it is complete, which error a bad prefix gives and when.
// A headers or trailers payload that decodes re-encodes into the very same frame; one
// that does not is rejected as a protocol violation.

private let maximumSizes = [0, 1, 5, 64, 255, 1024, 4096, Frame.defaultMaximumMessageSize]

/// Slack on top of `headerSize + maximumMessageSize + chunk` for the memory bound.
private let slack = 0

@inline(never)
private func check(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition { fatalError("FrameDecoder invariant broken: \(message())") }
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

/// A small deterministic generator (xorshift32), seeded from the input.
private struct Generator {
    var state: UInt32
    init(seed: UInt32) { state = seed == 0 ? 0x9E37_79B9 : seed }
    mutating func next() -> UInt32 {
        state ^= state << 13
        state ^= state >> 17
        state ^= state << 5
        return state
    }
    mutating func upTo(_ bound: Int) -> Int { Int(next() % UInt32(bound + 1)) }  // 0...bound
}

/// How the stream is cut into `append` calls.
private struct ChunkPattern {
    let mode: UInt8
    var generator: Generator
    var toggle = false

    mutating func nextSize(remaining: Int) -> Int {
        let size: Int
        switch mode {
        case 0: size = remaining                                 // all at once
        case 1: size = 1                                         // byte by byte
        case 2: size = generator.upTo(8)                          // tiny, with empty appends
        case 3: size = generator.upTo(64)
        case 4: size = generator.upTo(1024)
        case 5: size = 1 + Int(generator.state % 7)               // fixed size 1...7 (state never changes)
        case 6:                                                   // alternate tiny and huge
            toggle.toggle()
            size = toggle ? generator.upTo(3) : 256 + generator.upTo(4096)
        default: size = Frame.headerSize + generator.upTo(2) - 1  // around the prefix size
        }
        return min(size, remaining)
    }
}

/// What the decoder should do next, read from the stream independently of it.
private enum Expected: Equatable {
    case none                        // nil: not enough bytes yet
    case frame(UInt8, Int)           // flags, payload length
    case unknownFlags
    case tooLarge
    case metadataTooLarge
}

private func expected(
    stream: UnsafeBufferPointer<UInt8>, consumed: Int, appended: Int, maximum: Int, metadataMaximum: Int
) -> Expected {
    let available = appended - consumed
    if available < Frame.headerSize { return .none }
    let flags = stream[consumed]
    if flags > 3 { return .unknownFlags }
    var length = 0
    for i in 1...4 { length = length << 8 | Int(stream[consumed + i]) }
    if flags >= 2 {
        if length > metadataMaximum { return .metadataTooLarge }
    } else if length > maximum {
        return .tooLarge
    }
    return available >= Frame.headerSize + length ? .frame(flags, length) : .none
}

private func checkStatusPayload(_ payload: [UInt8]) {
    let status: CallStatus
    do {
        status = try CallStatus(decoding: payload)
    } catch {
        check(error.code == .internal && error.reason == .protocolViolation,
              "CallStatus(decoding: \(hex(payload))) threw \(error), not internal/protocol violation")
        // A payload it rejects must really be malformed.
        let malformed = payload.count < 2
            || (payload[0] != 0 && TransportError.Code(wireValue: payload[0]) == nil
                && GRPCStatusCode(rawValue: Int(payload[0]))?.transportCode == nil)
            || (payload[0] != 0 && payload.count < 2 + Int(payload[1]))
            || (payload[0] != 0 && String(validating: payload[2..<(2 + Int(payload[1]))], as: UTF8.self) == nil)
        check(malformed, "CallStatus(decoding: \(hex(payload))) rejected a well-formed status: \(error)")
        return
    }
    check(payload.count >= 2, "CallStatus(decoding:) accepted \(payload.count) bytes")
    if payload[0] == 0 {
        check(status.isOK, "code 0 did not decode as OK: \(status)")
    } else {
        guard let error = status.error else { fatalError("code \(payload[0]) decoded as OK") }
        // A gRPC code without a Switchyard code of its own decodes as the nearest, the
        // exact one kept as the native error: either way it encodes as it came.
        check(GRPCStatusCode(error).rawValue == Int(payload[0]), "code \(payload[0]) decoded as \(error.code) (native \(String(describing: error.native)))")
    }
    let encoded = status.encoded
    let again: CallStatus
    do {
        again = try CallStatus(decoding: encoded)
    } catch {
        fatalError("the encoding of a decoded status does not decode: \(status) -> \(hex(encoded)): \(error)")
    }
    check(again == status,
          "status round trip differs: payload \(hex(payload, limit: 300)) -> \(status) -> \(hex(encoded, limit: 300)) -> \(again)")
}

/// A headers or trailers payload either decodes, and re-encodes into the same frame, or
/// is rejected as a protocol violation.
private func checkMetadataPayload(_ kind: Frame.Kind, _ payload: [UInt8]) {
    let frame = Frame.encode(kind, payload: payload)
    do {
        if kind == .headers {
            let (method, metadata) = try CallMetadata.decodeHeaders(payload)
            let again = CallMetadata.headersFrame(method: method, metadata: metadata)
            check(again == frame, "headers \(hex(payload)) decode as \(method) \(metadata), which re-encodes as \(hex(again))")
        } else {
            let metadata = try CallMetadata.decodeTrailers(payload)
            let again = CallMetadata.trailersFrame(metadata)
            check(again == frame, "trailers \(hex(payload)) decode as \(metadata), which re-encodes as \(hex(again))")
            // What decoded also passes the rules for adding it.
            var added = CallMetadata()
            for entry in metadata {
                do { try added.add(entry.value, forKey: entry.key) } catch { fatalError("decoded pair \(entry) is refused by add: \(error)") }
            }
            check(added == metadata, "decoded trailers differ once added again")
        }
    } catch {
        check(error.code == .internal && error.reason == .protocolViolation,
              "\(kind) payload \(hex(payload)) threw \(error), not internal/protocol violation")
        check(error.message.hasPrefix("malformed \(kind) frame: "), "\(kind) payload error does not name its frame: \(error)")
    }
}

private func checkSameFrames(_ frames: [(kind: Frame.Kind, payload: [UInt8])], maximum: Int, metadataMaximum: Int) {
    // Decoding the concatenation of the re-encoded frames gives the same frames.
    var wire: [UInt8] = []
    for frame in frames { wire += Frame.encode(frame.kind, payload: frame.payload) }
    var decoder = FrameDecoder(maximumMessageSize: maximum, maximumMetadataSize: metadataMaximum)
    decoder.append(wire)
    for (i, frame) in frames.enumerated() {
        check(decoder.hasFrame, "re-decode: hasFrame false before frame \(i)")
        let again: (kind: Frame.Kind, payload: [UInt8])?
        do { again = try decoder.next() } catch { fatalError("re-decode: frame \(i) threw \(error)") }
        guard let again else { fatalError("re-decode: frame \(i) missing") }
        check(again.kind == frame.kind && again.payload == frame.payload, "re-decode: frame \(i) differs")
    }
    check(!decoder.hasFrame, "re-decode: hasFrame true after the last frame")
    do {
        check(try decoder.next() == nil, "re-decode: a frame after the last one")
        try decoder.finish()
    } catch {
        fatalError("re-decode: \(error) after the last frame")
    }
    check(decoder.bufferedBytes == 0, "re-decode: \(decoder.bufferedBytes) bytes left")
}

private func run(_ input: UnsafeBufferPointer<UInt8>) {
    guard input.count >= 3 else { return }
    let sizeByte = input[0]
    let base = maximumSizes[Int(sizeByte & 7)]
    let maximum = base == Frame.defaultMaximumMessageSize ? base : base + Int(sizeByte >> 3)
    let metadataMaximum = sizeByte & 8 != 0 ? maximum / 2 : maximum * 2 + 3
    var pattern = ChunkPattern(
        mode: input[1] & 7,
        generator: Generator(seed: UInt32(input[1] >> 3) << 8 | UInt32(input[2]) | 0x1_0000))
    let stream = UnsafeBufferPointer(rebasing: input[3...])

    let largest = max(maximum, metadataMaximum)
    var decoder = FrameDecoder(maximumMessageSize: maximum, maximumMetadataSize: metadataMaximum)
    check(decoder.maximumMessageSize == maximum && decoder.maximumMetadataSize == metadataMaximum, "maximum sizes")
    check(decoder.bufferedBytes == 0 && !decoder.hasFrame, "a fresh decoder is not empty")
    do { try decoder.finish() } catch { fatalError("finish() on a fresh decoder threw \(error)") }

    var appended = 0       // bytes of the stream given to the decoder
    var consumed = 0       // bytes of the stream returned as frames
    var failure: TransportError?
    var frames: [(kind: Frame.Kind, payload: [UInt8])] = []
    var appendCount = 0

    while appended < stream.count || appendCount == 0 {
        let size = pattern.nextSize(remaining: stream.count - appended)
        let chunk = UnsafeBufferPointer(rebasing: stream[appended..<(appended + size)])
        // Both spellings of append.
        if appendCount & 1 == 0 {
            decoder.append(UnsafeRawBufferPointer(chunk))
        } else {
            decoder.append(Array(chunk))
        }
        appendCount += 1
        appended += size

        if let failure {
            // Sticky: every later next() and finish() throws the same error, whatever arrives.
            check(decoder.hasFrame, "hasFrame is false after an error, but next() throws")
            for _ in 0..<2 {
                do {
                    let frame = try decoder.next()
                    fatalError("next() after \(failure) returned \(String(describing: frame))")
                } catch {
                    check(error == failure, "next() after \(failure) threw a different error: \(error)")
                }
            }
            do {
                try decoder.finish()
                fatalError("finish() after \(failure) did not throw")
            } catch {
                check(error == failure, "finish() after \(failure) threw a different error: \(error)")
            }
            check(decoder.bufferedBytes <= Frame.headerSize + largest + size + slack,
                  "after \(failure), \(decoder.bufferedBytes) bytes buffered (maximum \(maximum), chunk \(size)): appends after an error keep growing the buffer")
            continue
        }

        // Bounded memory: at most one partial frame plus what this append brought.
        check(decoder.bufferedBytes == appended - consumed,
              "bufferedBytes \(decoder.bufferedBytes), expected \(appended - consumed)")
        check(decoder.bufferedBytes <= Frame.headerSize + largest + size + slack,
              "\(decoder.bufferedBytes) bytes buffered (maximum \(maximum), metadata \(metadataMaximum), chunk \(size))")

        // Drain.
        while true {
            let want = expected(
                stream: stream, consumed: consumed, appended: appended, maximum: maximum, metadataMaximum: metadataMaximum)
            let hasFrame = decoder.hasFrame
            check(hasFrame == (want != .none),
                  "hasFrame \(hasFrame) but the next step is \(want) (consumed \(consumed), appended \(appended), maximum \(maximum))")
            let got: (kind: Frame.Kind, payload: [UInt8])?
            do {
                got = try decoder.next()
            } catch {
                switch want {
                case .unknownFlags:
                    check(error.code == .internal && error.reason == .unknownFrameFlags,
                          "flags 0x\(String(stream[consumed], radix: 16)) gave \(error)")
                case .tooLarge:
                    check(error.code == .resourceExhausted && error.reason == .frameTooLarge,
                          "an oversized prefix \(hex(stream[consumed..<(consumed + 5)])) gave \(error)")
                case .metadataTooLarge:
                    check(error.code == .resourceExhausted && error.reason == .metadataTooLarge,
                          "an oversized metadata prefix \(hex(stream[consumed..<(consumed + 5)])) gave \(error)")
                default:
                    fatalError("next() threw \(error) where \(want) was expected (consumed \(consumed), appended \(appended))")
                }
                failure = error
                check(decoder.bufferedBytes <= Frame.headerSize + largest,
                      "\(decoder.bufferedBytes) bytes buffered after \(error)")
                break
            }
            guard let got else {
                check(want == .none, "next() returned nil where \(want) was expected")
                // What is left is less than one frame.
                check(decoder.bufferedBytes < Frame.headerSize + largest,
                      "\(decoder.bufferedBytes) bytes buffered with no frame (maximum \(maximum), metadata \(metadataMaximum))")
                break
            }
            guard case .frame(let flags, let length) = want else {
                fatalError("next() returned a frame where \(want) was expected (consumed \(consumed), appended \(appended))")
            }
            check(got.kind.rawValue == flags && got.payload.count == length,
                  "frame \(got.kind)/\(got.payload.count) where flags \(flags)/\(length) were expected")
            // The frame re-encodes into exactly the bytes it was decoded from.
            let encoded = Frame.encode(got.kind, payload: got.payload)
            check(encoded.elementsEqual(stream[consumed..<(consumed + encoded.count)]),
                  "frame at \(consumed) re-encodes as \(hex(encoded)), the stream has \(hex(stream[consumed..<(consumed + encoded.count)]))")
            consumed += encoded.count
            check(decoder.bufferedBytes == appended - consumed,
                  "bufferedBytes \(decoder.bufferedBytes) after a frame, expected \(appended - consumed)")
            if got.kind == .status { checkStatusPayload(got.payload) }
            if got.kind.isMetadata { checkMetadataPayload(got.kind, got.payload) }
            if frames.count < 64 { frames.append(got) }
        }

        if let failure {
            do {
                try decoder.finish()
                fatalError("finish() right after \(failure) did not throw")
            } catch {
                check(error == failure, "finish() right after \(failure) threw \(error)")
            }
        }
    }

    if failure == nil {
        // End of stream: truncated iff bytes are left over.
        check(consumed + decoder.bufferedBytes == stream.count, "bytes lost: consumed \(consumed), buffered \(decoder.bufferedBytes), stream \(stream.count)")
        do {
            try decoder.finish()
            check(decoder.bufferedBytes == 0, "finish() accepted \(decoder.bufferedBytes) left-over bytes")
        } catch {
            check(decoder.bufferedBytes > 0, "finish() threw \(error) with nothing buffered")
            check(error.code == .internal && error.reason == .truncatedFrame, "finish() threw \(error)")
        }
    }
    checkSameFrames(frames, maximum: maximum, metadataMaximum: metadataMaximum)

    // Any payload is also fed to the status decoder directly (as a status frame could carry it).
    checkStatusPayload(Array(stream.prefix(300)))
    checkMetadataPayload(.headers, Array(stream.prefix(300)))
    checkMetadataPayload(.trailers, Array(stream.prefix(300)))
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    run(UnsafeBufferPointer(start: data, count: size))
    return 0
}
