import Testing

@testable import SwitchyardHTTP2

/// A frame the decoder must refuse, and how.
struct H2ViolationCase: Sendable, CustomTestStringConvertible {
    let name: String
    let bytes: [UInt8]
    let code: H2ErrorCode
    /// The stream of a stream error; nil for a connection error.
    let stream: H2StreamID?
    let role: H2FrameDecoder.Role

    init(_ name: String, _ bytes: [UInt8], _ code: H2ErrorCode, stream: UInt32? = nil, role: H2FrameDecoder.Role = .client) {
        self.name = name
        self.bytes = bytes
        self.code = code
        self.stream = stream.map { H2StreamID($0) }
        self.role = role
    }

    var testDescription: String { name }
}

@Suite struct H2FrameDecoderTests {
    static let eightZeros = [UInt8](repeating: 0, count: 8)

    static let violations: [H2ViolationCase] = [
        // Frames that must be on a stream, on stream 0 (sections 6.1-6.4, 6.6, 6.10).
        .init("DATA on stream 0", rawFrame(0x0, stream: 0, [1]), .protocolError),
        .init("HEADERS on stream 0", rawFrame(0x1, flags: 0x4, stream: 0, [0x82]), .protocolError),
        .init("PRIORITY on stream 0", rawFrame(0x2, stream: 0, [0, 0, 0, 1, 15]), .protocolError),
        .init("RST_STREAM on stream 0", rawFrame(0x3, stream: 0, [0, 0, 0, 8]), .protocolError),
        .init("PUSH_PROMISE on stream 0", rawFrame(0x5, flags: 0x4, stream: 0, [0, 0, 0, 2]), .protocolError),
        .init("CONTINUATION on stream 0", rawFrame(0x9, flags: 0x4, stream: 0, [0x82]), .protocolError),
        // Frames of the connection, on a stream (sections 6.5, 6.7, 6.8).
        .init("SETTINGS on stream 1", rawFrame(0x4, stream: 1, []), .protocolError),
        .init("PING on stream 1", rawFrame(0x6, stream: 1, eightZeros), .protocolError),
        .init("GOAWAY on stream 1", rawFrame(0x7, stream: 1, eightZeros), .protocolError),
        // Padding (sections 6.1, 6.2, 6.6).
        .init("DATA whose Pad Length equals the payload's length", rawFrame(0x0, flags: 0x8, stream: 1, [3, 0, 0]), .protocolError),
        .init("DATA whose Pad Length exceeds the payload", rawFrame(0x0, flags: 0x8, stream: 1, [200, 1, 2]), .protocolError),
        .init("padded DATA without room for its Pad Length", rawFrame(0x0, flags: 0x8, stream: 1, []), .frameSizeError),
        .init(
            "HEADERS whose padding reaches into its priority fields",
            rawFrame(0x1, flags: 0x2c, stream: 1, [3, 0, 0, 0, 0, 15, 0x82, 0]), .protocolError),
        .init("HEADERS too short for its priority fields", rawFrame(0x1, flags: 0x24, stream: 1, [0, 0, 0]), .frameSizeError),
        .init(
            "PUSH_PROMISE whose padding reaches into the promised stream",
            rawFrame(0x5, flags: 0xc, stream: 1, [2, 0, 0, 0, 2, 0x82]), .protocolError),
        .init("PUSH_PROMISE too short for the promised stream", rawFrame(0x5, flags: 0x4, stream: 1, [0, 0]), .frameSizeError),
        // SETTINGS (section 6.5).
        .init("SETTINGS of 5 octets", rawFrame(0x4, stream: 0, [0, 3, 0, 0, 1]), .frameSizeError),
        .init("SETTINGS acknowledgement with a payload", rawFrame(0x4, flags: 0x1, stream: 0, [0, 3, 0, 0, 0, 1]), .frameSizeError),
        .init("SETTINGS_ENABLE_PUSH of 2", rawSettings(0x2, 2), .protocolError, role: .client),
        .init("SETTINGS_ENABLE_PUSH of 1 from a server", rawSettings(0x2, 1), .protocolError, role: .client),
        .init("SETTINGS_INITIAL_WINDOW_SIZE of 2^31", rawSettings(0x4, 0x8000_0000), .flowControlError),
        .init("SETTINGS_MAX_FRAME_SIZE of 16,383", rawSettings(0x5, 16_383), .protocolError),
        .init("SETTINGS_MAX_FRAME_SIZE of 2^24", rawSettings(0x5, 16_777_216), .protocolError),
        // Fixed lengths (sections 6.3, 6.4, 6.7, 6.8, 6.9).
        .init("PING of 7 octets", rawFrame(0x6, stream: 0, Array(eightZeros.dropLast())), .frameSizeError),
        .init("PING of 9 octets", rawFrame(0x6, stream: 0, eightZeros + [0]), .frameSizeError),
        .init("RST_STREAM of 3 octets", rawFrame(0x3, stream: 1, [0, 0, 8]), .frameSizeError),
        .init("RST_STREAM of 5 octets", rawFrame(0x3, stream: 1, [0, 0, 0, 8, 0]), .frameSizeError),
        .init("GOAWAY of 7 octets", rawFrame(0x7, stream: 0, Array(eightZeros.dropLast())), .frameSizeError),
        .init("WINDOW_UPDATE of 3 octets", rawFrame(0x8, stream: 1, [0, 0, 1]), .frameSizeError),
        .init("WINDOW_UPDATE of 5 octets on the connection", rawFrame(0x8, stream: 0, [0, 0, 0, 1, 0]), .frameSizeError),
        .init("PRIORITY of 4 octets", rawFrame(0x2, stream: 3, [0, 0, 0, 1]), .frameSizeError, stream: 3),
        .init("PRIORITY of 6 octets", rawFrame(0x2, stream: 3, [0, 0, 0, 1, 15, 0]), .frameSizeError, stream: 3),
        // Self-dependency (RFC 7540 section 5.3.1, kept by RFC 9113 section 5.3.1).
        .init("PRIORITY making a stream depend on itself", rawFrame(0x2, stream: 3, [0, 0, 0, 3, 15]), .protocolError, stream: 3),
        .init(
            "PRIORITY making a stream depend on itself exclusively", rawFrame(0x2, stream: 3, [0x80, 0, 0, 3, 15]), .protocolError,
            stream: 3),
        // A connection error, not a stream error: its header block must not be lost.
        .init(
            "HEADERS whose priority makes the stream depend on itself",
            rawFrame(0x1, flags: 0x24, stream: 3, [0, 0, 0, 3, 15, 0x82]), .protocolError),
        // Increments of 0 (section 6.9).
        .init("WINDOW_UPDATE of 0 on a stream", rawFrame(0x8, stream: 5, [0, 0, 0, 0]), .protocolError, stream: 5),
        .init("WINDOW_UPDATE of 0 on the connection", rawFrame(0x8, stream: 0, [0, 0, 0, 0]), .protocolError),
        .init("WINDOW_UPDATE of only the reserved bit", rawFrame(0x8, stream: 5, [0x80, 0, 0, 0]), .protocolError, stream: 5),
    ]

    @Test("each frame-layer violation gives the RFC's code and kind; a stream error leaves the decoder usable, a connection error does not",
        arguments: violations)
    func violation(_ violation: H2ViolationCase) throws {
        var decoder = H2FrameDecoder(role: violation.role)
        if violation.role == .server { decoder.append(h2ConnectionPreface) }
        let ping = H2Frame.ping(42, ack: false)
        decoder.append(violation.bytes + encoded([ping]))
        let error = #expect(throws: H2ProtocolViolation.self) { try decoder.nextFrame() }
        #expect(error?.code == violation.code)
        #expect(error?.stream == violation.stream)
        #expect(error?.message.isEmpty == false)

        if violation.stream != nil {
            // The frame was consumed: the PING after it comes next.
            #expect(try decoder.nextFrame() == ping)
            #expect(try decoder.nextFrame() == nil)
        } else {
            decoder.append(encoded([ping]))
            let again = #expect(throws: H2ProtocolViolation.self) { try decoder.nextFrame() }
            #expect(again == error)
            #expect(decoder.bufferedByteCount == 0)
        }
    }

    @Test("values at the edges of what the RFC allows are accepted")
    func edgesAccepted() throws {
        #expect(try decodeAll(rawFrame(0x0, flags: 0x8, stream: 1, [2, 0, 0])) == [.data(H2StreamID(1), payload: [], endStream: false, paddingLength: 3)])
        #expect(
            try decodeAll(rawFrame(0x1, flags: 0x2c, stream: 1, [2, 0, 0, 0, 0, 15, 0, 0]))
                == [.headers(H2StreamID(1), headerBlock: [], endStream: false, endHeaders: true, paddingLength: 3)])
        #expect(
            try decodeAll(rawFrame(0x5, flags: 0xc, stream: 1, [1, 0, 0, 0, 2, 0]))
                == [.pushPromise(H2StreamID(1), promised: H2StreamID(2), headerBlock: [], endHeaders: true)])
        let settings = rawSettings(0x5, 16_384) + rawSettings(0x5, 16_777_215) + rawSettings(0x4, 0x7fff_ffff) + rawSettings(0x2, 0)
        #expect(
            try decodeAll(settings) == [
                .settings([H2Setting(.maxFrameSize, 16_384)]), .settings([H2Setting(.maxFrameSize, 16_777_215)]),
                .settings([H2Setting(.initialWindowSize, 0x7fff_ffff)]), .settings([H2Setting(.enablePush, 0)]),
            ])
        // A client may announce that it accepts pushes.
        #expect(try decodeAll(h2ConnectionPreface + rawSettings(0x2, 1), role: .server) == [.settings([H2Setting(.enablePush, 1)])])
        #expect(try decodeAll(rawFrame(0x7, stream: 0, Self.eightZeros)) == [.goAway(lastStreamID: .connection, .noError, debugData: [])])
        #expect(try decodeAll(rawFrame(0x8, stream: 1, [0xff, 0xff, 0xff, 0xff])) == [.windowUpdate(H2StreamID(1), increment: 0x7fff_ffff)])
    }

    @Test("unknown frame types are skipped, unknown flags and reserved bits ignored")
    func unknownsIgnored() throws {
        let bytes =
            rawFrame(0xfa, flags: 0xff, stream: 7, [1, 2, 3])
            + rawFrame(0x6, flags: 0xfe, stream: 0, Self.eightZeros)
            + rawFrame(0x0, flags: 0xf6, stream: 0x8000_0001, [9])
            + rawFrame(0x8, stream: 0x8000_0003, [0x80, 0, 0, 0x10])
            + rawFrame(0x7, stream: 0, [0x80, 0, 0, 5, 0, 0, 0, 0])
            + rawFrame(0x5, flags: 0x4, stream: 1, [0x80, 0, 0, 2])
            + rawFrame(0x4, flags: 0xfe, stream: 0, [0xab, 0xcd, 0, 0, 0, 1])
        #expect(
            try decodeAll(bytes) == [
                .unknown(type: 0xfa, H2StreamID(7), length: 3),
                .ping(0, ack: false),
                .data(H2StreamID(1), payload: [9], endStream: false),
                .windowUpdate(H2StreamID(3), increment: 16),
                .goAway(lastStreamID: H2StreamID(5), .noError, debugData: []),
                .pushPromise(H2StreamID(1), promised: H2StreamID(2), headerBlock: [], endHeaders: true),
                .settings([H2Setting(H2Setting.Identifier(0xabcd), 1)]),
            ])
    }

    @Test("a frame longer than SETTINGS_MAX_FRAME_SIZE is refused from its header, before its payload arrives")
    func tooLongRefusedFromHeader() throws {
        let header = Array(rawFrame(0x0, stream: 1, [UInt8](repeating: 0, count: 16_385)).prefix(9))
        var decoder = H2FrameDecoder(role: .client)
        decoder.append(header)
        let error = #expect(throws: H2ProtocolViolation.self) { try decoder.nextFrame() }
        #expect(error?.code == .frameSizeError)
        #expect(error?.isConnectionError == true)

        // Announced larger, the same header waits for its payload.
        var larger = H2FrameDecoder(role: .client, maxFrameSize: 16_385)
        larger.append(header)
        #expect(try larger.nextFrame() == nil)
        larger.append([UInt8](repeating: 7, count: 16_385))
        #expect(try larger.nextFrame() == .data(H2StreamID(1), payload: ArraySlice(repeating: 7, count: 16_385), endStream: false))

        // Other connection errors of the header come before the payload too.
        var early = H2FrameDecoder(role: .client)
        early.append(Array(rawFrame(0x0, stream: 0, [1, 2, 3]).prefix(9)))
        #expect(throws: H2ProtocolViolation(connection: .protocolError, "DATA on stream 0: this frame type must be on a stream")) {
            try early.nextFrame()
        }
    }

    @Test("frames delivered one byte at a time decode as when delivered at once")
    func oneByteAtATime() throws {
        let padded =
            rawFrame(0x0, flags: 0x9, stream: 1, [3] + Array("abcde".utf8) + [0, 0, 0])
            + rawFrame(0x1, flags: 0x2d, stream: 3, [2, 0x80, 0, 0, 1, 0x0f, 0x82, 0x86, 0, 0])
        let bytes = h2ConnectionPreface + encoded(everyKind) + padded
        var decoder = H2FrameDecoder(role: .server)
        var frames: [H2Frame] = []
        for byte in bytes {
            decoder.append([byte])
            while let frame = try decoder.nextFrame() { frames.append(frame) }
        }
        let expected =
            everyKind + [
                .data(H2StreamID(1), payload: ArraySlice("abcde".utf8), endStream: true, paddingLength: 4),
                .headers(H2StreamID(3), headerBlock: [0x82, 0x86], endStream: true, endHeaders: true, paddingLength: 3),
            ]
        #expect(frames == expected)
        #expect(decoder.bufferedByteCount == 0)
    }

    @Test("many frames in one append, and in reads that cut frames anywhere, all decode in order")
    func manyFrames() throws {
        var frames: [H2Frame] = []
        for n in 0..<6000 {
            frames.append(
                n % 3 == 0
                    ? .ping(UInt64(n), ack: false)
                    : .data(H2StreamID(UInt32(2 * n + 1)), payload: ArraySlice(repeating: UInt8(n & 0xff), count: n % 37), endStream: n % 2 == 0))
        }
        let bytes = encoded(frames)
        #expect(try decodeAll(bytes) == frames)

        // Reads of 1,000 octets: frames cut at read boundaries, the buffer compacted on the way.
        var decoder = H2FrameDecoder(role: .client)
        var decoded: [H2Frame] = []
        var start = 0
        while start < bytes.count {
            let end = min(bytes.count, start + 1000)
            bytes[start..<end].withUnsafeBytes { decoder.append($0) }
            while let frame = try decoder.nextFrame() { decoded.append(frame) }
            #expect(decoder.bufferedByteCount < 9 + 36)
            start = end
        }
        #expect(decoded == frames)
        #expect(decoder.bufferedByteCount == 0)
    }

    @Test("a whole frame is needed: a header alone, or a payload short of one octet, gives nil")
    func partialFrames() throws {
        let bytes = encoded([.goAway(lastStreamID: H2StreamID(3), .noError, debugData: [1, 2, 3])])
        var decoder = H2FrameDecoder(role: .client)
        decoder.append(Array(bytes.dropLast()))
        #expect(try decoder.nextFrame() == nil)
        #expect(decoder.bufferedByteCount == bytes.count - 1)
        decoder.append([bytes[bytes.count - 1]])
        #expect(try decoder.nextFrame() == .goAway(lastStreamID: H2StreamID(3), .noError, debugData: [1, 2, 3]))
        #expect(try decoder.nextFrame() == nil)
    }
}

@Suite struct H2ConnectionPrefaceTests {
    @Test("a server decodes frames after the client's connection preface, in whatever pieces it comes")
    func goodPreface() throws {
        let settings = H2Frame.settings([H2Setting(.maxConcurrentStreams, 100)])
        #expect(try decodeAll(h2ConnectionPreface + encoded([settings]), role: .server) == [settings])

        var decoder = H2FrameDecoder(role: .server)
        decoder.append(Array(h2ConnectionPreface.prefix(10)))
        #expect(try decoder.nextFrame() == nil)
        decoder.append(Array(h2ConnectionPreface.dropFirst(10)) + encoded([settings]).prefix(4))
        #expect(try decoder.nextFrame() == nil)
        decoder.append(Array(encoded([settings]).dropFirst(4)))
        #expect(try decoder.nextFrame() == settings)
    }

    @Test("an HTTP/1.1 request instead of the preface is a PROTOCOL_ERROR that says so, as soon as its method has arrived")
    func http1Request() throws {
        let request = Array("GET /index.html HTTP/1.1\r\nHost: example.test\r\n\r\n".utf8)
        let error = #expect(throws: H2ProtocolViolation.self) { try decodeAll(request, role: .server) }
        #expect(error?.code == .protocolError)
        #expect(error?.isConnectionError == true)
        #expect(error?.message.contains("do not look like HTTP/2") == true)
        #expect(error?.message.contains("HTTP/1 request (\"GET /index.html HTTP/1.1\")") == true)

        // Shares its first letter with the preface.
        let post = #expect(throws: H2ProtocolViolation.self) { try decodeAll(Array("POST /upload HTTP/1.1\r\n".utf8), role: .server) }
        #expect(post?.message.contains("\"POST /upload HTTP/1.1\"") == true)

        // One byte at a time: the error comes with the space after the method.
        var decoder = H2FrameDecoder(role: .server)
        for byte in "GET".utf8 {
            decoder.append([byte])
            #expect(try decoder.nextFrame() == nil)
        }
        decoder.append(Array(" ".utf8))
        let early = #expect(throws: H2ProtocolViolation.self) { try decoder.nextFrame() }
        #expect(early?.message.contains("HTTP/1 request (\"GET \")") == true)
    }

    @Test("anything else instead of the preface is a PROTOCOL_ERROR that says it does not look like HTTP/2")
    func garbage() throws {
        // The start of a TLS ClientHello: a TLS client talking to a cleartext server.
        let hello: [UInt8] = [0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc]
        let error = #expect(throws: H2ProtocolViolation.self) { try decodeAll(hello, role: .server) }
        #expect(error?.code == .protocolError)
        #expect(error?.isConnectionError == true)
        #expect(error?.message.contains("do not look like HTTP/2: 0x160301020001") == true)
        #expect(error?.message.contains("HTTP/1") == false)

        // Right up to its last part.
        let almost = Array("PRI * HTTP/2.0\r\n\r\nSM\r\nXX".utf8)
        let late = #expect(throws: H2ProtocolViolation.self) { try decodeAll(almost, role: .server) }
        #expect(late?.message.contains("do not look like HTTP/2") == true)

        // A client does not expect the preface: the same bytes read as a frame header.
        #expect(throws: H2ProtocolViolation.self) { try decodeAll(h2ConnectionPreface, role: .client) }
    }
}
