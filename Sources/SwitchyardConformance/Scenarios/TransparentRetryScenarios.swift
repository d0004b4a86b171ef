import Switchyard
import SwitchyardCalls
import SwitchyardHPACK
import SwitchyardHTTP2

/// Transparent retry (gRPC's A6): a channel's call that reached the server but not its
/// application, and heard nothing from it, starts again once, unseen by its handler. The
/// server is a raw HTTP/2 peer (`RawHTTP2Peer`) that refuses streams as a scenario says.
extension ConformanceScenario {
    /// 79. A refused stream is retried on the same connection.
    public static let refusedStreamIsRetried = ConformanceScenario(
        "A server that refuses a call's stream (RST_STREAM REFUSED_STREAM) before answering it sees the call again on a second stream of the same connection, with its metadata and its messages once each and in order (also one written around the refusal), and the call ends OK with the reply; the handler hears each write reported once, and nothing of the retry",
        checklist: ["E6"], timeLimit: .seconds(60)
    ) { context in
        let listener = try await context.listen()
        defer { listener.close() }
        let channel = CallChannel(target: context.endpoint(of: listener), transport: context.client)
        defer { channel.close() }
        let messages = (0..<3).map { ConformancePattern.bytes(count: 100 * ($0 + 1), seed: UInt64(79_000 + $0)) }
        let reply = ConformancePattern.bytes(count: 50, seed: 79_100)
        let recorder = CallRecorder()
        var metadata = CallMetadata()
        try metadata.addString("79", forKey: "x-retry")
        let sent = metadata
        let call = try await context.step("starting a call", seconds: 15) {
            try await channel.startCall(
                method: "/switchyard.Retry/Refused", metadata: sent, options: CallConfiguration(enableFlowControl: true), handler: recorder)
        }
        call.receiveNextMessage()
        call.send(messages[0])
        call.send(messages[1])
        let peer = try await acceptRawServer(context, listener)
        defer { peer.close() }
        try await context.step("the raw server reading the first two messages on stream 1") {
            try await peer.readUntil("two messages on stream 1") { (peer.streams[1]?.messages?.count ?? 0) >= 2 }
        }
        try await context.step("the raw server refusing stream 1") { try await peer.send(rstStream(1, .refusedStream)) }
        // Written around the refusal: on stream 1 before the client read the reset, or
        // kept for the retry; either way stream 3 carries it once, after the other two.
        call.send(messages[2])
        call.finishSending()
        let retried = try await context.step("the raw server reading the retried call on stream 3", seconds: 20) { try await peer.readToEnd(of: 3) }
        try context.expect(retried.reset == nil && retried.ended, "the retried stream 3 did not end with END_STREAM: \(retried.summary)")
        try context.expectEqual(retried.value(":path", inBlock: 0), "/switchyard.Retry/Refused", "the retried stream's :path")
        try context.expectEqual(retried.value("x-retry", inBlock: 0), "79", "the retried stream's metadata")
        guard let replayed = retried.messages else { try context.fail("stream 3's DATA (\(retried.data.count) bytes) is not whole gRPC messages") }
        try context.expectEqual(replayed.map(\.count), messages.map(\.count), "the sizes of the messages on the retried stream, in order")
        for (index, message) in messages.enumerated() {
            try context.expectBytes(replayed[index], message, "message \(index) on the retried stream")
        }
        let answer = peer.headers(3, RawHTTP2Peer.responseHeaders, endStream: false) + peer.data(3, RawHTTP2Peer.message(reply), endStream: false)
            + peer.headers(3, [HPACKField("grpc-status", "0")], endStream: true)
        try await context.step("the raw server answering stream 3") { try await peer.send(answer) }
        try context.expectOK(try await context.status(of: recorder, "the retried call", quiet: quietLimit), "the retried call")
        let events = recorder.snapshot
        try context.expectEqual(events.messages.count, 1, "messages the retried call received")
        try context.expectBytes(events.messages.first ?? [], reply, "the reply to the retried call")
        try context.expectEqual(events.writes, messages.count, "didWriteData reports (one per message, none for a replay)")
        try context.expectWellBehaved(recorder, "the retried call")
        let opened = peer.streams.keys.filter { $0 % 2 == 1 }.sorted()
        try context.expectEqual(opened, [1, 3], "the streams the client opened")
        try context.expect(peer.goAway == nil && !peer.endOfStream, "the client ended the raw server's connection")
        try await context.waitUntil(seconds: 5, quiet: quietLimit, "the channel has no open call left (\(channel.openCalls))") { channel.openCalls == 0 }
        context.log("stream 1 refused after \(peer.streams[1]?.messages?.count ?? 0) messages; stream 3 carried the 3 messages, once each, and the call ended OK")
    }

    /// 80. A stream above a GOAWAY's last stream is retried on a new connection.
    public static let goAwayUnprocessedStreamIsRetried = ConformanceScenario(
        "A server that answers a call's stream with GOAWAY whose last stream is 0 (the stream was not processed) sees the call again on a second connection, its metadata and messages once each and in order, and the call ends OK with the reply there",
        checklist: ["E6", "F8"], timeLimit: .seconds(60)
    ) { context in
        let listener = try await context.listen()
        defer { listener.close() }
        let channel = CallChannel(target: context.endpoint(of: listener), transport: context.client)
        defer { channel.close() }
        let messages = (0..<2).map { ConformancePattern.bytes(count: 1000 * ($0 + 1), seed: UInt64(80_000 + $0)) }
        let reply = ConformancePattern.bytes(count: 70, seed: 80_100)
        let recorder = CallRecorder()
        var metadata = CallMetadata()
        try metadata.addString("80", forKey: "x-retry")
        let sent = metadata
        let call = try await context.step("starting a call", seconds: 15) {
            try await channel.startCall(method: "/switchyard.Retry/GoAway", metadata: sent, handler: recorder)
        }
        for message in messages { call.send(message) }
        call.finishSending()
        let first = try await acceptRawServer(context, listener)
        defer { first.close() }
        let seen = try await context.step("the first raw server reading stream 1") { try await first.readToEnd(of: 1) }
        try context.expectEqual(seen.messages?.count, messages.count, "messages on stream 1 before the GOAWAY")
        var goAway: [UInt8] = []
        H2FrameEncoder.encode(.goAway(lastStreamID: H2StreamID(0), .noError, debugData: []), into: &goAway)
        let frames = goAway
        try await context.step("the first raw server sending GOAWAY(0)") { try await first.send(frames) }
        // The retry's connect shows the client read the GOAWAY: only then does the first
        // server close (a close with the client's bytes unread would be a reset, which can
        // discard the GOAWAY before the client reads it).
        let second = try await acceptRawServer(context, listener)
        defer { second.close() }
        first.close()
        let retried = try await context.step("the second raw server reading the retried call", seconds: 20) { try await second.readToEnd(of: 1) }
        try context.expect(retried.reset == nil, "the retried stream was reset: \(retried.summary)")
        try context.expectEqual(retried.value(":path", inBlock: 0), "/switchyard.Retry/GoAway", "the retried stream's :path")
        try context.expectEqual(retried.value("x-retry", inBlock: 0), "80", "the retried stream's metadata")
        guard let replayed = retried.messages else { try context.fail("the retried stream's DATA (\(retried.data.count) bytes) is not whole gRPC messages") }
        try context.expectEqual(replayed.map(\.count), messages.map(\.count), "the sizes of the messages on the retried stream, in order")
        for (index, message) in messages.enumerated() {
            try context.expectBytes(replayed[index], message, "message \(index) on the retried stream")
        }
        let answer = second.headers(1, RawHTTP2Peer.responseHeaders, endStream: false) + second.data(1, RawHTTP2Peer.message(reply), endStream: false)
            + second.headers(1, [HPACKField("grpc-status", "0")], endStream: true)
        try await context.step("the second raw server answering") { try await second.send(answer) }
        try context.expectOK(try await context.status(of: recorder, "the retried call", quiet: quietLimit), "the retried call")
        let events = recorder.snapshot
        try context.expectEqual(events.messages.count, 1, "messages the retried call received")
        try context.expectBytes(events.messages.first ?? [], reply, "the reply to the retried call")
        try context.expectWellBehaved(recorder, "the retried call")
        try context.expectEqual(second.streams.keys.filter { $0 % 2 == 1 }.sorted(), [1], "the streams the client opened on the second connection")
        try await context.waitUntil(seconds: 5, quiet: quietLimit, "the channel has no open call left (\(channel.openCalls))") { channel.openCalls == 0 }
        context.log("GOAWAY(0) on the first connection; the call went on over a second one and ended OK")
    }

    /// 81. A call that heard from the server is not retried.
    public static let answeredRefusedStreamIsNotRetried = ConformanceScenario(
        "A server that sends a call's response headers and then refuses its stream (RST_STREAM REFUSED_STREAM) ends the call unavailable (stream refused), with no retry: the channel's next call is the next stream",
        checklist: ["E6"], timeLimit: .seconds(60)
    ) { context in
        let listener = try await context.listen()
        defer { listener.close() }
        let channel = CallChannel(target: context.endpoint(of: listener), transport: context.client)
        defer { channel.close() }
        let recorder = CallRecorder()
        let call = try await context.startCall(on: channel, handler: recorder)
        call.send(ConformancePattern.bytes(count: 100, seed: 81_000))
        let peer = try await acceptRawServer(context, listener)
        defer { peer.close() }
        try await context.step("the raw server reading the message on stream 1") {
            try await peer.readUntil("a message on stream 1") { (peer.streams[1]?.messages?.count ?? 0) >= 1 }
        }
        let refusal = peer.headers(1, RawHTTP2Peer.responseHeaders, endStream: false) + rstStream(1, .refusedStream)
        try await context.step("the raw server answering, then refusing stream 1") { try await peer.send(refusal) }
        let status = try await context.status(of: recorder, "the answered, refused call", quiet: quietLimit)
        try context.expectStatus(status, code: .unavailable, reason: .streamRefused, "the answered, refused call")
        try context.expectWellBehaved(recorder, "the answered, refused call")
        try await expectNextCallIsNextStream(context, channel, peer, stream: 3, seed: 81_100)
    }

    /// 82. A call that wrote more than the retry buffer is not retried.
    public static let refusalPastRetryBufferIsNotRetried = ConformanceScenario(
        "A call that wrote more than the channel's retryBufferSize (here 1,024 bytes) before its stream was refused is not retried and ends unavailable (stream refused); a call within it on the same channel is retried",
        checklist: ["E6"], timeLimit: .seconds(60)
    ) { context in
        let listener = try await context.listen()
        defer { listener.close() }
        var configuration = ChannelConfiguration()
        configuration.retryBufferSize = 1024
        let channel = CallChannel(target: context.endpoint(of: listener), transport: context.client, configuration: configuration)
        defer { channel.close() }
        let recorder = CallRecorder()
        let call = try await context.startCall(on: channel, handler: recorder)
        // Two messages of 600 bytes: 1,210 bytes of frames with their prefixes, over the bound.
        call.send(ConformancePattern.bytes(count: 600, seed: 82_000))
        call.send(ConformancePattern.bytes(count: 600, seed: 82_001))
        let peer = try await acceptRawServer(context, listener)
        defer { peer.close() }
        try await context.step("the raw server reading two messages on stream 1") {
            try await peer.readUntil("two messages on stream 1") { (peer.streams[1]?.messages?.count ?? 0) >= 2 }
        }
        try await context.step("the raw server refusing stream 1") { try await peer.send(rstStream(1, .refusedStream)) }
        let status = try await context.status(of: recorder, "the call past the retry buffer", quiet: quietLimit)
        try context.expectStatus(status, code: .unavailable, reason: .streamRefused, "the call past the retry buffer")
        try context.expectWellBehaved(recorder, "the call past the retry buffer")

        // Within the bound on the same channel: retried (stream 3 refused, stream 5 served).
        let small = ConformancePattern.bytes(count: 600, seed: 82_100)
        let within = CallRecorder()
        let second = try await context.startCall(on: channel, handler: within)
        second.send(small)
        second.finishSending()
        _ = try await context.step("the raw server reading stream 3") { try await peer.readToEnd(of: 3) }
        try await context.step("the raw server refusing stream 3") { try await peer.send(rstStream(3, .refusedStream)) }
        let retried = try await context.step("the raw server reading the retry on stream 5") { try await peer.readToEnd(of: 5) }
        try context.expectEqual(retried.messages?.count, 1, "messages on the retried stream 5: \(retried.summary)")
        try context.expectBytes(retried.messages?.first ?? [], small, "the message on the retried stream 5")
        try await context.step("the raw server answering stream 5") {
            try await peer.send(peer.headers(5, RawHTTP2Peer.responseHeaders, endStream: false) + peer.headers(5, [HPACKField("grpc-status", "0")], endStream: true))
        }
        try context.expectOK(try await context.status(of: within, "the call within the retry buffer", quiet: quietLimit), "the call within the retry buffer")
        try context.expectWellBehaved(within, "the call within the retry buffer")
        try await expectNextCallIsNextStream(context, channel, peer, stream: 7, seed: 82_200)
    }

    /// 83. A retry's connect follows the call's fail-fast, deadline and cancellation.
    public static let retryFollowsCallOptions = ConformanceScenario(
        "Calls whose streams a GOAWAY left unprocessed, retried while the server no longer listens: a fail-fast call ends with the new connect's error (unavailable, refused), a wait-for-ready call waits and ends at its deadline (deadlineExceeded), and one cancelled while it waits ends cancelled at once",
        checklist: ["J5", "F5", "F7"], timeLimit: .seconds(60)
    ) { context in
        let listener = try await context.listen()
        let channel = CallChannel(target: context.endpoint(of: listener), transport: context.client)
        defer { channel.close() }
        var waitForReady = CallConfiguration(timeout: .seconds(3))
        waitForReady.waitForReady = true
        var cancellable = CallConfiguration()
        cancellable.waitForReady = true
        let options = [CallConfiguration(), waitForReady, cancellable]
        var calls: [(call: Call, recorder: CallRecorder)] = []
        for option in options {
            let recorder = CallRecorder()
            let call = try await context.startCall(on: channel, options: option, handler: recorder)
            call.send(ConformancePattern.bytes(count: 100, seed: UInt64(83_000 + calls.count)))
            call.finishSending()
            calls.append((call, recorder))
        }
        let peer = try await acceptRawServer(context, listener)
        defer { peer.close() }
        try await context.step("the raw server reading streams 1, 3 and 5") {
            try await peer.readUntil("streams 1, 3 and 5 ended") { [1, 3, 5].allSatisfy { peer.streams[$0]?.ended == true } }
        }
        listener.close()
        var goAway: [UInt8] = []
        H2FrameEncoder.encode(.goAway(lastStreamID: H2StreamID(0), .noError, debugData: []), into: &goAway)
        let frames = goAway
        try await context.step("the raw server sending GOAWAY(0)") { try await peer.send(frames) }

        let failFast = try await context.status(of: calls[0].recorder, "the fail-fast call", quiet: quietLimit)
        try context.expectStatus(failFast, code: .unavailable, reason: .refused, "the fail-fast call whose retry's connect was refused")
        try await KitClock.sleep(for: .milliseconds(200))
        try context.expect(calls[1].recorder.status == nil && calls[2].recorder.status == nil, "a wait-for-ready call ended at the refused connect: \(String(describing: calls[1].recorder.status)), \(String(describing: calls[2].recorder.status))")
        let cancelled = KitClock.now
        calls[2].call.cancel()
        let cancelStatus = try await context.status(of: calls[2].recorder, "the cancelled wait-for-ready call", seconds: 2)
        try context.expectStatus(cancelStatus, code: .cancelled, reason: .callCancelled, "the wait-for-ready call cancelled while its retry waited")
        context.record("cancel", KitClock.now - cancelled)
        let deadline = try await context.status(of: calls[1].recorder, "the wait-for-ready call with a deadline", seconds: 10)
        try context.expectStatus(deadline, code: .deadlineExceeded, reason: .timedOut, "the wait-for-ready call whose retry waited past its deadline")
        for (index, held) in calls.enumerated() { try context.expectWellBehaved(held.recorder, "call \(index + 1)") }
        try await context.waitUntil(seconds: 5, quiet: quietLimit, "the channel has no open call left (\(channel.openCalls))") { channel.openCalls == 0 }
        context.log("fail-fast: \(describe(failFast.error!)); cancelled: \(describe(cancelStatus.error!)); deadline: \(describe(deadline.error!))")
    }

    /// 84. A call waiting for the server's stream limit when a GOAWAY comes is retried.
    public static let goAwayWaitingCallIsRetried = ConformanceScenario(
        "A call that waits for the server's stream limit (SETTINGS_MAX_CONCURRENT_STREAMS 1) when the server sends GOAWAY never left the client: it starts on a second connection and ends OK there, while the call on the first connection's stream finishes on it",
        checklist: ["E6", "F8"], timeLimit: .seconds(60)
    ) { context in
        let listener = try await context.listen()
        defer { listener.close() }
        let channel = CallChannel(target: context.endpoint(of: listener), transport: context.client)
        defer { channel.close() }
        let reply = ConformancePattern.bytes(count: 50, seed: 84_100)
        @Sendable func answer(_ peer: RawHTTP2Peer) -> [UInt8] {
            peer.headers(1, RawHTTP2Peer.responseHeaders, endStream: false) + peer.data(1, RawHTTP2Peer.message(reply), endStream: false)
                + peer.headers(1, [HPACKField("grpc-status", "0")], endStream: true)
        }
        // Call A takes the one stream the server allows.
        let a = CallRecorder()
        let callA = try await context.startCall(on: channel, handler: a)
        callA.send(ConformancePattern.bytes(count: 100, seed: 84_000))
        callA.finishSending()
        let first = RawHTTP2Peer(try await context.accept(from: listener), client: false)
        defer { first.close() }
        var limit: [UInt8] = []
        H2FrameEncoder.encode(.settings([H2Setting(.maxConcurrentStreams, 1)]), into: &limit)
        let settings = limit
        try await context.step("the first raw server's SETTINGS, a limit of one stream") { try await first.send(settings) }
        _ = try await context.step("the first raw server reading call A on stream 1") { try await first.readToEnd(of: 1) }
        try await context.step("the client acknowledging the limit") {
            try await first.readUntil("the client's SETTINGS ACK") { first.settingsAcknowledged }
        }
        // Call B waits for the limit: stream 1 is open.
        let b = CallRecorder()
        let message = ConformancePattern.bytes(count: 200, seed: 84_001)
        let callB = try await context.startCall(on: channel, handler: b)
        callB.send(message)
        callB.finishSending()
        try await context.barrier(on: callB.eventLoop, "after call B's writes")
        // GOAWAY(1): stream 1 is processed, nothing above it is.
        var goAway: [UInt8] = []
        H2FrameEncoder.encode(.goAway(lastStreamID: H2StreamID(1), .noError, debugData: []), into: &goAway)
        let frames = goAway
        try await context.step("the first raw server sending GOAWAY(1)") { try await first.send(frames) }
        let second = try await acceptRawServer(context, listener)
        defer { second.close() }
        let answerA = answer(first)
        try await context.step("the first raw server answering call A") { try await first.send(answerA) }
        try context.expectOK(try await context.status(of: a, "call A, on the first connection", quiet: quietLimit), "call A")
        let retried = try await context.step("the second raw server reading call B", seconds: 20) { try await second.readToEnd(of: 1) }
        try context.expect(retried.reset == nil, "call B's stream on the second connection was reset: \(retried.summary)")
        guard let replayed = retried.messages else { try context.fail("call B's DATA (\(retried.data.count) bytes) is not whole gRPC messages") }
        try context.expectEqual(replayed.count, 1, "messages of call B on the second connection")
        try context.expectBytes(replayed.first ?? [], message, "call B's message on the second connection")
        let answerB = answer(second)
        try await context.step("the second raw server answering call B") { try await second.send(answerB) }
        try context.expectOK(try await context.status(of: b, "call B, after the GOAWAY", quiet: quietLimit), "call B")
        try context.expectBytes(b.snapshot.messages.first ?? [], reply, "the reply to call B")
        try context.expectWellBehaved(a, "call A")
        try context.expectWellBehaved(b, "call B")
        try context.expectEqual(first.streams.keys.filter { $0 % 2 == 1 }.sorted(), [1], "the streams the client opened on the first connection")
        try await context.waitUntil(seconds: 5, quiet: quietLimit, "the channel has no open call left (\(channel.openCalls))") { channel.openCalls == 0 }
        context.log("call B waited for the stream limit; GOAWAY(1) sent it to a second connection, where it ended OK")
    }
}

/// Accepts the channel's connection as a raw HTTP/2 server and sends its SETTINGS.
private func acceptRawServer(_ context: ConformanceContext, _ listener: any Listener) async throws -> RawHTTP2Peer {
    let peer = RawHTTP2Peer(try await context.accept(from: listener), client: false)
    try await context.step("the raw server's SETTINGS") { try await peer.send(peer.opening()) }
    return peer
}

/// RST_STREAM `code` on `stream`.
private func rstStream(_ stream: UInt32, _ code: H2ErrorCode) -> [UInt8] {
    var bytes: [UInt8] = []
    H2FrameEncoder.encode(.rstStream(H2StreamID(stream), code), into: &bytes)
    return bytes
}

/// The channel's next call opens `stream` on the raw server's connection and carries its
/// own message (a retry of an earlier call would have taken that stream), and ends OK.
private func expectNextCallIsNextStream(
    _ context: ConformanceContext, _ channel: CallChannel, _ peer: RawHTTP2Peer, stream: UInt32, seed: UInt64
) async throws {
    let message = ConformancePattern.bytes(count: 64, seed: seed)
    let recorder = CallRecorder()
    let call = try await context.startCall(on: channel, handler: recorder)
    call.send(message)
    call.finishSending()
    let seen = try await context.step("the raw server reading the next call on stream \(stream)") { try await peer.readToEnd(of: stream) }
    let opened = peer.streams.keys.filter { $0 % 2 == 1 }.sorted()
    try context.expectEqual(opened.last, stream, "the last stream the client opened (streams: \(opened))")
    try context.expectEqual(seen.messages?.count, 1, "messages on stream \(stream): \(seen.summary)")
    try context.expectBytes(seen.messages?.first ?? [], message, "the next call's message on stream \(stream)")
    try await context.step("the raw server answering stream \(stream)") {
        try await peer.send(peer.headers(stream, RawHTTP2Peer.responseHeaders, endStream: false) + peer.headers(stream, [HPACKField("grpc-status", "0")], endStream: true))
    }
    try context.expectOK(try await context.status(of: recorder, "the next call", quiet: quietLimit), "the next call")
}
