import SwitchyardHPACK
import Testing

@testable import SwitchyardHTTP2

@Suite struct H2FlowControlTests {
    @Test("a reader that never consumes stops the sender at exactly the stream window; consuming half opens it")
    func unreadStreamHoldsOneWindow() throws {
        var pair = H2ConnectionPair()
        let id = try pair.client.openStream(headers: H2Fields.request, endStream: false)
        try pair.client.sendData(id, [UInt8](repeating: 7, count: 200_000), endStream: false, token: nil)
        pair.exchange()
        #expect(pair.client.queuedBytes(id) == 200_000 - 65_535)
        let received = pair.takeServerEvents().reduce(0) { total, event in
            if case .data(_, let bytes, _, _) = event { total + bytes.count } else { total }
        }
        #expect(received == 65_535)
        // Less than half: no WINDOW_UPDATE.
        pair.server.consumed(id, bytes: 30_000)
        pair.exchange()
        #expect(pair.client.queuedBytes(id) == 200_000 - 65_535)
        pair.server.consumed(id, bytes: 5_000)
        pair.exchange()
        #expect(pair.client.queuedBytes(id) == 200_000 - 65_535 - 35_000)
        #expect(pair.takeClientEvents().contains(.windowOpened(id)))
    }

    @Test("the connection window bounds all streams together and is given back as they are consumed")
    func connectionWindow() throws {
        var server = H2Configuration()
        server.initialStreamWindowSize = 1 << 20
        server.connectionWindowSize = 100_000
        var pair = H2ConnectionPair(server: server)
        let first = try pair.client.openStream(headers: H2Fields.request, endStream: false)
        let second = try pair.client.openStream(headers: H2Fields.request, endStream: false)
        try pair.client.sendData(first, [UInt8](repeating: 1, count: 80_000), endStream: false, token: nil)
        try pair.client.sendData(second, [UInt8](repeating: 2, count: 80_000), endStream: false, token: nil)
        pair.exchange()
        #expect(pair.client.queuedBytes(first) + pair.client.queuedBytes(second) == 160_000 - 100_000)
        #expect(pair.client.connectionSendWindow == 0)
        pair.server.consumed(first, bytes: 50_000)
        pair.exchange()
        #expect(pair.client.queuedBytes(first) + pair.client.queuedBytes(second) == 10_000)
        #expect(pair.takeClientEvents().contains(.windowOpened(.connection)))
    }

    @Test("a stream reset with unread data gives its octets back to the connection window")
    func resetReturnsConnectionWindow() throws {
        var server = H2Configuration()
        server.connectionWindowSize = 65_535
        var pair = H2ConnectionPair(server: server)
        let first = try pair.client.openStream(headers: H2Fields.request, endStream: false)
        try pair.client.sendData(first, [UInt8](repeating: 1, count: 65_535), endStream: false, token: nil)
        pair.exchange()
        #expect(pair.client.connectionSendWindow == 0)
        pair.server.resetStream(first, code: .cancel)
        pair.exchange()
        #expect(pair.client.connectionSendWindow == 65_535)
        #expect(pair.takeClientEvents().contains(.streamReset(first, .cancel, processed: true)))
    }

    @Test("DATA on a stream this side reset is ignored, and its window given back")
    func dataAfterOwnReset() throws {
        var peer = H2ScriptedPeer(.server)
        peer.send(peer.request(1))
        peer.machine.resetStream(H2StreamID(1), code: .cancel)
        let events = peer.send(.data(H2StreamID(1), payload: ArraySlice(repeating: 0, count: 40_000), endStream: false))
        #expect(events.isEmpty)
        // Given back (batched: the WINDOW_UPDATE waits for half the connection window).
        #expect(peer.machine.connectionReceiveWindow + peer.machine.connectionPendingGrant == 1 << 20)
        #expect(peer.connectionError == nil)
    }

    @Test("a peer sending past the stream window is a stream FLOW_CONTROL_ERROR; past the connection window a connection one")
    func peerExceedsWindows() {
        var peer = H2ScriptedPeer(.server)
        peer.send(peer.request(1))
        peer.send(peer.request(3))
        peer.send(.data(H2StreamID(1), payload: ArraySlice(repeating: 0, count: 65_536), endStream: false))
        #expect(peer.takeFrames().resets == [H2StreamID(1): .flowControlError])
        #expect(peer.events.last == .streamReset(H2StreamID(1), .flowControlError, processed: true))
        peer.send(.data(H2StreamID(3), payload: [1], endStream: false))
        #expect(peer.events.last == .data(H2StreamID(3), [1], endStream: false, flowControlledLength: 1))

        var configuration = H2Configuration()
        configuration.initialStreamWindowSize = 1 << 20
        var other = H2ScriptedPeer(.server, configuration)
        other.send(other.request(1))
        other.send(.data(H2StreamID(1), payload: ArraySlice(repeating: 0, count: (1 << 20) + 1), endStream: false))
        #expect(other.connectionError?.code == .flowControlError)
        #expect(other.takeFrames().goAway?.code == .flowControlError)
    }

    @Test("a WINDOW_UPDATE past 2^31 - 1 is a FLOW_CONTROL_ERROR, of the stream or of the connection")
    func windowOverflow() {
        var peer = H2ScriptedPeer(.server)
        peer.send(peer.request(1))
        peer.send(.windowUpdate(H2StreamID(1), increment: 0x7fff_ffff))
        #expect(peer.takeFrames().resets == [H2StreamID(1): .flowControlError])
        peer.send(.windowUpdate(.connection, increment: 0x7fff_ffff))
        #expect(peer.connectionError?.code == .flowControlError)
    }

    @Test("a new SETTINGS_INITIAL_WINDOW_SIZE mid-stream moves the open streams' send windows by the delta")
    func initialWindowChangeMidStream() throws {
        var peer = H2ScriptedPeer(.client)
        let id = try peer.machine.openStream(headers: H2Fields.request, endStream: false)
        let idle = try peer.machine.openStream(headers: H2Fields.request, endStream: false)
        peer.send(.windowUpdate(.connection, increment: 1 << 20))
        try peer.machine.sendData(id, [UInt8](repeating: 1, count: 70_000), endStream: false, token: nil)
        _ = peer.takeFrames()
        #expect(peer.machine.queuedBytes(id) == 70_000 - 65_535)
        peer.send(.settings([H2Setting(.initialWindowSize, 65_535 + 1000)]))
        #expect(peer.events.contains(.windowOpened(id)))
        let frames = peer.takeFrames()
        #expect(frames.contains(.settingsAck))
        #expect(peer.machine.queuedBytes(id) == 70_000 - 65_535 - 1000)
        // Lowered: the window goes negative and nothing moves until it is positive again.
        peer.send(.settings([H2Setting(.initialWindowSize, 0)]))
        peer.send(.windowUpdate(id, increment: 60_000))
        _ = peer.takeFrames()
        #expect(peer.machine.queuedBytes(id) == 70_000 - 65_535 - 1000)
        // The idle stream's window is 0 now; 100 more, then the largest initial window
        // takes it past 2^31 - 1.
        peer.send(.windowUpdate(idle, increment: 100))
        peer.send(.settings([H2Setting(.initialWindowSize, 0x7fff_ffff)]))
        #expect(peer.connectionError?.code == .flowControlError)
    }

    @Test("DATA frames cut from one large write share its storage; only a frame that gathers two writes copies")
    func framesShareTheWrite() throws {
        var pair = H2ConnectionPair()
        let id = try pair.client.openStream(headers: H2Fields.request, endStream: false)
        let write = [UInt8](repeating: 7, count: 40_000)
        try pair.client.sendData(id, [0, 0, 0, 0x9c, 0x40], endStream: false, token: nil)
        try pair.client.sendData(id, write, endStream: false, token: nil)
        var outbound: [H2Outbound] = []
        pair.client.takeOutbound(into: &outbound)
        let payloads = outbound.compactMap { item -> ArraySlice<UInt8>? in
            if case .data(_, let payload, _, _) = item.frame { payload } else { nil }
        }
        #expect(payloads.map(\.count) == [16_384, 16_384, 40_005 - 32_768])
        #expect(payloads.reduce([], +) == [0, 0, 0, 0x9c, 0x40] + write)
        let storage = write.withUnsafeBytes { UInt(bitPattern: $0.baseAddress!)..<(UInt(bitPattern: $0.baseAddress!) + UInt($0.count)) }
        let starts = payloads.map { payload in payload.withUnsafeBytes { UInt(bitPattern: $0.baseAddress!) } }
        #expect(!storage.contains(starts[0]))
        #expect(storage.contains(starts[1]) && storage.contains(starts[2]))
    }

    @Test("a smaller SETTINGS_MAX_FRAME_SIZE is not possible, a larger one makes larger DATA frames")
    func maxFrameSize() throws {
        var peer = H2ScriptedPeer(.client, peerSettings: [H2Setting(.maxFrameSize, 32_768), H2Setting(.initialWindowSize, 100_000)])
        let id = try peer.machine.openStream(headers: H2Fields.request, endStream: false)
        try peer.machine.sendData(id, [UInt8](repeating: 1, count: 50_000), endStream: true, token: nil)
        let sizes = peer.takeFrames().compactMap { frame -> Int? in
            if case .data(_, let payload, _, _) = frame { payload.count } else { nil }
        }
        #expect(sizes == [32_768, 50_000 - 32_768])
        peer.send(.settings([H2Setting(.maxFrameSize, 100)]))
        #expect(peer.connectionError?.code == .protocolError)
    }
}

@Suite struct H2GoAwayTests {
    @Test("a server's graceful shutdown: GOAWAY(2^31 - 1) and PING, then GOAWAY(last), open streams finish, drained")
    func gracefulDrain() throws {
        var pair = H2ConnectionPair()
        let id = try pair.client.openStream(headers: H2Fields.request, endStream: true)
        pair.exchange()
        _ = pair.takeClientEvents()
        pair.server.beginGracefulShutdown(now: pair.now)
        pair.exchange()
        let goAways = pair.serverWrote.compactMap { outbound -> H2StreamID? in
            if case .goAway(let last, .noError, _) = outbound.frame { last } else { nil }
        }
        #expect(goAways == [.maximum, id])
        #expect(!pair.client.canOpenStream)
        #expect(pair.takeClientEvents().contains(.goAwayReceived(lastStreamID: id, .noError, debugData: [])))
        #expect(!pair.takeServerEvents().contains(.drained))
        try pair.server.sendHeaders(id, H2Fields.response + H2Fields.trailers, endStream: true)
        pair.exchange()
        #expect(pair.takeServerEvents() == [.streamClosed(id), .drained])
        #expect(pair.takeClientEvents() == [.headers(id, H2Fields.response + H2Fields.trailers, endStream: true), .streamClosed(id), .drained])
    }

    @Test("after the final GOAWAY, a new stream is refused; streams above a received GOAWAY's last id were not processed")
    func refusedAfterGoAway() throws {
        var peer = H2ScriptedPeer(.server)
        peer.send(peer.request(1))
        peer.machine.beginGracefulShutdown(now: peer.now)
        peer.send(peer.request(3))  // in flight before the PING's acknowledgement: accepted
        peer.send(.ping(H2ConnectionStateMachine.shutdownPingPayload, ack: true))
        let goAways = peer.takeFrames().compactMap { frame -> H2StreamID? in
            if case .goAway(let last, .noError, _) = frame { last } else { nil }
        }
        #expect(goAways == [.maximum, H2StreamID(3)])
        peer.send(peer.request(5))
        #expect(peer.takeFrames().resets == [H2StreamID(5): .refusedStream])
        #expect(peer.machine.openStreamCount == 2)

        var client = H2ScriptedPeer(.client)
        let first = try client.machine.openStream(headers: H2Fields.request, endStream: true)
        let second = try client.machine.openStream(headers: H2Fields.request, endStream: true)
        client.send(.goAway(lastStreamID: first, .noError, debugData: []))
        #expect(
            client.events == [
                .goAwayReceived(lastStreamID: first, .noError, debugData: []), .streamReset(second, .refusedStream, processed: false),
            ])
        #expect(!client.machine.canOpenStream)
        do {
            _ = try client.machine.openStream(headers: H2Fields.request, endStream: true)
            Issue.record("a stream opened after GOAWAY")
        } catch {
            #expect(error.code == .goingAway)
        }
        client.send(.headers(first, headerBlock: client.encode(H2Fields.response + H2Fields.trailers), endStream: true, endHeaders: true))
        #expect(client.events.suffix(2) == [.streamClosed(first), .drained])
    }

    @Test("a server whose PING is never acknowledged sends the final GOAWAY after the timeout")
    func shutdownPingTimeout() {
        var peer = H2ScriptedPeer(.server)
        peer.machine.beginGracefulShutdown(now: peer.now)
        _ = peer.takeFrames()
        peer.advance(by: .seconds(11))
        peer.send(.ping(1, ack: false))
        #expect(peer.takeFrames().contains(.goAway(lastStreamID: .connection, .noError, debugData: [])))
        #expect(peer.events.last == .drained)
    }

    @Test("abort sends GOAWAY with the code and message, then nothing")
    func abort() throws {
        var pair = H2ConnectionPair()
        let id = try pair.client.openStream(headers: H2Fields.request, endStream: false)
        try pair.client.sendData(id, [1, 2], endStream: false, token: nil)
        pair.client.abort(.internalError, message: "bye")
        var frames: [H2Outbound] = []
        pair.client.takeOutbound(into: &frames)
        #expect(frames.last?.frame == .goAway(lastStreamID: .connection, .internalError, debugData: Array("bye".utf8)))
        #expect(!frames.contains { if case .data = $0.frame { true } else { false } })
        #expect(throws: H2StreamError.self) { try pair.client.sendData(id, [1], endStream: false, token: nil) }
        pair.client.sendPing(1)
        frames.removeAll()
        pair.client.takeOutbound(into: &frames)
        #expect(frames.isEmpty)
    }
}
