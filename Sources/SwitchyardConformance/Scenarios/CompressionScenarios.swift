import Switchyard
import SwitchyardCalls
import SwitchyardHPACK

/// Compression on gRPC's wire (`doc/compression.md`): what a channel's client and a call
/// server send when asked to compress, seen as bytes by a raw HTTP/2 peer
/// (`RawHTTP2Peer`) on the other side of the pair.
extension ConformanceScenario {
    /// 86. Requests and responses compressed with gzip, only where the peer accepts it.
    public static let compressedCallsBothWays = ConformanceScenario(
        "A client call with gzip request compression sends grpc-encoding gzip, its 64 KiB compressible message compressed (flag 1, at most 8 KiB on the wire) and its 10-byte one as it is (flag 0), and reads a gzip response; a server with gzip response compression answers a client that accepts gzip with grpc-encoding gzip and the echo compressed, and a client that does not with the echo uncompressed",
        checklist: ["B2"], timeLimit: .seconds(90)
    ) { context in
        // 64 KiB that compress well (a random 512-byte block 128 times), and a message
        // too short to shrink.
        let large = Array(repeating: ConformancePattern.bytes(count: 512, seed: 86_000), count: 128).flatMap { $0 }
        let short = ConformancePattern.bytes(count: 10, seed: 86_001)
        let compressedLimit = large.count / 8

        // 1. The channel's client to a raw server.
        do {
            let listener = try await context.listen()
            defer { listener.close() }
            let channel = CallChannel(target: context.endpoint(of: listener), transport: context.client)
            defer { channel.close() }
            var options = CallConfiguration()
            options.requestCompression = .gzip
            options.acceptedResponseCompression = [.gzip]
            let recorder = CallRecorder()
            let call = try await context.startCall(on: channel, options: options, handler: recorder)
            call.send(large)
            call.send(short)
            call.finishSending()
            let peer = RawHTTP2Peer(try await context.accept(from: listener), client: false)
            defer { peer.close() }
            try await context.step("the raw server's SETTINGS") { try await peer.send(peer.opening()) }
            let request = try await context.step("the raw server reading the request", seconds: 20) { try await peer.readToEnd(of: 1) }
            try context.expectEqual(request.value("grpc-encoding", inBlock: 0), "gzip", "the request's grpc-encoding: \(request.summary)")
            let accepted = request.value("grpc-accept-encoding", inBlock: 0) ?? ""
            try context.expect(accepted.split(separator: ",").contains("gzip"), "the request's grpc-accept-encoding lists gzip: \(accepted)")
            guard let sent = flaggedMessages(request.data), sent.count == 2 else {
                try context.fail("the request's DATA (\(request.data.count) bytes) is not two whole gRPC messages")
            }
            try context.expectEqual(sent[0].flag, 1, "the large request message's compressed flag")
            try context.expect(
                sent[0].payload.count <= compressedLimit,
                "the large request message is compressed on the wire: \(sent[0].payload.count) bytes for \(large.count)")
            try context.expectBytes(
                try GRPCGzipDecompressor().decompress(sent[0].payload, maximumSize: large.count), large, "the large request message, inflated")
            try context.expectEqual(sent[1].flag, 0, "the short request message's compressed flag (it would not shrink)")
            try context.expectBytes(sent[1].payload, short, "the short request message")
            // The raw server answers with a gzip message.
            let reply = GRPCMessageFramer.frame(large, compressingWith: GRPCGzipCompressor())
            let answer = peer.headers(1, RawHTTP2Peer.responseHeaders + [HPACKField("grpc-encoding", "gzip")], endStream: false)
                + peer.data(1, reply, endStream: false) + peer.headers(1, [HPACKField("grpc-status", "0")], endStream: true)
            try await context.step("the raw server answering with a gzip message") { try await peer.send(answer) }
            try context.expectOK(try await context.status(of: recorder, "the compressed call", quiet: quietLimit), "the compressed call")
            let events = recorder.snapshot
            try context.expectEqual(events.messages.count, 1, "messages the client call received")
            try context.expectBytes(events.messages.first ?? [], large, "the gzip response, inflated by the client")
            context.log("request: \(large.count) bytes sent as \(sent[0].payload.count) (flag 1), \(short.count) as they are (flag 0); a \(reply.count - 5)-byte gzip response read as \(large.count)")
        }

        // 2. A raw client to a call server that compresses responses.
        let serverCalls = Collected<CallRecorder>()
        var configuration = CallServerConfiguration()
        configuration.responseCompression = [.gzip]
        let serverConfiguration = configuration
        let transport = context.server
        let endpoint = context.localEndpoint()
        let server = try await context.step("starting a call server with gzip responses", seconds: 10) {
            try await CallServer.start(transport: transport, on: endpoint, configuration: serverConfiguration) { call in
                let recorder = CallRecorder(onReceive: { call, message in call.send(message) }, onEnd: { call in call.finish() })
                serverCalls.append(recorder)
                return recorder
            }
        }
        defer { server.close() }
        let raw = RawHTTP2Peer(try await context.connect(to: context.target(of: server.localAddress)), client: true)
        defer { raw.close() }
        let body = GRPCMessageFramer.frame(large, compressingWith: GRPCGzipCompressor()) + RawHTTP2Peer.message(short)
        // Stream 1 accepts gzip; stream 3 sends gzip but accepts nothing.
        let requests = raw.opening()
            + raw.headers(
                1, RawHTTP2Peer.request(path: "/switchyard.Echo/Gzip", [HPACKField("grpc-encoding", "gzip"), HPACKField("grpc-accept-encoding", "gzip")]),
                endStream: false)
            + raw.data(1, body, endStream: true)
            + raw.headers(3, RawHTTP2Peer.request(path: "/switchyard.Echo/Identity", [HPACKField("grpc-encoding", "gzip")]), endStream: false)
            + raw.data(3, body, endStream: true)
        try await context.step("the raw client sending two gzip requests") { try await raw.send(requests) }
        let accepting = try await context.step("reading the reply to the client accepting gzip", seconds: 20) { try await raw.readToEnd(of: 1) }
        let refusing = try await context.step("reading the reply to the client not accepting gzip", seconds: 20) { try await raw.readToEnd(of: 3) }
        for (stream, what) in [(accepting, "accepting gzip"), (refusing, "not accepting gzip")] {
            try context.expect(stream.reset == nil && stream.headerBlocks.count == 2, "the reply to the client \(what): \(stream.summary)")
            try context.expectEqual(stream.value("grpc-status", inBlock: 1), "0", "the grpc-status to the client \(what): \(stream.summary)")
        }
        try context.expectEqual(accepting.value("grpc-encoding", inBlock: 0), "gzip", "the response's grpc-encoding to a client accepting gzip")
        guard let echoed = flaggedMessages(accepting.data), echoed.count == 2 else {
            try context.fail("the reply's DATA (\(accepting.data.count) bytes) is not two whole gRPC messages")
        }
        try context.expectEqual(echoed[0].flag, 1, "the large response message's compressed flag")
        try context.expect(
            echoed[0].payload.count <= compressedLimit,
            "the large response message is compressed on the wire: \(echoed[0].payload.count) bytes for \(large.count)")
        try context.expectBytes(
            try GRPCGzipDecompressor().decompress(echoed[0].payload, maximumSize: large.count), large, "the large response message, inflated")
        try context.expectEqual(echoed[1].flag, 0, "the short response message's compressed flag (it would not shrink)")
        try context.expectBytes(echoed[1].payload, short, "the short response message")
        try context.expectEqual(refusing.value("grpc-encoding", inBlock: 0), nil, "the response's grpc-encoding to a client not accepting gzip")
        guard let plain = flaggedMessages(refusing.data), plain.count == 2 else {
            try context.fail("the reply's DATA (\(refusing.data.count) bytes) is not two whole gRPC messages")
        }
        try context.expectEqual(plain.map(\.flag), [0, 0], "the compressed flags of the responses to a client not accepting gzip")
        try context.expectBytes(plain[0].payload, large, "the large response to a client not accepting gzip")
        try context.expectBytes(plain[1].payload, short, "the short response to a client not accepting gzip")
        try context.expectEqual(serverCalls.count, 2, "calls the server saw")
        for index in 0..<2 {
            let events = serverCalls[index].snapshot
            try context.expectEqual(events.messages.map(\.count), [large.count, short.count], "the sizes of the messages server call \(index) read, inflated")
        }

        // 3. The channel's client to the same server, gzip both ways.
        let channel = context.channel(to: server)
        defer { channel.close() }
        var options = CallConfiguration()
        options.requestCompression = .gzip
        options.acceptedResponseCompression = [.gzip]
        let recorder = CallRecorder()
        let call = try await context.startCall(on: channel, options: options, handler: recorder)
        call.send(large)
        call.send(short)
        call.finishSending()
        try context.expectOK(try await context.status(of: recorder, "the gzip echo", quiet: quietLimit), "the gzip echo")
        let events = recorder.snapshot
        try context.expectEqual(events.messages.count, 2, "messages the gzip echo returned")
        try context.expectBytes(events.messages.first ?? [], large, "the large message echoed through gzip both ways")
        try context.expectBytes(events.messages.last ?? [], short, "the short message echoed")
        try await context.waitUntil(seconds: 5, quiet: quietLimit, "the channel has no open call left (\(channel.openCalls))") { channel.openCalls == 0 }
        context.log("response: \(large.count) bytes sent as \(echoed[0].payload.count) to a client accepting gzip, as they are to one that does not")
    }
}

/// The gRPC messages in `data` with their compressed flags; nil if it does not end on
/// a message's end.
private func flaggedMessages(_ data: [UInt8]) -> [(flag: UInt8, payload: [UInt8])]? {
    var messages: [(flag: UInt8, payload: [UInt8])] = []
    var index = 0
    while index < data.count {
        guard data.count - index >= 5 else { return nil }
        var length = 0
        for offset in 1...4 { length = length << 8 | Int(data[index + offset]) }
        guard data.count - index - 5 >= length else { return nil }
        messages.append((data[index], Array(data[(index + 5)..<(index + 5 + length)])))
        index += 5 + length
    }
    return messages
}
