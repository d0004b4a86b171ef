// libFuzzer target for `H2FrameDecoder`, the HTTP/2 frame decoder
// (Sources/SwitchyardHTTP2/H2FrameDecoder.swift), and `H2FrameEncoder` on what it decodes:
// what an HTTP/2 connection reads from its peer.
//
// Not a SwiftPM target: `scripts/fuzz` compiles this file with the frame files of
// SwitchyardHTTP2 into one instrumented binary, `swiftc -sanitize=fuzzer,address`. Any
// broken invariant below is a `fatalError`, which libFuzzer reports as a crash and saves as
// an artifact.
//
// Input layout:
//   byte 0: bits 0-5 the size of the pieces the bytes are appended in (0: all at once),
//           bits 6-7 the decoder's maximum frame size (16384, 16385, 65535, 16777215);
//   rest:   what the peer sent. A server-role decoder reads it as it is (so it should begin
//           with the connection preface); a client-role decoder reads it without the
//           preface if it begins with one.
//
// Checked, for every input and both roles:
// - decoding never traps; every error has a message; a stream error is never about
//   stream 0 and leaves the decoder decoding; after a connection error every call throws
//   it again and nothing stays buffered;
// - after the decoder has been drained, less than one frame header and one maximum-size
//   payload stays buffered (a frame too long is refused from its header);
// - the pieces do not matter: the frames and errors (code and stream) are those of the
//   whole input appended at once;
// - every decoded frame re-encodes to a payload within the maximum frame size, and its
//   encoding decodes, alone, to the frame itself (its padding dropped: the encoder never
//   pads).

private let maxFrameSizes = [16_384, 16_385, 65_535, 16_777_215]

@inline(never)
private func check(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition { fatalError("H2FrameDecoder invariant broken: \(message())") }
}

/// What one call of `nextFrame()` gave, errors by code and stream (their messages may
/// name what has arrived so far).
private enum Outcome: Equatable {
    case frame(H2Frame)
    case error(H2ErrorCode, H2StreamID?)
}

/// The frame without its padding: what the encoder's output decodes to.
private func unpadded(_ frame: H2Frame) -> H2Frame {
    switch frame {
    case .data(let stream, let payload, let endStream, _):
        .data(stream, payload: payload, endStream: endStream)
    case .headers(let stream, let block, let endStream, let endHeaders, _):
        .headers(stream, headerBlock: block, endStream: endStream, endHeaders: endHeaders)
    default:
        frame
    }
}

private func checkReencoding(_ frame: H2Frame, role: H2FrameDecoder.Role, maxFrameSize: Int) {
    var bytes: [UInt8] = role == .server ? h2ConnectionPreface : []
    let start = bytes.count
    H2FrameEncoder.encode(frame, into: &bytes)
    check(bytes.count - start - 9 <= maxFrameSize, "\(frame) re-encodes to a payload over \(maxFrameSize)")
    var decoder = H2FrameDecoder(role: role, maxFrameSize: 16_777_215)
    decoder.append(bytes)
    do {
        let again = try decoder.nextFrame()
        check(again == unpadded(frame), "\(frame) re-encoded decodes to \(String(describing: again))")
        check(try decoder.nextFrame() == nil && decoder.bufferedByteCount == 0, "\(frame) re-encoded leaves octets over")
    } catch {
        fatalError("H2FrameDecoder invariant broken: \(frame) re-encoded fails to decode: \(error)")
    }
}

/// Decodes `input` appended in pieces of `piece` octets (0: at once), checking every frame
/// and error on the way.
private func decode(_ input: ArraySlice<UInt8>, role: H2FrameDecoder.Role, maxFrameSize: Int, piece: Int) -> [Outcome] {
    var decoder = H2FrameDecoder(role: role, maxFrameSize: maxFrameSize)
    var outcomes: [Outcome] = []
    var start = input.startIndex
    while start < input.endIndex {
        let end = piece == 0 ? input.endIndex : min(input.endIndex, start + piece)
        input[start..<end].withUnsafeBytes { decoder.append($0) }
        start = end
        while true {
            do {
                guard let frame = try decoder.nextFrame() else { break }
                outcomes.append(.frame(frame))
                checkReencoding(frame, role: role, maxFrameSize: maxFrameSize)
            } catch {
                check(!error.message.isEmpty, "an error without a message: \(error.code)")
                outcomes.append(.error(error.code, error.stream))
                guard error.isConnectionError else {
                    check(error.stream?.isConnection == false, "a stream error on stream 0: \(error)")
                    continue
                }
                // A SETTINGS acknowledgement, which a working decoder would yield.
                let violation = error
                decoder.append([0, 0, 0, 4, 1, 0, 0, 0, 0])
                do {
                    _ = try decoder.nextFrame()
                    fatalError("H2FrameDecoder invariant broken: it decodes again after \(violation)")
                } catch {
                    check(error == violation, "a second call threw \(error), not \(violation)")
                }
                check(decoder.bufferedByteCount == 0, "octets stay buffered after \(violation)")
                return outcomes
            }
        }
        check(
            decoder.bufferedByteCount < 9 + maxFrameSize,
            "\(decoder.bufferedByteCount) octets buffered with a maximum frame size of \(maxFrameSize)")
    }
    return outcomes
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size >= 1 else { return 0 }
    let input = Array(UnsafeBufferPointer(start: data, count: size))
    let piece = Int(input[0] & 0x3f)
    let maxFrameSize = maxFrameSizes[Int(input[0] >> 6)]
    let bytes = input[1...]

    let serverInput = bytes
    let clientInput = bytes.starts(with: h2ConnectionPreface) ? bytes.dropFirst(h2ConnectionPreface.count) : bytes
    for (role, roleInput) in [(H2FrameDecoder.Role.server, serverInput), (.client, clientInput)] {
        let inPieces = decode(roleInput, role: role, maxFrameSize: maxFrameSize, piece: piece)
        if piece != 0 {
            let atOnce = decode(roleInput, role: role, maxFrameSize: maxFrameSize, piece: 0)
            check(inPieces == atOnce, "\(role): pieces of \(piece) give \(inPieces), all at once \(atOnce)")
        }
    }
    return 0
}
