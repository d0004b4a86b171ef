import Switchyard
import SwitchyardCalls
import SwitchyardHPACK
import Synchronization

// Calls over every backend pair: framing, per-call flow control (DESIGN.md, behaviour 5),
// protocol errors, and calls whose connection breaks (behaviour 2).

extension ConformanceScenario {
    /// 18. The async face echoes messages from 0 bytes to the maximum message size.
    public static let callEchoIntegrity = ConformanceScenario(
        "Call messages from 0 bytes to 4 MiB echo back intact and in order, with flow control off and on, and the call ends OK",
        checklist: ["B1", "B7"], timeLimit: .seconds(120)
    ) { context in
        // The maximum message size is 4 MiB by default, and a 4 MiB message is allowed.
        let sizes = [0, 1, 100, 65_536, 1 << 20, Frame.defaultMaximumMessageSize]
        for flowControl in [false, true] {
            let label = flowControl ? "flow control on" : "flow control off"
            let options = CallConfiguration(enableFlowControl: flowControl)
            let serverErrors = Collected<String>()
            let server = try await context.startCallServer(options: options) { call in
                do {
                    for try await message in call.messages { try await call.write(message) }
                } catch {
                    serverErrors.append("\(error)")
                    throw error
                }
                return .ok
            }
            defer { server.close() }
            let channel = context.channel(to: server)
            let payloads = sizes.enumerated().map {
                ConformancePattern.bytes(count: $0.element, seed: UInt64(18_000 + $0.offset + (flowControl ? 50 : 0)))
            }
            let started = KitClock.now
            let (replies, status) = try await context.step("an echo call of messages of \(sizes) bytes (\(label))", seconds: 90) {
                try await channel.withCall(options: options) { call in
                    // The writer runs beside the reader: a 4 MiB echo does not fit in the
                    // socket buffers, so writing everything before reading could deadlock.
                    async let sent: Void = send(payloads, on: call, thenFinish: true)
                    var replies: [[UInt8]] = []
                    for try await message in call.messages { replies.append(message) }
                    try await sent
                    return (replies, await call.status())
                }
            }
            try context.expectOK(status, "the client's status (\(label))")
            try context.expect(serverErrors.count == 0, "the server's call failed (\(label)): \(serverErrors.all)")
            try context.expectEqual(replies.map(\.count), sizes, "the sizes of the echoed messages, in order (\(label))")
            for (index, payload) in payloads.enumerated() {
                try context.expectBytes(replies[index], payload, "the echo of message \(index) (\(payload.count) bytes, \(label))")
            }
            context.log("\(label): \(sizes.count) messages, \(sizes.reduce(0, +)) bytes, echoed intact in \(KitClock.now - started)")
        }
    }

    /// 19. didWriteData: once per message, in order, with flow control on; never with it off.
    public static let callWriteReports = ConformanceScenario(
        "With flow control on every sent message reports didWriteData once and in order, and with it off none does",
        checklist: ["B5", "F4"], timeLimit: .seconds(60)
    ) { context in
        let count = 100
        var generator = ConformancePattern.Generator(seed: 19)
        let payloads = (0..<count).map { ConformancePattern.bytes(count: generator.next(in: 1...32_768), seed: UInt64(19_000 + $0)) }
        for flowControl in [true, false] {
            let label = flowControl ? "flow control on" : "flow control off"
            let received = Collected<[UInt8]>()
            let server = try await context.startCallServer { call in
                for try await message in call.messages { received.append(message) }
                return .ok
            }
            defer { server.close() }
            let recorder = CallRecorder()
            let call = try await context.startCall(
                on: context.channel(to: server), options: CallConfiguration(enableFlowControl: flowControl), handler: recorder)
            // All sent in a row without waiting, alternating the two ways to send: even
            // messages with a completion (noted in the same log), odd ones without.
            for (index, payload) in payloads.enumerated() {
                if index.isMultiple(of: 2) {
                    call.send(payload) { recorder.note(completion: index, $0) }
                } else {
                    call.send(payload)
                }
            }
            try await context.waitUntil(seconds: 20, quiet: quietLimit, "the server received all \(count) messages (\(label); it has \(received.count))") { received.count >= count }
            if flowControl {
                try await context.waitUntil(seconds: 10, quiet: quietLimit, "\(count) didWriteData arrived (\(label))", seen: recorder.seen) { recorder.writeCount >= count }
            }
            // Anything extra would come soon after; wait a little for it.
            try await KitClock.sleep(for: .milliseconds(200))
            let events = recorder.snapshot
            try context.expectEqual(events.writes, flowControl ? count : 0, "didWriteData reports for \(count) sent messages (\(label))")
            // Each didWriteData comes right after its message's completion, so the k-th
            // report is for the k-th message: completion 0, report, report, completion 2, ...
            var expected: [CallRecorder.Event] = []
            for index in 0..<count {
                if index.isMultiple(of: 2) { expected.append(.completion(index)) }
                if flowControl { expected.append(.wrote) }
            }
            if events.log != expected {
                let at = zip(events.log, expected).enumerated().first { $0.element.0 != $0.element.1 }?.offset ?? min(events.log.count, expected.count)
                try context.fail("the order of completions and didWriteData (\(label)) differs at event \(at): expected \(expected[at..<min(at + 4, expected.count)]), received \(events.log[at..<min(at + 4, events.log.count)]) (\(events.log.count) events in all)")
            }
            if let (index, error) = events.failedCompletions.first {
                try context.fail("send \(index) completed with \(error) (\(label))")
            }
            let messages = received.all
            try context.expectEqual(messages.count, count, "messages the server received (\(label))")
            for (index, payload) in payloads.enumerated() {
                try context.expectBytes(messages[index], payload, "message \(index) as the server received it (\(label))")
            }
            // End the call. With flow control on the client reads only when it asks: it
            // asks for the reply (there is none, only the status).
            call.finishSending()
            if flowControl { call.receiveNextMessage() }
            let status = try await context.status(of: recorder, "the client's call (\(label))", quiet: quietLimit)
            try context.expectOK(status, "the client's status (\(label))")
            try context.expectWellBehaved(recorder, "the client's call (\(label))")
            context.log("\(label): \(events.writes) didWriteData for \(count) messages")
        }
    }

    /// 20. Stacked requests deliver exactly what was asked for.
    public static let callStackedRequests = ConformanceScenario(
        "With flow control on a call delivers exactly the messages asked for, requests stack, and the rest arrive in order when asked",
        checklist: ["C1", "C3"], timeLimit: .seconds(60)
    ) { context in
        let payloads = (0..<10).map { ConformancePattern.bytes(count: 100 + 37 * $0, seed: UInt64(20_000 + $0)) }
        let server = try await context.startCallServer { call in
            // On the client's go, ten messages, then OK.
            _ = try await call.next()
            for payload in payloads { try await call.write(payload) }
            return .ok
        }
        defer { server.close() }
        let recorder = CallRecorder()
        let call = try await context.startCall(on: context.channel(to: server), options: CallConfiguration(enableFlowControl: true), handler: recorder)

        // Requests made before anything arrived stack: 2 + 1.
        call.receiveNextMessages(2)
        call.receiveNextMessage()
        call.send(Array("go".utf8))
        try await context.waitUntil(seconds: 10, quiet: quietLimit, "the 3 messages asked for arrived", seen: recorder.seen) { recorder.messageCount >= 3 }
        try await KitClock.sleep(for: .milliseconds(200))
        try context.expectEqual(recorder.messageCount, 3, "messages delivered 200 ms after receiveNextMessages(2) and receiveNextMessage() (10 were sent)")

        // Later requests: one, one, and zero.
        call.receiveNextMessage()
        call.receiveNextMessage()
        call.receiveNextMessages(0)
        try await context.waitUntil(seconds: 10, quiet: quietLimit, "2 more messages arrived after receiveNextMessage() twice", seen: recorder.seen) { recorder.messageCount >= 5 }
        try await KitClock.sleep(for: .milliseconds(200))
        try context.expectEqual(recorder.messageCount, 5, "messages delivered 200 ms after asking for 5 in all")
        if let status = recorder.status {
            try context.fail("the call ended with \(status) with 5 of its 10 messages delivered")
        }

        // The rest, in two stacked requests; then the status.
        call.receiveNextMessages(3)
        call.receiveNextMessages(2)
        let status = try await context.status(of: recorder, "the call, once all 10 messages were asked for", quiet: quietLimit)
        try context.expectOK(status, "the client's status")
        let messages = recorder.snapshot.messages
        try context.expectEqual(messages.count, payloads.count, "messages delivered")
        for (index, payload) in payloads.enumerated() {
            try context.expectBytes(messages[index], payload, "message \(index) as delivered")
        }
        try context.expectWellBehaved(recorder, "the client's call")
    }

    /// 21. Flow control off: delivered as they arrive.
    public static let callWithoutFlowControlDelivers = ConformanceScenario(
        "With flow control off a call delivers every message as it arrives, without being asked",
        checklist: ["C1"], timeLimit: .seconds(30)
    ) { context in
        let payloads = (0..<5).map { ConformancePattern.bytes(count: 1000 * ($0 + 1), seed: UInt64(21_000 + $0)) }
        let server = try await context.startCallServer { call in
            for payload in payloads { try await call.write(payload) }
            return .ok
        }
        defer { server.close() }
        let recorder = CallRecorder()
        // The client never calls receiveNextMessage().
        _ = try await context.startCall(on: context.channel(to: server), handler: recorder)
        let status = try await context.status(of: recorder, "the call that never asked for a message", quiet: quietLimit)
        try context.expectOK(status, "the client's status")
        let events = recorder.snapshot
        try context.expectEqual(events.messages.count, payloads.count, "messages delivered without asking")
        for (index, payload) in payloads.enumerated() {
            try context.expectBytes(events.messages[index], payload, "message \(index) as delivered")
        }
        try context.expectEqual(events.writes, 0, "didWriteData reports with flow control off")
        try context.expectWellBehaved(recorder, "the client's call")
    }

    /// 22. A reader that does not ask pushes the sender back and holds little.
    public static let callFlowControlBoundsMemory = ConformanceScenario(
        "With flow control on a reader that stops asking holds at most one message and one read buffer and pushes the sender back, then gets all 256 MiB intact",
        checklist: ["B4", "C2", "C5", "C6"], timeLimit: .seconds(240)
    ) { context in
        let messageSize = 64 * 1024
        let total = 4096  // 256 MiB
        let window = 8  // messages the sender keeps outstanding
        let readBuffer = 64 * 1024  // every backend reads at most 64 KiB at a time
        let bound = messageSize + Frame.headerSize + readBuffer
        let patterns = (0..<16).map { ConformancePattern.bytes(count: messageSize, seed: UInt64(22_000 + $0)) }
        // Message i: pattern i % 16 with i stamped in its first 8 bytes, so a dropped,
        // repeated or reordered message shows.
        let message: @Sendable (Int) -> [UInt8] = { index in
            var bytes = patterns[index % patterns.count]
            for byte in 0..<8 { bytes[byte] = UInt8(truncatingIfNeeded: index >> (8 * byte)) }
            return bytes
        }

        let readerCalls = Collected<Call>()
        let reader = VerifyingReader(expected: message)
        let server = try await context.startCallServer(options: CallConfiguration(enableFlowControl: true)) { call in
            readerCalls.append(call)
            return reader
        }
        defer { server.close() }
        let sender = PacedSender(total: total, window: window, message: message)
        let call = try await context.startCall(on: context.channel(to: server), options: CallConfiguration(enableFlowControl: true), handler: sender)
        sender.start(call)
        try await context.waitUntil(seconds: 10, quiet: quietLimit, "the server accepted the call") { readerCalls.count == 1 }
        let readerCall = readerCalls[0]

        // The reader asks for one message (so it has read from the connection), then
        // for nothing.
        readerCall.receiveNextMessage()
        try await context.waitUntil(seconds: 10, quiet: quietLimit, "the reader got the one message it asked for (it has \(reader.state.received))", seen: reader.recorder.seen) { reader.state.received >= 1 }
        let quietWait = KitClock.now
        while KitClock.now - sender.state.lastCompletion < .milliseconds(500) {
            let completed = sender.state.completed
            try context.expect(
                KitClock.now - quietWait < .seconds(60),
                "the sender's messages kept completing for 60 s (\(completed) of \(total)) while the reader asked for nothing: nothing pushed it back")
            try await KitClock.sleep(for: .milliseconds(20))
        }
        let held = try await context.bufferedBytes(of: readerCall)
        let completed = sender.state.completed
        context.record("held", bytes: held)
        context.record("pushed back after", bytes: completed * messageSize)
        context.log("held \(held) bytes while not asked (bound \(bound)); the sender was pushed back after \(completed) of \(total) messages (\(completed * messageSize >> 10) KiB)")
        try context.expect(held <= bound, "the reader's call holds \(held) bytes while no message is asked for; expected at most one message and one read buffer (\(messageSize) + \(Frame.headerSize) + \(readBuffer) = \(bound))")
        try context.expect(completed < total, "all \(total) messages (\(total * messageSize) bytes) completed while the reader asked for nothing: the sender was never pushed back")
        try context.expectEqual(reader.state.received, 1, "messages delivered to a reader that asked for one")

        // No busy loop while everything waits.
        try await context.expectNoBusyLoop(for: .milliseconds(500), while: "the sender was pushed back and the reader asked for nothing")

        // Now the reader asks for everything (more than is left, so it also reads the
        // client's end); every message arrives intact and in order; both ends end OK.
        let started = KitClock.now
        readerCall.receiveNextMessages(total)
        try await context.waitUntil(seconds: 180, quiet: quietLimit, "the reader got all \(total) messages (it has \(reader.state.received))") {
            reader.state.received >= total || reader.state.failure != nil
        }
        if let failure = reader.state.failure { try context.fail(failure) }
        let senderStatus = try await context.status(of: sender.recorder, "the sender's call", seconds: 20)
        try context.expectOK(senderStatus, "the sender's (client's) status")
        let readerStatus = try await context.status(of: reader.recorder, "the reader's call", seconds: 20)
        try context.expectOK(readerStatus, "the reader's (server's) status")
        try context.expectEqual(sender.state.completed, total, "didWriteData reports at the sender")
        try context.expectEqual(reader.state.received, total, "messages the reader received")
        context.log("the remaining \(total - 1) messages arrived intact in \(KitClock.now - started)")
    }

    /// 23. Protocol errors end the offending call only: its stream, not its connection.
    public static let callProtocolErrors = ConformanceScenario(
        "HTTP/2 frames split anywhere decode, and an oversized, truncated or garbage gRPC message ends only its own stream with the protocol error while the connection and the server keep serving",
        checklist: ["B2"], timeLimit: .seconds(90)
    ) { context in
        let maximum = Frame.defaultMaximumMessageSize
        let serverCalls = Collected<CallRecorder>()
        let server = try await context.startCallServer { call in
            // An echo: every message back, and OK once the client finished sending.
            let recorder = CallRecorder(onReceive: { call, message in call.send(message) }, onEnd: { call in call.finish() })
            serverCalls.append(recorder)
            return recorder
        }
        defer { server.close() }
        let endpoint = context.target(of: server.localAddress)
        let channel = context.channel(to: server)

        // Frames split anywhere decode: a raw HTTP/2 client writes the preface, SETTINGS,
        // a request's HEADERS and DATA frames of random sizes holding three messages, the
        // last with END_STREAM, in pieces of 1 to 7 bytes, then of up to 20,000 bytes.
        let raw = RawHTTP2Peer(try await context.connect(to: endpoint), client: true)
        defer { raw.close() }
        do {
            let messages = [0, 1000, 70_000].map { ConformancePattern.bytes(count: $0, seed: UInt64(23_000 + $0)) }
            let body = messages.flatMap { RawHTTP2Peer.message($0) }
            var generator = ConformancePattern.Generator(seed: 23)
            var bytes = raw.opening() + raw.headers(1, RawHTTP2Peer.request(path: "/switchyard.Echo/Split"), endStream: false)
            var offset = 0
            var dataFrames = 0
            while offset < body.count {
                // DATA frames of 1 to 16,384 bytes: messages and their prefixes split across them.
                let length = min(body.count - offset, generator.next(in: 1...16_384))
                bytes += raw.data(1, Array(body[offset..<offset + length]), endStream: offset + length == body.count)
                offset += length
                dataFrames += 1
            }
            let frames = bytes
            let pieceSizes = (0..<10_000).map { generator.next(in: 1...($0 < 60 ? 7 : 20_000)) }
            let pieces = try await context.step("writing the split frames", seconds: 20) {
                try await raw.sendInPieces(frames, pieceLength: { pieceSizes[$0] }, pauseWhile: { $0 < 60 })
            }
            let reply = try await context.step("reading the reply to the split frames", seconds: 20) { try await raw.readToEnd(of: 1) }
            try context.expect(raw.receivedSettings && raw.settingsAcknowledged, "the server sent SETTINGS (\(raw.receivedSettings)) and acknowledged the client's written in pieces (\(raw.settingsAcknowledged))")
            try context.expect(reply.reset == nil, "the split request's stream was reset: \(reply.summary)")
            try context.expectEqual(reply.headerBlocks.count, 2, "header blocks in the reply (response headers, trailers): \(reply.summary)")
            try context.expectEqual(reply.value(":status", inBlock: 0), "200", "the response's :status")
            try context.expectEqual(reply.value("content-type", inBlock: 0), "application/grpc", "the response's content-type")
            try context.expect(reply.headerBlocks[1].endStream, "the trailers end the stream: \(reply.summary)")
            try context.expectEqual(reply.value("grpc-status", inBlock: 1), "0", "the trailers' grpc-status: \(reply.summary)")
            guard let echoed = reply.messages else {
                try context.fail("the reply's DATA (\(reply.data.count) bytes) is not whole gRPC messages")
            }
            try context.expectEqual(echoed.map(\.count), messages.map(\.count), "the sizes of the echoed messages, in order")
            for (index, message) in messages.enumerated() {
                try context.expectBytes(echoed[index], message, "the echo of message \(index) (\(message.count) bytes), sent in pieces")
            }
            try context.expectOK(try await context.status(of: serverCalls[0], "the server's call of the split request", quiet: quietLimit), "the server's call of the split request")
            context.log("preface, SETTINGS, HEADERS and \(dataFrames) DATA frames written in \(pieces) pieces decoded; 3 messages echoed")
        }

        // A bad client on the same connection: the server's call ends with the protocol
        // error, the raw client sees that stream end (trailers with a non-zero grpc-status,
        // or RST_STREAM), and a stream opened after it on the same connection works; then a
        // normal call through a channel works.
        struct Bad {
            var name: String
            var data: [UInt8]
            var thenEndStream: Bool
            var code: TransportError.Code
            var reason: TransportError.Reason
        }
        let good = ConformancePattern.bytes(count: 100, seed: 23_100)
        let bad: [Bad] = [
            Bad(name: "a message announcing \(maximum + 1) bytes (the maximum message size + 1)",
                data: RawHTTP2Peer.message(ConformancePattern.bytes(count: 100, seed: 23_150), announcedLength: maximum + 1), thenEndStream: false,
                code: .resourceExhausted, reason: .frameTooLarge),
            Bad(name: "a message announcing 1000 bytes and 400 of them, then END_STREAM",
                data: RawHTTP2Peer.message(ConformancePattern.bytes(count: 400, seed: 23_200), announcedLength: 1000), thenEndStream: true,
                code: .internal, reason: .truncatedFrame),
            Bad(name: "3 bytes of a message's prefix, then END_STREAM",
                data: [0, 0, 0], thenEndStream: true,
                code: .internal, reason: .truncatedFrame),
            Bad(name: "a message with the undefined flag 0x80",
                data: RawHTTP2Peer.message(ConformancePattern.bytes(count: 10, seed: 23_300), flag: 0x80), thenEndStream: false,
                code: .internal, reason: .protocolViolation),
            Bad(name: "a compressed message (flag 1) with no grpc-encoding",
                data: RawHTTP2Peer.message(ConformancePattern.bytes(count: 10, seed: 23_350), flag: 1), thenEndStream: false,
                code: .internal, reason: .protocolViolation),
        ]
        var nextStream: UInt32 = 3
        for (caseIndex, input) in bad.enumerated() {
            // A good message first, echoed, so that the bad one comes in the middle of a call.
            let stream = nextStream
            nextStream += 2
            let index = serverCalls.count
            try await context.step("opening stream \(stream) with a good message") {
                try await raw.send(raw.headers(stream, RawHTTP2Peer.request(path: "/switchyard.Echo/Bad"), endStream: false) + raw.data(stream, RawHTTP2Peer.message(good), endStream: false))
            }
            try await context.step("the echo of the good message on stream \(stream)") {
                try await raw.readUntil("the echo on stream \(stream)") { raw.streams[stream]?.messages?.count == 1 }
            }
            try await context.step("writing \(input.name) on stream \(stream)") { try await raw.send(raw.data(stream, input.data, endStream: input.thenEndStream)) }
            let reply = try await context.step("the end of stream \(stream) after \(input.name)") { try await raw.readToEnd(of: stream) }
            try await context.waitUntil(seconds: 10, quiet: quietLimit, "the server made the raw client's call") { serverCalls.count > index }
            let recorder = serverCalls[index]
            let status = try await context.status(of: recorder, "the server's call after \(input.name)", quiet: quietLimit)
            try context.expectStatus(status, code: input.code, reason: input.reason, "the server's call after \(input.name)")
            try context.expectEqual(recorder.snapshot.messages.count, 1, "messages the server's call received (the good one) before \(input.name)")
            try context.expectWellBehaved(recorder, "the server's call after \(input.name)")
            try context.expectEqual(reply.messages?.count, 1, "messages echoed on stream \(stream) before \(input.name): \(reply.summary)")
            let ending: String
            if let code = reply.reset, reply.headerBlocks.count < 2 {
                ending = "RST_STREAM \(code)"
            } else {
                let grpcStatus = reply.value("grpc-status", inBlock: reply.headerBlocks.count - 1)
                try context.expect(
                    reply.headerBlocks.count == 2 && reply.headerBlocks[1].endStream && grpcStatus != nil && grpcStatus != "0",
                    "stream \(stream) after \(input.name) ended with neither RST_STREAM nor trailers with a non-zero grpc-status: \(reply.summary)")
                ending = "trailers, grpc-status \(grpcStatus ?? "")" + (reply.reset.map { ", then RST_STREAM \($0)" } ?? "")
            }
            context.log("\(input.name): the server's call ended with \(status); the raw client saw \(ending)")

            // The connection goes on: the next stream on it is served.
            let after = nextStream
            nextStream += 2
            let message = ConformancePattern.bytes(count: 5000, seed: UInt64(23_400 + caseIndex))
            let next = try await context.step("a good stream on the same connection after \(input.name)", seconds: 20) {
                try await raw.send(raw.headers(after, RawHTTP2Peer.request(path: "/switchyard.Echo/After"), endStream: false) + raw.data(after, RawHTTP2Peer.message(message), endStream: true))
                return try await raw.readToEnd(of: after)
            }
            try context.expect(next.reset == nil && next.value("grpc-status", inBlock: 1) == "0", "the good stream \(after) after \(input.name) on the same connection: \(next.summary)")
            try context.expectEqual(next.messages?.count, 1, "messages echoed on stream \(after) after \(input.name)")
            try context.expectBytes(next.messages?.first ?? [], message, "the echo on stream \(after) after \(input.name)")
            try context.expect(raw.goAway == nil && !raw.endOfStream, "the server ended the raw client's connection after \(input.name): GOAWAY \(raw.goAway.map { "\($0)" } ?? "none")")

            let (replies, normal) = try await context.step("a normal call after \(input.name)", seconds: 20) {
                try await channel.withCall { call in
                    try await call.write(message)
                    try await call.finishSending()
                    var replies: [[UInt8]] = []
                    for try await reply in call.messages { replies.append(reply) }
                    return (replies, await call.status())
                }
            }
            try context.expectOK(normal, "the status of a normal call after \(input.name)")
            try context.expectEqual(replies.count, 1, "echoed messages in a normal call after \(input.name)")
            try context.expectBytes(replies[0], message, "the echo in a normal call after \(input.name)")
        }
        raw.close()
        try await context.waitUntil(seconds: 10, quiet: quietLimit, "the server has no open call left (\(server.openCalls))") { server.openCalls == 0 }

        // A bad server: the client's call ends with the protocol error. A raw HTTP/2
        // server answers each of the channel's calls on one connection; the last case
        // closes it.
        enum Ending { case none, endStream, close }
        struct BadServer {
            var name: String
            var headersFirst: Bool
            var goodFirst: Bool
            var data: [UInt8]
            var ending: Ending
            var code: TransportError.Code
            var reason: TransportError.Reason
        }
        let badServer: [BadServer] = [
            BadServer(name: "a message announcing \(maximum + 1) bytes (the maximum message size + 1)", headersFirst: true, goodFirst: false,
                      data: RawHTTP2Peer.message([1, 2, 3], announcedLength: maximum + 1), ending: .none,
                      code: .resourceExhausted, reason: .frameTooLarge),
            BadServer(name: "a good message, then one with the undefined flag 0x7F", headersFirst: true, goodFirst: true,
                      data: RawHTTP2Peer.message([1, 2, 3, 4], flag: 0x7F), ending: .none,
                      code: .internal, reason: .protocolViolation),
            BadServer(name: "a message announcing 1000 bytes and 400 of them, then END_STREAM", headersFirst: true, goodFirst: false,
                      data: RawHTTP2Peer.message(ConformancePattern.bytes(count: 400, seed: 23_500), announcedLength: 1000), ending: .endStream,
                      code: .internal, reason: .truncatedFrame),
            // DATA before HEADERS breaks HTTP/2 itself (RFC 9113 section 8.1): the client's
            // HTTP/2 layer resets the stream with PROTOCOL_ERROR, which gRPC maps to internal.
            BadServer(name: "a message before the response headers", headersFirst: false, goodFirst: false,
                      data: RawHTTP2Peer.message(good), ending: .none,
                      code: .internal, reason: .reset),
            BadServer(name: "trailers whose grpc-status is 99, no status code", headersFirst: true, goodFirst: false,
                      data: [], ending: .endStream,
                      code: .unknown, reason: .protocolViolation),
            BadServer(name: "a good message, then a close of the connection without trailers", headersFirst: true, goodFirst: true,
                      data: [], ending: .close,
                      code: .unavailable, reason: .closed),
        ]
        let listener = try await context.listen()
        defer { listener.close() }
        let rawChannel = CallChannel(target: context.endpoint(of: listener), transport: context.client)
        var peer: RawHTTP2Peer?
        defer { peer?.close() }
        var clientStream: UInt32 = 1
        for input in badServer {
            let recorder = CallRecorder()
            _ = try await context.startCall(on: rawChannel, handler: recorder)
            if peer == nil {
                let accepted = RawHTTP2Peer(try await context.accept(from: listener), client: false)
                try await context.step("the raw server's SETTINGS") { try await accepted.send(accepted.opening()) }
                peer = accepted
            }
            let server = peer!
            let stream = clientStream
            clientStream += 2
            // The client opens every call with its request headers (here the method "",
            // the path "/", no metadata).
            try await context.step("the raw server reading the request headers on stream \(stream)") {
                try await server.readUntil("the request on stream \(stream)") { server.streams[stream]?.headerBlocks.isEmpty == false }
            }
            let request = server.streams[stream]!
            try context.expect(
                request.value(":method", inBlock: 0) == "POST" && request.value(":path", inBlock: 0) == "/"
                    && request.value("content-type", inBlock: 0) == "application/grpc" && request.value("te", inBlock: 0) == "trailers",
                "the client's request headers on stream \(stream): \(request.summary)")
            var bytes: [UInt8] = []
            if input.headersFirst { bytes += server.headers(stream, RawHTTP2Peer.responseHeaders, endStream: false) }
            if input.goodFirst {
                let first = bytes + server.data(stream, RawHTTP2Peer.message(good), endStream: false)
                try await context.step("the raw server writing a good message") { try await server.send(first) }
                try await context.waitUntil(seconds: 10, quiet: quietLimit, "the client's call received the good message", seen: recorder.seen) { recorder.messageCount == 1 }
                bytes = []
            }
            switch input.ending {
            case .none:
                bytes += server.data(stream, input.data, endStream: false)
            case .endStream:
                if input.data.isEmpty {
                    bytes += server.headers(stream, [HPACKField("grpc-status", "99")], endStream: true)
                } else {
                    bytes += server.data(stream, input.data, endStream: true)
                }
            case .close:
                break
            }
            let written = bytes
            if !written.isEmpty {
                try await context.step("the raw server writing \(input.name)") { try await server.send(written) }
            }
            if input.ending == .close { server.close() }
            let status = try await context.status(of: recorder, "the client's call after the server sent \(input.name)", quiet: quietLimit)
            try context.expectStatus(status, code: input.code, reason: input.reason, "the client's call after the server sent \(input.name)")
            let events = recorder.snapshot
            try context.expectEqual(events.messages.count, input.goodFirst ? 1 : 0, "messages the client's call received before \(input.name)")
            if input.goodFirst { try context.expectBytes(events.messages[0], good, "the good message before \(input.name)") }
            try context.expectWellBehaved(recorder, "the client's call after the server sent \(input.name)")
            var ending = "its own close"
            if input.ending != .close {
                // The client's call ended: it resets the stream (its half is still open).
                let seen = try await context.step("the raw server reading the end of stream \(stream)") { try await server.readToEnd(of: stream) }
                try context.expect(seen.reset != nil, "the client did not reset stream \(stream) after the server sent \(input.name): \(seen.summary)")
                try context.expectEqual(seen.data.count, 0, "bytes of DATA from a client that sent nothing after its headers")
                ending = "RST_STREAM \(seen.reset!)"
            }
            context.log("server sent \(input.name): the client's call ended with \(status); the raw server saw \(ending)")
        }
        try await context.waitUntil(seconds: 5, quiet: quietLimit, "the channel has no open call left (\(rawChannel.openCalls))") { rawChannel.openCalls == 0 }
    }

    /// 24. A broken connection ends the call with unavailable; a cancel ends the peer's call cancelled.
    public static let callBrokenConnectionIsUnavailable = ConformanceScenario(
        "When the connection under a call breaks the call ends with unavailable, and a cancelled call ends the peer's with cancelled (RST_STREAM CANCEL) while the connection goes on",
        checklist: ["E6", "F5", "F6"], timeLimit: .seconds(60)
    ) { context in
        let resetMessage = Array("reset".utf8)
        let cancelMessage = Array("cancel".utf8)
        let serverCalls = Collected<CallRecorder>()
        let server = try await context.startCallServer { call in
            // An echo that resets its connection on "reset" and cancels its call on "cancel".
            let recorder = CallRecorder(
                onReceive: { call, message in
                    if message == resetMessage {
                        call.connection.reset()
                    } else if message == cancelMessage {
                        call.cancel()
                    } else {
                        call.send(message)
                    }
                },
                onEnd: { call in call.finish() })
            serverCalls.append(recorder)
            return recorder
        }
        defer { server.close() }
        let channel = context.channel(to: server)
        let first = ConformancePattern.bytes(count: 3000, seed: 24)

        // The server resets the connection mid-call: the client's messages end with
        // unavailable (reset), and so does its status (async face).
        for flowControl in [false, true] {
            let label = flowControl ? "flow control on" : "flow control off"
            let index = serverCalls.count
            let progress = WaitProgress("the call has not started")
            let outcome = try await context.step("a call whose server resets mid-call (\(label))", seconds: 20, progress: progress) {
                try await channel.withCall(options: CallConfiguration(enableFlowControl: flowControl)) { call -> (echo: [UInt8]?, error: (any Error)?, status: CallStatus) in
                    try await call.write(first)
                    progress.advance("the call sent its first message, no echo yet")
                    var messages = call.messages.makeAsyncIterator()
                    let echo = try await messages.next()
                    progress.advance("the call had the echo of its first message (\(echo?.count ?? 0) bytes), and sent the request to reset; no end yet")
                    try await call.write(resetMessage)
                    do {
                        while try await messages.next() != nil {}
                        return (echo, nil, await call.status())
                    } catch {
                        return (echo, error, await call.status())
                    }
                }
            }
            try context.expectBytes(outcome.echo ?? [], first, "the echo before the reset (\(label))")
            try context.expectPeerReset(outcome.error, "the client's next message after the server reset (\(label))")
            try context.expectPeerReset(outcome.status, "the client's status after the server reset (\(label))")
            let serverStatus = try await context.status(of: serverCalls[index], "the server's call that reset its connection", quiet: quietLimit)
            try context.expect(!serverStatus.isOK, "the server's call that reset its connection ended OK")
            context.log("server reset (\(label)): the client's call ended with \(outcome.status); the server's with \(serverStatus)")
        }

        // The client cancels: its call ends with cancelled, and so does the server's
        // (RST_STREAM CANCEL, gRPC's mapping); the connection and its other calls go on.
        do {
            let index = serverCalls.count
            let recorder = CallRecorder()
            let call = try await context.startCall(on: channel, handler: recorder)
            call.send(first)
            try await context.waitUntil(seconds: 10, quiet: quietLimit, "the echo of the first message arrived", seen: recorder.seen) { recorder.messageCount >= 1 }
            call.cancel()
            let status = try await context.status(of: recorder, "the cancelled client call", quiet: quietLimit)
            try context.expectStatus(status, code: .cancelled, reason: .callCancelled, "the client's status after cancel()")
            let serverStatus = try await context.status(of: serverCalls[index], "the server's call whose client cancelled", quiet: quietLimit)
            try context.expectStatus(serverStatus, code: .cancelled, reason: .reset, "the server's status after the client cancelled")
            try context.expectWellBehaved(recorder, "the cancelled client call")
            try context.expectWellBehaved(serverCalls[index], "the server's call whose client cancelled")
        }

        // The server cancels: its call ends with cancelled, and so does the client's.
        do {
            let index = serverCalls.count
            let recorder = CallRecorder()
            let call = try await context.startCall(on: channel, handler: recorder)
            call.send(first)
            try await context.waitUntil(seconds: 10, quiet: quietLimit, "the echo of the first message arrived", seen: recorder.seen) { recorder.messageCount >= 1 }
            call.send(cancelMessage)
            let status = try await context.status(of: recorder, "the client call whose server cancelled", quiet: quietLimit)
            try context.expectStatus(status, code: .cancelled, reason: .reset, "the client's status after the server cancelled")
            let serverStatus = try await context.status(of: serverCalls[index], "the server's cancelled call", quiet: quietLimit)
            try context.expectStatus(serverStatus, code: .cancelled, reason: .callCancelled, "the server's status after its cancel()")
            try context.expectWellBehaved(recorder, "the client call whose server cancelled")
            try context.expectWellBehaved(serverCalls[index], "the server's cancelled call")
        }
        try await context.waitUntil(seconds: 5, quiet: quietLimit, "the channel has no open call left (\(channel.openCalls))") { channel.openCalls == 0 }
        try await context.waitUntil(seconds: 5, quiet: quietLimit, "the server has no open call left (\(server.openCalls))") { server.openCalls == 0 }
    }

    /// 25. The next call after a broken one connects afresh.
    public static let callAfterBrokenConnectionReconnects = ConformanceScenario(
        "A call that starts after a broken connection connects afresh and succeeds",
        checklist: ["E6", "J3"], timeLimit: .seconds(60)
    ) { context in
        let resetMessage = Array("reset".utf8)
        let server = try await context.startCallServer { call in
            for try await message in call.messages {
                if message == resetMessage {
                    call.call.connection.reset()
                    break
                }
                try await call.write(message)
            }
            return .ok
        }
        defer { server.close() }
        let channel = context.channel(to: server)

        let progress = WaitProgress("the call has not started")
        let broken = try await context.step("call 1, whose server resets", seconds: 20, progress: progress) {
            try await channel.withCall { call -> (local: Endpoint, error: (any Error)?) in
                let local = call.call.connection.localAddress
                try await call.write(resetMessage)
                progress.advance("the call sent the request to reset, and has no end yet")
                do {
                    for try await _ in call.messages {}
                    return (local, nil)
                } catch {
                    return (local, error)
                }
            }
        }
        try context.expectPeerReset(broken.error, "call 1 after its server reset")

        let message = ConformancePattern.bytes(count: 10_000, seed: 25)
        let fresh = try await context.echoCall(on: channel, message, step: "call 2 on the same channel")
        try context.expectOK(fresh.status, "call 2's status")
        try context.expectEqual(fresh.replies.count, 1, "messages echoed in call 2")
        try context.expectBytes(fresh.replies[0], message, "call 2's echo")
        try context.expect(fresh.local != broken.local, "call 2 used local address \(fresh.local), the address of call 1's broken connection; expected a new connection")
        try await context.waitUntil(seconds: 5, quiet: quietLimit, "the channel has no open call left (\(channel.openCalls))") { channel.openCalls == 0 }
        context.log("call 1 (local address \(broken.local)) broke with \(broken.error!); call 2 connected afresh from \(fresh.local) and ended OK")
    }
}

extension ConformanceScenario {
    /// 26. With flow control on, a call that has no request outstanding still learns how
    /// the peer ended: the status, the client's end of stream, a reset.
    public static let callEndsWithoutOutstandingRequest = ConformanceScenario(
        "With flow control on a call that got every message it asked for still ends with the peer's status, end of stream or reset",
        checklist: ["C3", "E6"], timeLimit: .seconds(60)
    ) { context in
        let resetMessage = Array("reset".utf8)
        // The client asked for exactly the one message the server sends; the status
        // follows 300 ms later, so it is not in the same read as the message.
        do {
            let server = try await context.startCallServer { call in
                try await call.write([1, 2, 3])
                try await KitClock.sleep(for: .milliseconds(300))
                return .ok
            }
            defer { server.close() }
            let recorder = CallRecorder()
            let call = try await context.startCall(on: context.channel(to: server), options: CallConfiguration(enableFlowControl: true), handler: recorder)
            call.receiveNextMessage()
            let status = try await context.status(of: recorder, "a client call (flow control on) that asked for the one message the server sent, 300 ms before its status", seconds: 5, quiet: quietLimit)
            try context.expectOK(status, "the client's status")
            try context.expectEqual(recorder.snapshot.messages, [[1, 2, 3]], "the messages delivered")
        }
        // The server asked for exactly the one message the client sends; the client
        // finishes sending 300 ms later: the server hears the end and ends the call.
        do {
            let serverCalls = Collected<Call>()
            let serverRecorder = CallRecorder(onEnd: { call in call.finish() })
            let server = try await context.startCallServer(options: CallConfiguration(enableFlowControl: true)) { call in
                serverCalls.append(call)
                return serverRecorder
            }
            defer { server.close() }
            let recorder = CallRecorder()
            let call = try await context.startCall(on: context.channel(to: server), handler: recorder)
            call.send([4, 5, 6])
            try await context.waitUntil(seconds: 10, quiet: quietLimit, "the server accepted the call") { serverCalls.count == 1 }
            serverCalls[0].receiveNextMessage()
            try await context.waitUntil(seconds: 10, quiet: quietLimit, "the server's call got the message it asked for", seen: serverRecorder.seen) { serverRecorder.messageCount == 1 }
            try await KitClock.sleep(for: .milliseconds(300))
            call.finishSending()
            try await context.waitUntil(seconds: 5, quiet: quietLimit, "the server's call (flow control on, its one request served) heard the client's end of stream", seen: serverRecorder.seen) { serverRecorder.snapshot.ends == 1 }
            let status = try await context.status(of: recorder, "the client's call", seconds: 5, quiet: quietLimit)
            try context.expectOK(status, "the client's status")
        }
        // The async face: write, finish sending, then the status, without iterating.
        do {
            let server = try await context.startCallServer { call in
                for try await _ in call.messages {}
                return .ok
            }
            defer { server.close() }
            let channel = context.channel(to: server)
            let status = try await context.step("an async call (flow control on) that writes, finishes sending and awaits its status without reading messages", seconds: 5) {
                try await channel.withCall(options: CallConfiguration(enableFlowControl: true)) { call in
                    try await call.write([7])
                    try await call.finishSending()
                    return await call.status()
                }
            }
            try context.expectOK(status, "the status of an async call that never iterated its messages")
        }
        // Nothing asked for, and the server resets the connection.
        do {
            let server = try await context.startCallServer { call in
                for try await message in call.messages where message == resetMessage { call.call.connection.reset() }
                return .ok
            }
            defer { server.close() }
            let recorder = CallRecorder()
            let call = try await context.startCall(on: context.channel(to: server), options: CallConfiguration(enableFlowControl: true), handler: recorder)
            call.send(resetMessage)
            let status = try await context.status(of: recorder, "a client call (flow control on, nothing asked for) whose server reset the connection", seconds: 5, quiet: quietLimit)
            // Under TLS a reset may reach the client's TLS layer as a close without
            // close_notify (libuv reports the peer's RST after a read of what was there).
            if context.serverTransportBackend?.speaksTLS == true && status.error?.reason == .truncated {
                try context.expectStatus(status, code: .unavailable, reason: .truncated, "the status of a call that asked for nothing when its server reset")
            } else {
                try context.expectPeerReset(status, "the status of a call that asked for nothing when its server reset")
            }
        }
    }

    /// 27. Requests made before the call's handler is installed are honoured, and no
    /// message that arrives meanwhile is lost.
    public static let callEarlyRequestsLoseNothing = ConformanceScenario(
        "A server call with flow control on loses no message that arrives as it starts, whichever face asks first",
        checklist: ["C3", "B1"], timeLimit: .seconds(60)
    ) { context in
        let rounds = 30
        // The async face: serve asks for its first message at once.
        do {
            let server = try await context.startCallServer(options: CallConfiguration(enableFlowControl: true)) { call in
                var got: [UInt8] = []
                for try await message in call.messages { got += message }
                try await call.write(got)
                return .ok
            }
            defer { server.close() }
            let channel = context.channel(to: server)
            for round in 0..<rounds {
                let replies = try await context.step("round \(round): three messages sent at once to an async server with flow control on", seconds: 5) {
                    try await channel.withCall { call in
                        for byte: UInt8 in 1...3 { try await call.write([byte]) }
                        try await call.finishSending()
                        var replies: [[UInt8]] = []
                        for try await reply in call.messages { replies.append(reply) }
                        return replies
                    }
                }
                try context.expectEqual(replies, [[1, 2, 3]], "round \(round): what the async server (flow control on) received, echoed back")
            }
        }
        // The handler face: the request comes from makeHandler, before the call starts.
        do {
            let serverRecorders = Collected<CallRecorder>()
            let server = try await context.startCallServer(options: CallConfiguration(enableFlowControl: true)) { call in
                let recorder = CallRecorder(onEnd: { call in call.finish() })
                serverRecorders.append(recorder)
                call.receiveNextMessages(10)
                return recorder
            }
            defer { server.close() }
            let channel = context.channel(to: server)
            for round in 0..<rounds {
                let recorder = CallRecorder()
                let call = try await context.startCall(on: channel, handler: recorder)
                for byte: UInt8 in 1...3 { call.send([byte]) }
                call.finishSending()
                let status = try await context.status(of: recorder, "round \(round): the client's call", seconds: 5, quiet: quietLimit)
                try context.expectOK(status, "round \(round): the client's status")
                try context.expectEqual(serverRecorders[round].snapshot.messages, [[1], [2], [3]], "round \(round): messages the server's call got after asking for 10 in makeHandler")
            }
        }
    }
}

/// Writes `payloads` in order, each once the previous is in the kernel; then finishes
/// sending if asked.
private func send(_ payloads: [[UInt8]], on call: AsyncCall, thenFinish: Bool) async throws {
    for payload in payloads { try await call.write(payload) }
    if thenFinish { try await call.finishSending() }
}

/// A sender that keeps at most `window` messages outstanding: it sends the next message
/// on each didWriteData (flow control on), and finishes sending after the last. It asks
/// for one reply at the start, so its call reads the server's status.
///
/// Sends happen on the call's loop only (the first `window` from a hop there), so they
/// go out in index order. State is behind a `Mutex`; the scenario reads it.
private final class PacedSender: CallHandler {
    struct State: Sendable {
        var sent = 0
        var completed = 0
        var lastCompletion = KitClock.now
    }
    let total: Int
    let window: Int
    let message: @Sendable (Int) -> [UInt8]
    let recorder = CallRecorder(keepsMessages: false)
    private let mutableState = Mutex(State())
    var state: State { mutableState.withLock { $0 } }

    init(total: Int, window: Int, message: @escaping @Sendable (Int) -> [UInt8]) {
        self.total = total
        self.window = window
        self.message = message
    }

    func start(_ call: Call) {
        call.receiveNextMessage()
        call.eventLoop.execute {
            for _ in 0..<self.window { self.sendNext(call) }
        }
    }

    /// On the loop.
    private func sendNext(_ call: Call) {
        let index: Int? = mutableState.withLock { state in
            guard state.sent < total else { return nil }
            state.sent += 1
            return state.sent - 1
        }
        if let index { call.send(message(index)) }
    }

    func call(_ call: Call, didReceive message: [UInt8]) { recorder.call(call, didReceive: message) }

    func callDidWriteData(_ call: Call) {
        recorder.callDidWriteData(call)
        let done = mutableState.withLock { state in
            state.completed += 1
            state.lastCompletion = KitClock.now
            return state.completed == total
        }
        if done { call.finishSending() } else { sendNext(call) }
    }

    func call(_ call: Call, didCloseWith status: CallStatus) { recorder.call(call, didCloseWith: status) }
}

/// A reader that checks each message against `expected(index)` as it arrives (without
/// keeping it) and ends the call OK once the client finished sending. State is behind a
/// `Mutex`; the scenario reads it.
private final class VerifyingReader: CallHandler {
    struct State: Sendable {
        var received = 0
        var failure: String?
    }
    let expected: @Sendable (Int) -> [UInt8]
    let recorder = CallRecorder(keepsMessages: false)
    private let mutableState = Mutex(State())
    var state: State { mutableState.withLock { $0 } }

    init(expected: @escaping @Sendable (Int) -> [UInt8]) {
        self.expected = expected
    }

    func call(_ call: Call, didReceive message: [UInt8]) {
        recorder.call(call, didReceive: message)
        let index = mutableState.withLock { $0.received }
        let difference = ConformancePattern.difference(message, expected(index))
        mutableState.withLock { state in
            state.received += 1
            if let difference, state.failure == nil {
                state.failure = "message \(index) of 64 KiB as the reader received it: \(difference)"
            }
        }
    }

    func callDidReceiveEnd(_ call: Call) {
        recorder.callDidReceiveEnd(call)
        call.finish()
    }

    func call(_ call: Call, didCloseWith status: CallStatus) { recorder.call(call, didCloseWith: status) }
}
