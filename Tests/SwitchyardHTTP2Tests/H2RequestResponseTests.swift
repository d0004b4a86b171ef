import SwitchyardHPACK
import Testing

@testable import SwitchyardHTTP2

@Suite struct H2RequestResponseTests {
    @Test("the connection starts with each side's SETTINGS, their acknowledgements and the connection window")
    func settingsExchange() {
        var pair = H2ConnectionPair()
        #expect(pair.clientWrote.first?.frame == .settings(H2Configuration().settings(for: .client)))
        #expect(pair.serverWrote.first?.frame == .settings(H2Configuration().settings(for: .server)))
        #expect(pair.clientWrote.contains { $0.frame == .windowUpdate(.connection, increment: UInt32((1 << 20) - 65_535)) })
        #expect(pair.clientWrote.contains { $0.frame == .settingsAck })
        #expect(pair.serverWrote.contains { $0.frame == .settingsAck })
        #expect(pair.client.remoteSettings.maxConcurrentStreams == 100)
        #expect(pair.server.remoteSettings.enablePush == false)
        #expect(pair.client.localSettings.maxHeaderListSize == 16 << 10)
        #expect(pair.client.connectionSendWindow == 1 << 20)
        #expect(pair.takeClientEvents() == [.remoteSettingsChanged(pair.client.remoteSettings)])
        #expect(pair.takeServerEvents() == [.remoteSettingsChanged(pair.server.remoteSettings)])
    }

    @Test("a request with a body, a response with data and trailers, and both sides see the stream close")
    func requestResponseWithTrailers() throws {
        var pair = H2ConnectionPair()
        _ = pair.takeClientEvents()
        _ = pair.takeServerEvents()
        let id = try pair.client.openStream(headers: H2Fields.request, endStream: false)
        try pair.client.sendData(id, [1, 2, 3], endStream: true, token: H2WriteToken(7))
        pair.exchange()
        #expect(id == H2StreamID(1))
        #expect(
            pair.takeServerEvents() == [
                .streamOpened(id, headers: H2Fields.request, endStream: false),
                .data(id, [1, 2, 3], endStream: true, flowControlledLength: 3),
            ])
        #expect(pair.clientWrote.last?.writeTokens == [H2WriteToken(7)])

        try pair.server.sendHeaders(id, H2Fields.response, endStream: false)
        try pair.server.sendData(id, [9, 9], endStream: false, token: nil)
        try pair.server.sendHeaders(id, H2Fields.trailers, endStream: true)
        pair.exchange()
        #expect(
            pair.takeClientEvents() == [
                .headers(id, H2Fields.response, endStream: false),
                .data(id, [9, 9], endStream: false, flowControlledLength: 2),
                .headers(id, H2Fields.trailers, endStream: true),
                .streamClosed(id),
            ])
        #expect(pair.takeServerEvents() == [.streamClosed(id)])
        #expect(pair.client.openStreamCount == 0)
        #expect(pair.server.openStreamCount == 0)
    }

    @Test("a trailers-only response is response headers with END_STREAM")
    func trailersOnlyResponse() throws {
        var pair = H2ConnectionPair()
        let id = try pair.client.openStream(headers: H2Fields.request, endStream: true)
        pair.exchange()
        let fields = H2Fields.response + H2Fields.trailers
        try pair.server.sendHeaders(id, fields, endStream: true)
        pair.exchange()
        #expect(pair.takeClientEvents().suffix(2) == [.headers(id, fields, endStream: true), .streamClosed(id)])
        #expect(pair.takeServerEvents().suffix(2) == [.streamOpened(id, headers: H2Fields.request, endStream: true), .streamClosed(id)])
    }

    @Test("trailers wait behind the data still queued on their stream")
    func trailersAfterQueuedData() throws {
        var pair = H2ConnectionPair()
        let id = try pair.client.openStream(headers: H2Fields.request, endStream: true)
        pair.exchange()
        try pair.server.sendHeaders(id, H2Fields.response, endStream: false)
        try pair.server.sendData(id, [UInt8](repeating: 1, count: 100_000), endStream: false, token: nil)
        try pair.server.sendHeaders(id, H2Fields.trailers, endStream: true)
        pair.exchange()
        // The client never consumes: 65,535 octets pass, the trailers wait behind the rest.
        #expect(pair.server.queuedBytes(id) == 100_000 - 65_535)
        #expect(!pair.takeClientEvents().contains(.headers(id, H2Fields.trailers, endStream: true)))
        pair.client.consumed(id, bytes: 65_535)
        pair.exchange()
        let events = pair.takeClientEvents()
        #expect(events.suffix(2) == [.headers(id, H2Fields.trailers, endStream: true), .streamClosed(id)])
        #expect(pair.server.queuedBytes(id) == 0)
    }

    @Test("many concurrent streams each get their own response, data interleaved round robin")
    func manyConcurrentStreams() throws {
        var pair = H2ConnectionPair()
        var ids: [H2StreamID] = []
        for index in 0..<50 {
            let id = try pair.client.openStream(headers: H2Fields.request, endStream: false)
            try pair.client.sendData(id, [UInt8](repeating: UInt8(index), count: 20_000), endStream: true, token: H2WriteToken(UInt64(index)))
            ids.append(id)
        }
        pair.exchange()
        #expect(ids.map(\.rawValue) == Array(stride(from: 1, through: 99, by: 2)))
        var received: [H2StreamID: Int] = [:]
        var ended = Set<H2StreamID>()
        for event in pair.takeServerEvents() {
            if case .data(let id, let bytes, let end, _) = event {
                #expect(bytes.allSatisfy { $0 == UInt8(ids.firstIndex(of: id) ?? 0) })
                received[id, default: 0] += bytes.count
                if end { ended.insert(id) }
            }
        }
        // 50 x 20,000 fits in the 1 MiB connection window: everything arrived.
        #expect(ended.count == 50)
        #expect(received.values.allSatisfy { $0 == 20_000 })
        // Round robin: the first 50 DATA frames are one per stream.
        let firstFrames = pair.clientWrote.compactMap { outbound -> H2StreamID? in
            if case .data(let id, _, _, _) = outbound.frame { return id }
            return nil
        }.prefix(50)
        #expect(Set(firstFrames).count == 50)
        let tokens = pair.clientWrote.flatMap(\.writeTokens)
        #expect(Set(tokens).count == 50)

        for id in ids.reversed() { try pair.server.sendHeaders(id, H2Fields.response + H2Fields.trailers, endStream: true) }
        pair.exchange()
        #expect(pair.takeClientEvents().filter { if case .streamClosed = $0 { true } else { false } }.count == 50)
        #expect(pair.client.openStreamCount == 0 && pair.server.openStreamCount == 0)
    }

    @Test("a header block larger than the peer's frame size goes out as HEADERS and CONTINUATIONs")
    func largeHeaderBlock() throws {
        var server = H2Configuration()
        server.maxHeaderListSize = 64 << 10
        var pair = H2ConnectionPair(server: server)
        let big = HPACKField("x-big", String(repeating: "a", count: 12_000), indexing: .withoutIndexing)
        let fields = H2Fields.request + [big, HPACKField("x-big-2", String(repeating: "b", count: 12_000), indexing: .withoutIndexing)]
        var encoder = HPACKEncoder(configuration: .init(huffman: false))
        #expect(encoder.encode(fields).count > 16_384)
        let id = try pair.client.openStream(headers: fields, endStream: true)
        pair.exchange()
        #expect(pair.clientWrote.contains { if case .continuation(id, _, true) = $0.frame { true } else { false } })
        #expect(pair.takeServerEvents().contains(.streamOpened(id, headers: fields, endStream: true)))
    }

    @Test("the calls that send fail with their code and change nothing")
    func sendErrors() throws {
        var pair = H2ConnectionPair()
        #expect(throws: H2StreamError.self) { _ = try pair.server.openStream(headers: H2Fields.request, endStream: true) }
        #expect(throws: H2StreamError.self) { try pair.client.sendData(H2StreamID(1), [1], endStream: false, token: nil) }
        let id = try pair.client.openStream(headers: H2Fields.request, endStream: true)
        do {
            try pair.client.sendData(id, [1], endStream: false, token: nil)
            Issue.record("data after END_STREAM was accepted")
        } catch {
            #expect(error.code == .streamEnded)
        }
        pair.exchange()
        do {
            try pair.server.sendData(id, [1], endStream: false, token: nil)
            Issue.record("data before the response's headers was accepted")
        } catch {
            #expect(error.code == .notAllowed)
        }
        try pair.server.sendHeaders(id, H2Fields.response, endStream: false)
        do {
            try pair.server.sendHeaders(id, H2Fields.trailers, endStream: false)
            Issue.record("trailers without END_STREAM were accepted")
        } catch {
            #expect(error.code == .notAllowed)
        }
        #expect(pair.server.queuedBytes(id) == 0)
    }

    @Test("a header list above the peer's SETTINGS_MAX_HEADER_LIST_SIZE is refused before it is sent")
    func headerListTooLargeForPeer() throws {
        var server = H2Configuration()
        server.maxHeaderListSize = 1000
        var pair = H2ConnectionPair(server: server)
        let fields = H2Fields.request + [HPACKField("x-big", String(repeating: "a", count: 1000))]
        do {
            _ = try pair.client.openStream(headers: fields, endStream: true)
            Issue.record("an over-large request was accepted")
        } catch {
            #expect(error.code == .headerListTooLarge)
        }
        #expect(pair.client.openStreamCount == 0)
        #expect(try pair.client.openStream(headers: H2Fields.request, endStream: true) == H2StreamID(1))
    }

    @Test("a PING is answered and both sides hear of it")
    func ping() {
        var pair = H2ConnectionPair()
        _ = pair.takeClientEvents()
        _ = pair.takeServerEvents()
        pair.client.sendPing(42)
        pair.exchange()
        #expect(pair.takeServerEvents() == [.pingReceived(42)])
        #expect(pair.takeClientEvents() == [.pingAcknowledged(42)])
    }

    @Test("a client's HEAD response may announce a content-length its empty body does not match")
    func headResponseContentLength() throws {
        var peer = H2ScriptedPeer(.client)
        let head = [HPACKField(":method", "HEAD")] + H2Fields.request.dropFirst()
        let id = try peer.machine.openStream(headers: Array(head), endStream: true)
        let fields = [HPACKField(":status", "200"), HPACKField("content-length", "1234")]
        peer.send(.headers(id, headerBlock: peer.encode(fields), endStream: true, endHeaders: true))
        #expect(peer.events == [.headers(id, fields, endStream: true), .streamClosed(id)])
    }

    @Test("an informational response comes before the final one")
    func informationalResponse() throws {
        var peer = H2ScriptedPeer(.client)
        let id = try peer.machine.openStream(headers: H2Fields.request, endStream: true)
        let informational = [HPACKField(":status", "103")]
        peer.send(.headers(id, headerBlock: peer.encode(informational), endStream: false, endHeaders: true))
        peer.send(.headers(id, headerBlock: peer.encode(H2Fields.response), endStream: true, endHeaders: true))
        #expect(
            peer.events == [
                .headers(id, informational, endStream: false), .headers(id, H2Fields.response, endStream: true), .streamClosed(id),
            ])
    }
}
