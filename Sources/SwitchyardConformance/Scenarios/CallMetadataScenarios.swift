import Switchyard
import SwitchyardCalls
import Synchronization

extension ConformanceScenario {
    /// B1 and B2 for call metadata (grpc-swift 2's request, response and trailing
    /// metadata): the metadata frames arrive intact, and a bad one ends only its call. A client's method and metadata (a Unicode value, a repeated key, a
    /// binary value with every byte, a key given in upper case) arrive intact and are
    /// set when the server makes the call's handler; the server's response metadata and
    /// its trailing metadata arrive at the client; a hundred pairs filling the server's
    /// `CallConfiguration.maximumMetadataSize` to the byte arrive intact. One byte over it
    /// ends the server's call with `resourceExhausted`, reason `metadata too large`; a
    /// malformed headers frame, or a second one, ends it with `internal`, reason
    /// `protocol violation`; the server keeps serving the next call each time.
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
            (key: "server", value: .string("switchyard ✓")), (key: "digest-bin", value: .binary([0, 1, 2, 254, 255])),
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
            let last = seen[seen.count - 1]
            try context.expectEqual(last.method, method, "the method the server's handler saw in \(what)")
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
        try metadata.addString("Grüße, 世界 🚂", forKey: "greeting")
        try metadata.addString("one", forKey: "x-repeated")
        try metadata.addString("two", forKey: "x-repeated")
        try metadata.addBinary((0...255).map { UInt8($0) }, forKey: "every-byte-bin")
        try metadata.addString("three", forKey: "X-Repeated")
        try metadata.addString("", forKey: "empty")
        try context.expectEqual(metadata[stringValues: "x-repeated"], ["one", "two", "three"], "the repeated key's values, in order")
        let varied = try await echoCall(method, metadata, "a call with varied metadata")
        try expectIntact(varied, method: method, metadata: metadata, "a call with varied metadata")
        try context.expectEqual(seen[0].metadata[stringValues: "X-REPEATED"], ["one", "two", "three"], "the repeated key's values at the server")

        // A hundred pairs filling the server's limit to the byte: the headers payload is
        // the method (2 + its bytes) and, per pair, 1 + key + 4 + value bytes.
        func filling(_ size: Int) throws -> CallMetadata {
            var pairs = CallMetadata()
            var left = size - 2 - 2  // the method "/m"
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
            try context.expect(status.error?.code == .unavailable, "the client's call whose headers were refused ended with \(status); expected unavailable (the server closed it)")
            try await context.waitUntil(seconds: 10, quiet: quietLimit, "the server made the refused call's handler") { serverCalls.count > index }
            let serverStatus = try await context.status(of: serverCalls[index], "the server's call with \(limit + 1) bytes of headers", quiet: quietLimit)
            try context.expectStatus(serverStatus, code: .resourceExhausted, reason: .metadataTooLarge, "the server's call with \(limit + 1) bytes of headers")
            try context.expectEqual(serverCalls[index].snapshot.messages.count, 0, "messages the refused call's handler received")
            try context.expectWellBehaved(serverCalls[index], "the server's call with headers over its limit")
            context.log("headers of \(limit + 1) bytes: the server's call ended with \(serverStatus), the client's with \(status)")
            let next = try await echoCall(method, metadata, "a call after headers over the limit")
            try expectIntact(next, method: method, metadata: metadata, "a call after headers over the limit")
        }

        // Raw clients: a malformed headers frame, and headers twice.
        let endpoint = context.target(of: server.localAddress)
        let raw: [(name: String, bytes: [UInt8])] = [
            ("a headers frame whose method holds a line feed", Frame.encode(.headers, payload: [0, 1, 0x0a])),
            ("a headers frame whose value runs past its end", Frame.encode(.headers, payload: [0, 0, 1, 0x6b, 0, 0, 0, 9, 0x61])),
            ("two headers frames", Frame.encode(.headers, payload: [0, 0]) + Frame.encode(.headers, payload: [0, 0])),
        ]
        for input in raw {
            let index = serverCalls.count
            let connection = AsyncConnection(try await context.connect(to: endpoint))
            try await context.step("writing \(input.name)") { try await connection.write(input.bytes) }
            try await context.waitUntil(seconds: 10, quiet: quietLimit, "the server made the call's handler after \(input.name)") { serverCalls.count > index }
            let status = try await context.status(of: serverCalls[index], "the server's call after \(input.name)", quiet: quietLimit)
            try context.expectStatus(status, code: .internal, reason: .protocolViolation, "the server's call after \(input.name)")
            _ = try await context.drainToEndOrReset(connection, "the raw client's read after \(input.name)")
            connection.close()
            context.log("\(input.name): the server's call ended with \(status)")
            let next = try await echoCall(method, metadata, "a call after \(input.name)")
            try expectIntact(next, method: method, metadata: metadata, "a call after \(input.name)")
        }
        try await context.waitUntil(seconds: 10, quiet: quietLimit, "the server has no open call left (\(server.openCalls))") { server.openCalls == 0 }
    }
}
