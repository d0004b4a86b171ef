import Switchyard
import SwitchyardCalls
import SwitchyardHPACK
import Synchronization

extension ConformanceScenario {
    /// B1 and B2 for call metadata (grpc-swift 2's request, response and trailing
    /// metadata), on gRPC's wire: the metadata arrives intact, and a bad one ends only its
    /// call. A client's method and metadata (text in a `-bin` key, printable ASCII
    /// strings, a repeated key, a binary value with every byte, a key given in upper
    /// case) arrive intact, with the client's user-agent, and are set when the server
    /// makes the call's handler; the server's response metadata and its trailing metadata
    /// arrive at the client; a hundred pairs filling the server's
    /// `CallConfiguration.maximumMetadataSize` to the byte arrive intact. One byte over it
    /// ends the server's call with `resourceExhausted`, reason `metadata too large` (the
    /// client's with `cancelled`, reason `reset`). A string value that is not printable
    /// ASCII fails `startCall` with `invalidArgument`, reason `invalid metadata`. On a raw
    /// HTTP/2 connection, a `-bin` value that is not base64 is answered with
    /// `grpc-status` 13 before any handler, a value holding a line feed is refused with
    /// RST_STREAM PROTOCOL_ERROR, and a second header block that does not end the stream
    /// ends the server's call with `internal`, reason `reset`; each time the next stream
    /// on that connection, and the next call, are served.
    public static let callMetadata = ConformanceScenario(
        "A call's method and metadata arrive intact before its handler is made, the server's response and trailing metadata reach the client, and oversized or malformed metadata ends only its own call",
        checklist: ["B1", "B2"], timeLimit: .seconds(90)
    ) { context in
        let limit = 4096
        var serverOptions = CallConfiguration()
        serverOptions.maximumMetadataSize = limit
        struct Seen: Sendable {
            var method: String
            var metadata: CallMetadata
        }
        let seen = Collected<Seen>()
        let serverCalls = Collected<CallRecorder>()
        let response = try CallMetadata([
            (key: "server", value: .string("switchyard")), (key: "server-name-bin", value: .binary(Array("switchyard ✓".utf8))), (key: "digest-bin", value: .binary([0, 1, 2, 254, 255])),
        ])
        let server = try await context.startCallServer(options: serverOptions) { call in
            // The handler is made once the client's headers arrived: they are here now.
            seen.append(Seen(method: call.method, metadata: call.metadata))
            call.sendResponseMetadata(response)
            let received = Atomic<Int>(0)
            let recorder = CallRecorder(
                onReceive: { call, message in
                    received.add(1, ordering: .relaxed)
                    call.send(message)
                },
                onEnd: { call in
                    // Trailing metadata with a repeated key, then the status.
                    var trailing = CallMetadata()
                    try? trailing.addString("\(received.load(ordering: .relaxed))", forKey: "messages")
                    try? trailing.addString("first", forKey: "note")
                    try? trailing.addString("second", forKey: "note")
                    try? trailing.addString(call.method, forKey: "method")
                    call.setTrailingMetadata(trailing)
                    call.finish()
                })
            serverCalls.append(recorder)
            return recorder
        }
        defer { server.close() }
        let channel = context.channel(to: server)

        /// One echo call to `method` with `metadata`; what the client saw.
        func echoCall(_ method: String, _ metadata: CallMetadata, _ what: String) async throws
            -> (replies: [[UInt8]], status: CallStatus, response: CallMetadata, trailing: CallMetadata)
        {
            let message = ConformancePattern.bytes(count: 1000, seed: 64)
            return try await context.step(what, seconds: 20) {
                try await channel.withCall(method: method, metadata: metadata) { call in
                    try await call.write(message)
                    try await call.finishSending()
                    var replies: [[UInt8]] = []
                    for try await reply in call.messages { replies.append(reply) }
                    return (replies, await call.status(), call.responseMetadata, call.trailingMetadata)
                }
            }
        }

        /// Checks the echo and both ends' metadata of a call that succeeded.
        func expectIntact(
            _ outcome: (replies: [[UInt8]], status: CallStatus, response: CallMetadata, trailing: CallMetadata),
            method: String, metadata: CallMetadata, _ what: String
        ) throws {
            try context.expectOK(outcome.status, "the status of \(what)")
            try context.expectEqual(outcome.replies.count, 1, "echoed messages in \(what)")
            var last = seen[seen.count - 1]
            try context.expectEqual(last.method, method, "the method the server's handler saw in \(what)")
            // gRPC's request carries the client's user-agent, which the server sees too.
            let agents = last.metadata[stringValues: "user-agent"]
            try context.expect(
                agents.count == 1 && agents[0].hasPrefix("switchyard/"), "the user-agent the server's handler saw in \(what): \(agents)")
            _ = last.metadata.removeAll(forKey: "user-agent")
            try context.expect(
                last.metadata == metadata,
                "the metadata the server's handler saw in \(what): \(last.metadata.count) pairs, expected \(metadata.count): \(String(describing: last.metadata).prefix(300))")
            try context.expectEqual(outcome.response, response, "the response metadata the client received in \(what)")
            var trailing = CallMetadata()
            try trailing.addString("1", forKey: "messages")
            try trailing.addString("first", forKey: "note")
            try trailing.addString("second", forKey: "note")
            try trailing.addString(method, forKey: "method")
            try context.expectEqual(outcome.trailing, trailing, "the trailing metadata the client received in \(what)")
        }

        // A method and metadata of every sort.
        let method = "/switchyard.Echo/Stream"
        var metadata = CallMetadata()
        try metadata.addBinary(Array("Grüße, 世界 🚂".utf8), forKey: "greeting-bin")
        try metadata.addString("printable ASCII: ~!@#$%^&*()_+{}|:<>? `-=[]\\;',./", forKey: "greeting")
        try metadata.addString("one", forKey: "x-repeated")
        try metadata.addString("two", forKey: "x-repeated")
        try metadata.addBinary((0...255).map { UInt8($0) }, forKey: "every-byte-bin")
        try metadata.addString("three", forKey: "X-Repeated")
        try metadata.addString("", forKey: "empty")
        try context.expectEqual(metadata[stringValues: "x-repeated"], ["one", "two", "three"], "the repeated key's values, in order")
        let varied = try await echoCall(method, metadata, "a call with varied metadata")
        try expectIntact(varied, method: method, metadata: metadata, "a call with varied metadata")
        try context.expectEqual(seen[0].metadata[stringValues: "X-REPEATED"], ["one", "two", "three"], "the repeated key's values at the server")

        // A hundred pairs filling the server's limit to the byte: the metadata a call's
        // engine reads is the method (2 + its bytes) and, per pair, 1 + key + 4 + value
        // bytes, the client's user-agent among them.
        let agent = seen[0].metadata[stringValues: "user-agent"].first ?? ""
        func filling(_ size: Int) throws -> CallMetadata {
            var pairs = CallMetadata()
            var left = size - 2 - 2 - (1 + "user-agent".utf8.count + 4 + agent.utf8.count)  // the method "/m", the user-agent
            for index in 0..<100 {
                let key = "h-\(index / 10)\(index % 10)"
                let value = index < 99 ? 30 : left - 1 - key.utf8.count - 4
                try pairs.addString(String(repeating: Character(UnicodeScalar(UInt8(0x61 + index % 26))), count: value), forKey: key)
                left -= 1 + key.utf8.count + 4 + value
            }
            return pairs
        }
        let full = try filling(limit)
        let atLimit = try await echoCall("/m", full, "a call with 100 pairs filling the server's \(limit)-byte limit")
        try expectIntact(atLimit, method: "/m", metadata: full, "a call with 100 pairs filling the server's \(limit)-byte limit")
        context.log("100 pairs, \(limit) bytes of headers: intact")

        // One byte over: the server's call ends at the frame's prefix; its client sees the
        // connection end before a status; the server goes on.
        do {
            let index = serverCalls.count
            let over = try filling(limit + 1)
            let recorder = CallRecorder()
            _ = try await context.step("starting a call with \(limit + 1) bytes of headers", seconds: 15) {
                try await channel.startCall(method: "/m", metadata: over, handler: recorder)
            }
            let status = try await context.status(of: recorder, "the client's call whose headers are \(limit + 1) bytes", quiet: quietLimit)
            // The server's call resets its stream (RST_STREAM CANCEL).
            try context.expectStatus(status, code: .cancelled, reason: .reset, "the client's call whose headers were refused (the server reset its stream)")
            try await context.waitUntil(seconds: 10, quiet: quietLimit, "the server made the refused call's handler") { serverCalls.count > index }
            let serverStatus = try await context.status(of: serverCalls[index], "the server's call with \(limit + 1) bytes of headers", quiet: quietLimit)
            try context.expectStatus(serverStatus, code: .resourceExhausted, reason: .metadataTooLarge, "the server's call with \(limit + 1) bytes of headers")
            try context.expectEqual(serverCalls[index].snapshot.messages.count, 0, "messages the refused call's handler received")
            try context.expectWellBehaved(serverCalls[index], "the server's call with headers over its limit")
            context.log("headers of \(limit + 1) bytes: the server's call ended with \(serverStatus), the client's with \(status)")
            let next = try await echoCall(method, metadata, "a call after headers over the limit")
            try expectIntact(next, method: method, metadata: metadata, "a call after headers over the limit")
        }

        // A string value gRPC's wire cannot carry (not printable ASCII) fails startCall,
        // before any connect; text goes in a "-bin" key.
        do {
            var unicode = CallMetadata()
            try unicode.addString("Grüße, 世界 🚂", forKey: "greeting")
            let index = serverCalls.count
            do {
                _ = try await channel.startCall(method: method, metadata: unicode, handler: CallRecorder())
                try context.fail("startCall with the string value \"Grüße, 世界 🚂\" succeeded; gRPC's wire cannot carry it")
            } catch let error as TransportError {
                try context.expectError(error, code: .invalidArgument, reason: .invalidMetadata, "startCall with a string value that is not printable ASCII")
            }
            try context.expectEqual(serverCalls.count, index, "server calls made for a call whose metadata startCall refused")
        }

        // Raw HTTP/2 clients, on one connection: header blocks a call cannot read end only
        // their stream; a good stream after each, on the same connection, is served.
        let endpoint = context.target(of: server.localAddress)
        let raw = RawHTTP2Peer(try await context.connect(to: endpoint), client: true)
        defer { raw.close() }
        try await context.step("the raw client's preface and SETTINGS") { try await raw.send(raw.opening()) }
        struct RawCase {
            var name: String
            var blocks: [[HPACKField]]
            /// The grpc-status of a trailers-only answer before any handler, or nil: the
            /// HTTP/2 layer resets the stream (PROTOCOL_ERROR).
            var answer: String?
            /// The server's call is made (its handler sees the first block) and ends so.
            var serverEnds: (code: TransportError.Code, reason: TransportError.Reason)?
        }
        let request = RawHTTP2Peer.request(path: method)
        let cases: [RawCase] = [
            RawCase(name: "a -bin value that is not base64", blocks: [request + [HPACKField("digest-bin", "not base64!")]],
                    answer: "13", serverEnds: nil),
            RawCase(name: "a value holding a line feed", blocks: [request + [HPACKField("note", "one\ntwo")]],
                    answer: nil, serverEnds: nil),
            RawCase(name: "a second header block that does not end the stream", blocks: [request, [HPACKField("late", "yes")]],
                    answer: nil, serverEnds: (.internal, .reset)),
        ]
        var nextStream: UInt32 = 1
        for input in cases {
            let index = serverCalls.count
            let stream = nextStream
            nextStream += 2
            var bytes: [UInt8] = []
            for block in input.blocks { bytes += raw.headers(stream, block, endStream: false) }
            let written = bytes
            try await context.step("writing \(input.name) on stream \(stream)") { try await raw.send(written) }
            let reply = try await context.step("the end of stream \(stream) after \(input.name)") { try await raw.readToEnd(of: stream) }
            if let answer = input.answer {
                try context.expect(
                    reply.headerBlocks.count == 1 && reply.headerBlocks[0].endStream && reply.value("grpc-status", inBlock: 0) == answer,
                    "stream \(stream) after \(input.name): expected a trailers-only answer with grpc-status \(answer); \(reply.summary)")
            } else {
                try context.expect(reply.reset == .protocolError && reply.headerBlocks.isEmpty, "stream \(stream) after \(input.name): expected RST_STREAM PROTOCOL_ERROR; \(reply.summary)")
            }
            if let ends = input.serverEnds {
                try await context.waitUntil(seconds: 10, quiet: quietLimit, "the server made the call's handler after \(input.name)") { serverCalls.count > index }
                let status = try await context.status(of: serverCalls[index], "the server's call after \(input.name)", quiet: quietLimit)
                try context.expectStatus(status, code: ends.code, reason: ends.reason, "the server's call after \(input.name)")
                try context.expectWellBehaved(serverCalls[index], "the server's call after \(input.name)")
            } else {
                try context.expectEqual(serverCalls.count, index, "server calls made for \(input.name) (it is refused before any handler)")
            }
            context.log("\(input.name): the raw client saw \(reply.summary)")

            let after = nextStream
            nextStream += 2
            let message = ConformancePattern.bytes(count: 300, seed: UInt64(64_000 + after))
            let next = try await context.step("a good stream on the same connection after \(input.name)", seconds: 20) {
                try await raw.send(raw.headers(after, request + [HPACKField("x-after", "yes")], endStream: false) + raw.data(after, RawHTTP2Peer.message(message), endStream: true))
                return try await raw.readToEnd(of: after)
            }
            try context.expect(
                next.reset == nil && next.value("grpc-status", inBlock: 1) == "0" && next.messages?.first == message,
                "the good stream \(after) after \(input.name) on the same connection: \(next.summary)")
            try context.expect(raw.goAway == nil && !raw.endOfStream, "the server ended the raw client's connection after \(input.name)")
            try context.expectEqual(seen[seen.count - 1].metadata[stringValues: "x-after"], ["yes"], "the metadata of the good stream after \(input.name)")

            let echo = try await echoCall(method, metadata, "a call after \(input.name)")
            try expectIntact(echo, method: method, metadata: metadata, "a call after \(input.name)")
        }
        raw.close()
        try await context.waitUntil(seconds: 10, quiet: quietLimit, "the server has no open call left (\(server.openCalls))") { server.openCalls == 0 }
    }
}
