import Testing

@testable import SwitchyardHTTP2

/// A frame and its octets, written out by hand from RFC 9113's layouts.
struct H2ExactFrame: Sendable, CustomTestStringConvertible {
    let name: String
    let frame: H2Frame
    let bytes: [UInt8]
    var testDescription: String { name }
}

@Suite struct H2FrameEncoderTests {
    static let exact: [H2ExactFrame] = [
        // Section 6.5: Identifier (16) and Value (32), twice.
        .init(
            name: "SETTINGS", frame: .settings([H2Setting(.maxConcurrentStreams, 100), H2Setting(.initialWindowSize, 65_535)]),
            bytes: [0, 0, 12, 0x4, 0x0, 0, 0, 0, 0, 0x00, 0x03, 0, 0, 0, 100, 0x00, 0x04, 0, 0, 0xff, 0xff]),
        .init(name: "SETTINGS ACK", frame: .settingsAck, bytes: [0, 0, 0, 0x4, 0x1, 0, 0, 0, 0]),
        // Section 6.7: 8 octets of opaque data, ACK 0x1.
        .init(
            name: "PING ACK", frame: .ping(0x0102_0304_0506_0708, ack: true),
            bytes: [0, 0, 8, 0x6, 0x1, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8]),
        // Section 6.8: Last-Stream-ID, Error Code, Additional Debug Data.
        .init(
            name: "GOAWAY", frame: .goAway(lastStreamID: H2StreamID(5), .internalError, debugData: Array("oops!".utf8)),
            bytes: [0, 0, 13, 0x7, 0x0, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 2] + Array("oops!".utf8)),
        // Section 6.9: Window Size Increment (31).
        .init(
            name: "WINDOW_UPDATE", frame: .windowUpdate(H2StreamID(3), increment: 4096),
            bytes: [0, 0, 4, 0x8, 0x0, 0, 0, 0, 3, 0, 0, 0x10, 0]),
        // Section 6.4.
        .init(name: "RST_STREAM", frame: .rstStream(H2StreamID(1), .cancel), bytes: [0, 0, 4, 0x3, 0x0, 0, 0, 0, 1, 0, 0, 0, 8]),
        // Section 6.3: no dependency, weight 16 (written as 15).
        .init(name: "PRIORITY", frame: .priority(H2StreamID(1)), bytes: [0, 0, 5, 0x2, 0x0, 0, 0, 0, 1, 0, 0, 0, 0, 15]),
        // Section 6.2: END_STREAM 0x1 and END_HEADERS 0x4, no padding, no priority.
        .init(
            name: "HEADERS", frame: .headers(H2StreamID(3), headerBlock: [0x82, 0x86], endStream: true, endHeaders: true),
            bytes: [0, 0, 2, 0x1, 0x5, 0, 0, 0, 3, 0x82, 0x86]),
        .init(
            name: "DATA", frame: .data(H2StreamID(1), payload: ArraySlice("abcde".utf8), endStream: true),
            bytes: [0, 0, 5, 0x0, 0x1, 0, 0, 0, 1] + Array("abcde".utf8)),
        // Section 6.6: Promised Stream ID, then the block.
        .init(
            name: "PUSH_PROMISE", frame: .pushPromise(H2StreamID(1), promised: H2StreamID(2), headerBlock: [0x82], endHeaders: true),
            bytes: [0, 0, 5, 0x5, 0x4, 0, 0, 0, 1, 0, 0, 0, 2, 0x82]),
        .init(
            name: "CONTINUATION", frame: .continuation(H2StreamID(3), headerBlock: [0x84], endHeaders: false),
            bytes: [0, 0, 1, 0x9, 0x0, 0, 0, 0, 3, 0x84]),
    ]

    @Test("frames encode to the octets the RFC's layout gives, and those octets decode to the frame", arguments: exact)
    func byteExact(_ exact: H2ExactFrame) throws {
        #expect(encoded([exact.frame]) == exact.bytes)
        #expect(try decodeAll(exact.bytes) == [exact.frame])
    }

    @Test("HEADERS with padding and priority, written by hand, decode to their block; re-encoded, they lose both")
    func paddedHeaders() throws {
        // END_STREAM | END_HEADERS | PADDED | PRIORITY; Pad Length 2; exclusive dependency on
        // stream 1, weight 16; the block; two octets of padding.
        let bytes: [UInt8] = [0, 0, 10, 0x1, 0x2d, 0, 0, 0, 3, 2, 0x80, 0, 0, 1, 0x0f, 0x82, 0x86, 0, 0]
        let frame = H2Frame.headers(H2StreamID(3), headerBlock: [0x82, 0x86], endStream: true, endHeaders: true, paddingLength: 3)
        #expect(try decodeAll(bytes) == [frame])
        #expect(encoded([frame]) == [0, 0, 2, 0x1, 0x5, 0, 0, 0, 3, 0x82, 0x86])
    }

    @Test("DATA with padding, written by hand, decodes to its payload and counts the padding for flow control")
    func paddedData() throws {
        // END_STREAM | PADDED; Pad Length 3; "abcde"; three octets of padding.
        let bytes: [UInt8] = [0, 0, 9, 0x0, 0x9, 0, 0, 0, 1, 3] + Array("abcde".utf8) + [0, 0, 0]
        let frames = try decodeAll(bytes)
        #expect(frames == [.data(H2StreamID(1), payload: ArraySlice("abcde".utf8), endStream: true, paddingLength: 4)])
        #expect(frames.first?.flowControlledLength == 9)
        #expect(encoded(frames) == [0, 0, 5, 0x0, 0x1, 0, 0, 0, 1] + Array("abcde".utf8))
    }

    @Test("every kind of frame decodes to what was encoded")
    func roundTrip() throws {
        #expect(try decodeAll(encoded(everyKind), maxFrameSize: 16_777_215) == everyKind)
    }

    @Test("encoding appends to the caller's buffer and ignores paddingLength")
    func appends() {
        var buffer: [UInt8] = [0xaa, 0xbb]
        H2FrameEncoder.encode(.data(H2StreamID(1), payload: [1], endStream: false, paddingLength: 9), into: &buffer)
        #expect(buffer == [0xaa, 0xbb, 0, 0, 1, 0x0, 0x0, 0, 0, 0, 1, 1])
    }

    @Test("a header block is split into HEADERS and CONTINUATION frames of at most maxFrameSize octets", arguments: [0, 1, 100, 16_384, 16_385, 32_768, 40_000])
    func headerBlockSplit(size: Int) throws {
        let block = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        var bytes: [UInt8] = []
        H2FrameEncoder.encodeHeaderBlock(stream: H2StreamID(5), block: block, endStream: true, maxFrameSize: 16_384, into: &bytes)
        let frames = try decodeAll(bytes)
        let count = max(1, (size + 16_383) / 16_384)
        #expect(frames.count == count)
        var joined: [UInt8] = []
        for (n, frame) in frames.enumerated() {
            let last = n == count - 1
            if n == 0 {
                guard case .headers(let stream, let part, let endStream, let endHeaders, _) = frame else {
                    Issue.record("frame 0 is \(frame), not HEADERS")
                    return
                }
                #expect(stream == H2StreamID(5) && endStream && endHeaders == last)
                joined += part
            } else {
                guard case .continuation(let stream, let part, let endHeaders) = frame else {
                    Issue.record("frame \(n) is \(frame), not CONTINUATION")
                    return
                }
                #expect(stream == H2StreamID(5) && endHeaders == last)
                joined += part
            }
            #expect(last || frame.headerBlockCount == 16_384)
        }
        #expect(joined == block)

        // END_STREAM stays off when not asked.
        var open: [UInt8] = []
        H2FrameEncoder.encodeHeaderBlock(stream: H2StreamID(5), block: [1, 2, 3], endStream: false, maxFrameSize: 2, into: &open)
        #expect(
            try decodeAll(open) == [
                .headers(H2StreamID(5), headerBlock: [1, 2], endStream: false, endHeaders: false),
                .continuation(H2StreamID(5), headerBlock: [3], endHeaders: true),
            ])
    }

    @Test("DATA is split into frames of at most maxFrameSize octets, END_STREAM on the last", arguments: [0, 1, 16_384, 16_385, 40_000])
    func dataSplit(size: Int) throws {
        let payload = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 13) }
        var bytes: [UInt8] = []
        H2FrameEncoder.encodeData(stream: H2StreamID(7), payload: payload, endStream: true, maxFrameSize: 16_384, into: &bytes)
        let frames = try decodeAll(bytes)
        #expect(frames.count == max(1, (size + 16_383) / 16_384))
        var joined: [UInt8] = []
        for (n, frame) in frames.enumerated() {
            guard case .data(let stream, let part, let endStream, _) = frame else {
                Issue.record("frame \(n) is \(frame), not DATA")
                return
            }
            let last = n == frames.count - 1
            #expect(stream == H2StreamID(7) && endStream == last)
            #expect(last || part.count == 16_384)
            joined += part
        }
        #expect(joined == payload)

        var open: [UInt8] = []
        H2FrameEncoder.encodeData(stream: H2StreamID(7), payload: [1, 2, 3], endStream: false, maxFrameSize: 2, into: &open)
        #expect(
            try decodeAll(open) == [
                .data(H2StreamID(7), payload: [1, 2], endStream: false), .data(H2StreamID(7), payload: [3], endStream: false),
            ])
    }
}

extension H2Frame {
    /// The length of a HEADERS or CONTINUATION frame's block fragment, 0 for other frames.
    fileprivate var headerBlockCount: Int {
        switch self {
        case .headers(_, let block, _, _, _), .continuation(_, let block, _): block.count
        default: 0
        }
    }
}
