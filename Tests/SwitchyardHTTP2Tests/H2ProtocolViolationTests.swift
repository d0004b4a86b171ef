import SwitchyardHPACK
import Testing

@testable import SwitchyardHTTP2

/// Each rule a peer can break, with the code and kind (stream or connection) the RFC
/// names, and the other streams going on after a stream error.
@Suite struct H2ProtocolViolationTests {
    @Test("the peer's first frame must be SETTINGS")
    func firstFrameNotSettings() {
        var server = H2ConnectionStateMachine(role: .server)
        let events = server.receive(.ping(1, ack: false), now: .now)
        #expect(events.last == .connectionError(H2ProtocolViolation(connection: .protocolError, "the peer's first frame is PING, not SETTINGS")))
        var frames: [H2Outbound] = []
        server.takeOutbound(into: &frames)
        #expect(frames.map(\.frame).goAway?.code == .protocolError)
        #expect(server.receive(.settings([]), now: .now).isEmpty)
    }

    @Test("connection errors: each with its code", arguments: [
        (H2Frame.pushPromise(H2StreamID(1), promised: H2StreamID(2), headerBlock: [], endHeaders: true), H2ErrorCode.protocolError),
        (.continuation(H2StreamID(1), headerBlock: [], endHeaders: true), .protocolError),
        (.data(H2StreamID(7), payload: [1], endStream: false), .protocolError),  // idle
        (.rstStream(H2StreamID(9), .cancel), .protocolError),  // idle
        (.windowUpdate(H2StreamID(11), increment: 1), .protocolError),  // idle
        (.windowUpdate(.connection, increment: 0), .protocolError),
        (.data(.connection, payload: [1], endStream: false), .protocolError),
        (.headers(H2StreamID(2), headerBlock: [0x82], endStream: true, endHeaders: true), .protocolError),  // even id
        (.headers(H2StreamID(1), headerBlock: [0xff, 0xff, 0xff, 0xff, 0xff, 0xff], endStream: true, endHeaders: true), .compressionError),
        (.settings([H2Setting(.enablePush, 2)]), .protocolError),
        (.settings([H2Setting(.initialWindowSize, 0x8000_0000)]), .flowControlError),
    ])
    func connectionErrors(frame: H2Frame, code: H2ErrorCode) {
        var peer = H2ScriptedPeer(.server)
        peer.send(frame)
        #expect(peer.connectionError?.code == code)
        #expect(peer.takeFrames().last.map { if case .goAway(_, code, _) = $0 { true } else { false } } == true)
    }

    @Test("a client that sent ENABLE_PUSH 0 treats a PUSH_PROMISE, and SETTINGS_ENABLE_PUSH 1, as PROTOCOL_ERROR")
    func clientPushRules() throws {
        var peer = H2ScriptedPeer(.client)
        let id = try peer.machine.openStream(headers: H2Fields.request, endStream: true)
        peer.send(.pushPromise(id, promised: H2StreamID(2), headerBlock: [], endHeaders: true))
        #expect(peer.connectionError?.code == .protocolError)
        var other = H2ScriptedPeer(.client)
        other.send(.settings([H2Setting(.enablePush, 1)]))
        #expect(other.connectionError?.code == .protocolError)
    }

    @Test("any frame between HEADERS and its END_HEADERS is a connection PROTOCOL_ERROR")
    func frameInsideHeaderBlock() {
        var peer = H2ScriptedPeer(.server)
        let block = peer.encode(H2Fields.request)
        peer.send(.headers(H2StreamID(1), headerBlock: Array(block.prefix(5)), endStream: true, endHeaders: false))
        peer.send(.continuation(H2StreamID(1), headerBlock: Array(block.dropFirst(5).prefix(5)), endHeaders: false))
        #expect(peer.connectionError == nil)
        peer.send(.ping(1, ack: false))
        #expect(peer.connectionError?.code == .protocolError)

        var other = H2ScriptedPeer(.server)
        let otherBlock = other.encode(H2Fields.request)
        other.send(.headers(H2StreamID(1), headerBlock: Array(otherBlock.prefix(5)), endStream: true, endHeaders: false))
        other.send(.continuation(H2StreamID(3), headerBlock: Array(otherBlock.dropFirst(5)), endHeaders: true))
        #expect(other.connectionError?.code == .protocolError)
    }

    @Test("a block split over CONTINUATIONs decodes as one")
    func continuationReassembly() {
        var peer = H2ScriptedPeer(.server)
        let block = peer.encode(H2Fields.request)
        peer.send(.headers(H2StreamID(1), headerBlock: Array(block.prefix(5)), endStream: true, endHeaders: false))
        peer.send(.continuation(H2StreamID(1), headerBlock: Array(block.dropFirst(5).prefix(5)), endHeaders: false))
        peer.send(.continuation(H2StreamID(1), headerBlock: Array(block.dropFirst(10)), endHeaders: true))
        #expect(peer.events == [.streamOpened(H2StreamID(1), headers: H2Fields.request, endStream: true)])
    }

    @Test("a new stream id not above the last one is a connection PROTOCOL_ERROR")
    func streamIDNotIncreasing() {
        var peer = H2ScriptedPeer(.server)
        peer.send(peer.request(5, endStream: true))
        peer.send(peer.request(3, endStream: true))
        #expect(peer.connectionError?.code == .protocolError)
    }

    @Test("DATA on a stream closed normally is a connection STREAM_CLOSED; after END_STREAM a stream STREAM_CLOSED")
    func framesOnClosedStreams() throws {
        var peer = H2ScriptedPeer(.server)
        peer.send(peer.request(1, endStream: true))
        peer.send(peer.request(3))
        peer.send(.data(H2StreamID(1), payload: [1], endStream: false))
        #expect(peer.takeFrames().resets == [H2StreamID(1): .streamClosed])
        #expect(peer.events.last == .streamReset(H2StreamID(1), .streamClosed, processed: true))
        peer.send(.data(H2StreamID(3), payload: [2], endStream: true))
        #expect(peer.events.last == .data(H2StreamID(3), [2], endStream: true, flowControlledLength: 1))
        // Stream 3 closes once the server ends it too.
        try peer.machine.sendHeaders(H2StreamID(3), H2Fields.response + H2Fields.trailers, endStream: true)
        _ = peer.takeFrames()
        peer.send(.windowUpdate(H2StreamID(3), increment: 10))  // crossing frames are fine
        peer.send(.rstStream(H2StreamID(3), .cancel))
        #expect(peer.connectionError == nil)
        peer.send(.data(H2StreamID(3), payload: [3], endStream: false))
        #expect(peer.connectionError?.code == .streamClosed)
    }

    @Test("a second HEADERS without END_STREAM on an open stream is a stream PROTOCOL_ERROR; other streams go on")
    func secondHeadersWithoutEndStream() {
        var peer = H2ScriptedPeer(.server)
        peer.send(peer.request(1))
        peer.send(peer.request(3))
        peer.send(.headers(H2StreamID(1), headerBlock: peer.encode(H2Fields.trailers), endStream: false, endHeaders: true))
        #expect(peer.takeFrames().resets == [H2StreamID(1): .protocolError])
        peer.send(.headers(H2StreamID(3), headerBlock: peer.encode(H2Fields.trailers), endStream: true, endHeaders: true))
        #expect(peer.events.last == .headers(H2StreamID(3), H2Fields.trailers, endStream: true))
        #expect(peer.connectionError == nil)
    }

    @Test("malformed requests are refused stream by stream", arguments: [
        [HPACKField(":method", "POST"), HPACKField(":scheme", "http")],  // no :path
        [HPACKField(":method", "POST"), HPACKField(":scheme", "http"), HPACKField(":path", "")],
        H2Fields.request + [HPACKField("Upper", "x")],
        H2Fields.request + [HPACKField("connection", "close")],
        H2Fields.request + [HPACKField("te", "gzip")],
        H2Fields.request + [HPACKField("x-bad", "a\r\nb")],
        [HPACKField("x-first", "1")] + H2Fields.request,  // pseudo-header after a regular one
        H2Fields.request + [HPACKField(":status", "200")],
        [HPACKField(":method", "POST")] + H2Fields.request,  // :method twice
    ])
    func malformedRequest(fields: [HPACKField]) {
        var peer = H2ScriptedPeer(.server)
        peer.send(.headers(H2StreamID(1), headerBlock: peer.encode(fields), endStream: true, endHeaders: true))
        #expect(peer.takeFrames().resets == [H2StreamID(1): .protocolError])
        #expect(peer.events.isEmpty)  // never opened for the upper layer
        peer.send(peer.request(3, endStream: true))
        #expect(peer.events == [.streamOpened(H2StreamID(3), headers: H2Fields.request, endStream: true)])
    }

    @Test("pseudo-headers in trailers, and a response without exactly :status, are malformed")
    func malformedResponseAndTrailers() throws {
        var peer = H2ScriptedPeer(.client)
        let id = try peer.machine.openStream(headers: H2Fields.request, endStream: true)
        peer.send(.headers(id, headerBlock: peer.encode([HPACKField("content-type", "x")]), endStream: true, endHeaders: true))
        #expect(peer.events == [.streamReset(id, .protocolError, processed: true)])

        var other = H2ScriptedPeer(.client)
        let second = try other.machine.openStream(headers: H2Fields.request, endStream: true)
        other.send(.headers(second, headerBlock: other.encode(H2Fields.response), endStream: false, endHeaders: true))
        other.send(.headers(second, headerBlock: other.encode([HPACKField(":status", "200")]), endStream: true, endHeaders: true))
        #expect(other.events.last == .streamReset(second, .protocolError, processed: true))
        #expect(other.takeFrames().resets == [second: .protocolError])
    }

    @Test("a content-length that the DATA does not match is a stream PROTOCOL_ERROR")
    func contentLengthMismatch() {
        var peer = H2ScriptedPeer(.server)
        peer.send(peer.request(1, extra: [HPACKField("content-length", "3")]))
        peer.send(.data(H2StreamID(1), payload: [1, 2], endStream: true))
        #expect(peer.takeFrames().resets == [H2StreamID(1): .protocolError])
        peer.send(peer.request(3, extra: [HPACKField("content-length", "3")]))
        peer.send(.data(H2StreamID(3), payload: [1, 2, 3, 4], endStream: false))
        #expect(peer.takeFrames().resets == [H2StreamID(3): .protocolError])
        peer.send(peer.request(5, extra: [HPACKField("content-length", "3")]))
        peer.send(.data(H2StreamID(5), payload: [1, 2, 3], endStream: true))
        #expect(peer.events.last == .data(H2StreamID(5), [1, 2, 3], endStream: true, flowControlledLength: 3))
    }

    @Test("a RST_STREAM from the peer ends the stream; REFUSED_STREAM says it was not processed")
    func peerReset() throws {
        var peer = H2ScriptedPeer(.client)
        let first = try peer.machine.openStream(headers: H2Fields.request, endStream: false)
        let second = try peer.machine.openStream(headers: H2Fields.request, endStream: false)
        peer.send(.rstStream(first, .cancel))
        peer.send(.rstStream(second, .refusedStream))
        #expect(peer.events == [.streamReset(first, .cancel, processed: true), .streamReset(second, .refusedStream, processed: false)])
        #expect(throws: H2StreamError.self) { try peer.machine.sendData(first, [1], endStream: false, token: nil) }
        _ = peer.takeFrames()
        // A frame after the peer's own RST_STREAM is a stream error STREAM_CLOSED.
        peer.send(.data(first, payload: [1], endStream: false))
        #expect(peer.connectionError == nil)
        #expect(peer.takeFrames().resets == [first: .streamClosed])
    }
}
