import Switchyard
import Synchronization

extension ConformanceScenario {
    /// 36. acceptConnections hands over every connection on its own loop, queued ones too.
    public static let acceptHandler = ConformanceScenario(
        "An accept handler gets every accepted connection on that connection's loop, also those accepted before it was set",
        checklist: ["A1", "A10"], timeLimit: .seconds(60)
    ) { context in
        let listener = try await context.listen()
        defer { listener.close() }
        let endpoint = context.endpoint(of: listener)
        // Two connections accepted before the handler is set (the late accept).
        var clients: [AsyncConnection] = []
        for _ in 0..<2 { clients.append(AsyncConnection(try await context.connect(to: endpoint))) }
        try await context.waitUntil(seconds: 5, quiet: quietLimit, "two connections were accepted and queued") { listener.connections.queuedCount == 2 }

        let received = Mutex<[(peer: Endpoint, onLoop: Bool)]>([])
        listener.acceptConnections { connection in
            received.withLock { $0.append((connection.remoteAddress, connection.eventLoop.inEventLoop)) }
            EchoHandler(connection).start()
        }
        for _ in 0..<8 { clients.append(AsyncConnection(try await context.connect(to: endpoint))) }
        try await context.waitUntil(seconds: 10, quiet: quietLimit, "the handler got all 10 connections") { received.withLock { $0.count } == 10 }
        let got = received.withLock { $0 }
        try context.expect(got.allSatisfy(\.onLoop), "the handler ran off a connection's loop")
        try context.expectEqual(
            Set(got.map(\.peer)), Set(clients.map { $0.connection.localAddress }),
            "the client addresses the handler saw")
        try context.expectEqual(listener.connections.queuedCount, 0, "connections left in the queue")
        // Each handed-over connection works.
        for (index, client) in clients.enumerated() {
            let payload = ConformancePattern.bytes(count: 1000, seed: UInt64(36_000 + index))
            try await client.write(payload)
            let echoed = try await context.read(exactly: payload.count, from: client)
            try context.expectBytes(echoed, payload, "the echo on connection \(index)")
            client.close()
        }
    }
}
