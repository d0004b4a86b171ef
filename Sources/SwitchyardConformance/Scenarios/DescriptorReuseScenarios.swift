import Switchyard

// Descriptor reuse: KitChecklist.md A11 (with E7 and G2 on the way).

extension ConformanceScenario {
    /// 60. A connection closed with unread data, replaced at once, 200 times: the kernel
    /// hands the next connect and accept the numbers just freed, and nothing of the old
    /// connection (bytes it had not read, its reset, its close) reaches the new one.
    public static let descriptorReuseNoCrossTalk = ConformanceScenario(
        "A connection closed with unread data and replaced at once, 200 times, never passes its bytes or events to the next one",
        checklist: ["A11", "E7", "G2"], timeLimit: .seconds(240)
    ) { context in
        let listener = try await context.listen()
        defer { listener.close() }
        let endpoint = context.endpoint(of: listener)
        let rounds = 200
        let first = 1024
        let unread = 32 * 1024

        struct Round {
            var client: RecordingHandler
            var server: RecordingHandler
            var toClient: [UInt8]
            var toServer: [UInt8]
        }
        var finished: [Round] = []
        var clientAddresses: Set<String> = []

        for round in 0..<rounds {
            let client = try await context.connect(to: endpoint)
            let server = try await context.accept(from: listener)
            let clientEvents = RecordingHandler(on: client)
            let serverEvents = RecordingHandler(on: server)
            // Every round's bytes differ (the seed), so a byte of another round shows.
            let toClient = ConformancePattern.bytes(count: first + unread, seed: UInt64(600_000 + 2 * round))
            let toServer = ConformancePattern.bytes(count: first + unread, seed: UInt64(600_001 + 2 * round))
            clientAddresses.insert("\(client.localAddress)")
            client.startReading()
            server.startReading()
            try context.expectEqual(try await context.write(Array(toClient[..<first]), on: server), nil, "round \(round): the server's first write")
            try context.expectEqual(try await context.write(Array(toServer[..<first]), on: client), nil, "round \(round): the client's first write")
            try await context.waitUntil(seconds: 10, quiet: quietLimit, "round \(round): both ends read the first \(first) bytes (the client has \(clientEvents.byteCount), the server \(serverEvents.byteCount))") {
                clientEvents.byteCount >= first && serverEvents.byteCount >= first
            }
            // The new connection saw only its own bytes, and no event of the one before.
            for (side, events, expected) in [("client", clientEvents.snapshot, toClient), ("server", serverEvents.snapshot, toServer)] {
                try context.expectBytes(Array(events.bytes.prefix(first)), Array(expected[..<first]), "round \(round): what the new \(side) connection read first")
                try context.expect(events.closes.isEmpty && events.readEnds == 0,
                    "round \(round): the new \(side) connection got \(events.closes.count) close and \(events.readEnds) end-of-stream events before anything ended it (another connection's events)")
            }
            // Unread data at both ends: even rounds stop reading first, odd rounds keep
            // reading, so the close races bytes the loop is delivering.
            if round % 2 == 0 {
                client.stopReading()
                server.stopReading()
            }
            server.write(Array(toClient[first...]), completion: nil)
            client.write(Array(toServer[first...]), completion: nil)
            if round % 2 == 0 {
                try await context.waitUntil(seconds: 10, quiet: quietLimit, "round \(round): the writes of unread data were handed to the kernel") {
                    server.pendingWriteBytes == 0 && client.pendingWriteBytes == 0
                }
            }
            // Close both with data unread, and connect again at once (the next round).
            client.close()
            server.close()
            finished.append(Round(client: clientEvents, server: serverEvents, toClient: toClient, toServer: toServer))
        }

        // Every closed connection ended once, saw only its own bytes, none after its end.
        try await context.waitUntil(seconds: 10, quiet: quietLimit, "every closed connection's connectionDidClose ran") {
            finished.allSatisfy { !$0.client.snapshot.closes.isEmpty && !$0.server.snapshot.closes.isEmpty }
        }
        try await KitClock.sleep(for: .milliseconds(100))
        var clientBytes = 0
        for (round, record) in finished.enumerated() {
            for (side, events, expected) in [("client", record.client.snapshot, record.toClient), ("server", record.server.snapshot, record.toServer)] {
                try context.expectBytes(events.bytes, Array(expected.prefix(events.bytes.count)), "round \(round): what the \(side) connection read (bytes of another connection?)")
                try context.expectEqual(events.closes.count, 1, "round \(round): how many times the \(side)'s connectionDidClose ran")
                // Closed locally (nil), or the peer's reset (it closed with our bytes
                // unread) reached it first.
                if let error = events.closes[0] {
                    try context.expectError(error, code: .unavailable, reason: .reset, "round \(round): the \(side)'s connectionDidClose (closed locally, or reset by its peer)")
                }
                try context.expectEqual(events.lateBytes, 0, "round \(round): bytes the \(side) got after it ended")
                try context.expect(events.offLoopCalls.isEmpty, "round \(round): the \(side)'s callbacks ran off its loop: \(events.offLoopCalls)")
            }
            clientBytes += record.client.snapshot.bytes.count
        }
        context.record("rounds", count: rounds)
        context.record("client bytes read", bytes: clientBytes)
        context.log("\(rounds) rounds, \(clientAddresses.count) distinct client addresses, \(clientBytes) bytes read by clients, no cross-talk")
    }
}
