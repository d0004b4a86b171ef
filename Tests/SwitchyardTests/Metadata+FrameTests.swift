@testable import Switchyard
import Testing

/// The headers and trailers frames: their layout, round trips through ``FrameDecoder``,
/// their own size bound, and malformed payloads named as protocol violations.
@Suite("CallMetadata frames")
struct MetadataFrameTests {
    static func sample() throws -> CallMetadata {
        var metadata = CallMetadata()
        try metadata.addString("Grüße 🚂", forKey: "greeting")
        try metadata.addString("1", forKey: "x")
        try metadata.addString("2", forKey: "x")
        try metadata.addBinary([0, 1, 255], forKey: "token-bin")
        return metadata
    }

    @Test("A headers frame has the documented layout")
    func layout() throws {
        var metadata = CallMetadata()
        try metadata.addString("v", forKey: "k")
        try metadata.addBinary([9], forKey: "b-bin")
        let frame = CallMetadata.headersFrame(method: "/echo", metadata: metadata)
        let payload: [UInt8] = [0, 5] + Array("/echo".utf8) + [1] + Array("k".utf8) + [0, 0, 0, 1] + Array("v".utf8)
            + [5] + Array("b-bin".utf8) + [0, 0, 0, 1, 9]
        #expect(frame == [0x02, 0, 0, 0, UInt8(payload.count)] + payload)
        #expect(CallMetadata.headersFrame(method: "", metadata: CallMetadata()) == [0x02, 0, 0, 0, 2, 0, 0])
        #expect(CallMetadata.trailersFrame(CallMetadata()) == [0x03, 0, 0, 0, 0])
        #expect(Frame.Kind(flags: 2) == .headers && Frame.Kind(flags: 3) == .trailers && Frame.Kind(flags: 4) == nil)
        #expect("\(Frame.Kind.headers)" == "headers" && "\(Frame.Kind.trailers)" == "trailers")
    }

    @Test("Headers and trailers round-trip through the decoder between messages and the status, split at every byte")
    func roundTrip() throws {
        let metadata = try Self.sample()
        let message: [UInt8] = Array(0..<200)
        let stream = CallMetadata.headersFrame(method: "/pkg.Service/Method", metadata: metadata)
            + Frame.encode(.message, payload: message)
            + CallMetadata.trailersFrame(metadata)
            + Frame.encode(.status, payload: CallStatus.ok.encoded)
        for split in 0...stream.count {
            var decoder = FrameDecoder(maximumMessageSize: 1000, maximumMetadataSize: 200)
            var frames: [(kind: Frame.Kind, payload: [UInt8])] = []
            for part in [stream[..<split], stream[split...]] {
                decoder.append(Array(part))
                while let frame = try decoder.next() { frames.append(frame) }
            }
            try decoder.finish()
            try #require(frames.map(\.kind) == [.headers, .message, .trailers, .status], "split at \(split)")
            let headers = try CallMetadata.decodeHeaders(frames[0].payload)
            #expect(headers.method == "/pkg.Service/Method")
            #expect(headers.metadata == metadata)
            #expect(frames[1].payload == message)
            #expect(try CallMetadata.decodeTrailers(frames[2].payload) == metadata)
        }
    }

    @Test("A metadata frame over its own maximum fails at its prefix with metadata too large; messages keep theirs")
    func tooLarge() throws {
        var decoder = FrameDecoder(maximumMessageSize: 1000, maximumMetadataSize: 16)
        decoder.append([0x02, 0, 0, 0, 17])
        #expect(decoder.pending == .invalid)
        do {
            _ = try decoder.next()
            Issue.record("a 17-byte headers frame passed a 16-byte maximum")
        } catch {
            #expect(error.code == .resourceExhausted && error.reason == .metadataTooLarge, "\(error)")
            #expect(error.message == "a headers frame announces 17 bytes; the maximum metadata size is 16", "\(error)")
        }
        var trailers = FrameDecoder(maximumMessageSize: 1000, maximumMetadataSize: 16)
        trailers.append([0x03, 0, 1, 0, 0])
        #expect(throws: TransportError.self) { try trailers.next() }
        // A message of 17 bytes is under the message maximum: it passes.
        var messages = FrameDecoder(maximumMessageSize: 1000, maximumMetadataSize: 16)
        messages.append(Frame.encode(.message, payload: [UInt8](repeating: 7, count: 17)))
        #expect(try messages.next()?.payload.count == 17)
        // Headers at the maximum pass, assembled across appends like any frame.
        var atLimit = FrameDecoder(maximumMessageSize: 0, maximumMetadataSize: 16)
        let frame = Frame.encode(.headers, payload: [0, 14] + [UInt8](repeating: 0x61, count: 14))
        atLimit.append(Array(frame[..<8]))
        #expect(try atLimit.next() == nil)
        atLimit.append(Array(frame[8...]))
        #expect(try CallMetadata.decodeHeaders(try #require(try atLimit.next()).payload).method == String(repeating: "a", count: 14))
    }

    @Test("A malformed headers or trailers payload is a protocol violation that says what is wrong", arguments: [
        ([0], "headers", "1 byte; a headers frame has at least 2"),
        ([0, 9, 0x61], "headers", "the method name's length 9 runs past the frame's 3 bytes"),
        ([0, 1, 0xff], "headers", "the method name is not UTF-8"),
        ([0, 1, 0x0a], "headers", "a control character (U+000A)"),
        ([0, 0, 0], "headers", "pair 0 has an empty key"),
        ([0, 0, 3, 0x61], "headers", "pair 0 runs past the end of the frame"),
        ([1, 0x41, 0, 0, 0, 0], "trailers", "invalid key \"A\""),
        ([1, 0xc3, 0, 0, 0, 0], "trailers", "holds the byte 0xc3; keys are ASCII"),
        ([1, 0x6b, 0, 0, 0, 5, 0x61], "trailers", "the value of \"k\" announces 5 bytes; 1 are left"),
        ([1, 0x6b, 0, 0, 0, 1, 0xff], "trailers", "the value of \"k\" is not UTF-8"),
        ([1, 0x6b, 0, 0, 0, 1, 0x00], "trailers", "a control character (U+0000)"),
    ] as [([UInt8], String, String)])
    func malformed(payload: [UInt8], frame: String, why: String) {
        do {
            if frame == "headers" { _ = try CallMetadata.decodeHeaders(payload) } else { _ = try CallMetadata.decodeTrailers(payload) }
            Issue.record("\(payload) decoded")
        } catch {
            #expect(error.code == .internal && error.reason == .protocolViolation, "\(error)")
            #expect(error.message.hasPrefix("malformed \(frame) frame: "), "\(error)")
            #expect(error.message.contains(why), "'\(error.message)' should mention '\(why)'")
        }
    }
}
