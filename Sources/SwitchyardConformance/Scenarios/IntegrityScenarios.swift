import Switchyard
import Synchronization

// Integrity and write completions: KitChecklist.md section B, and F1.

extension ConformanceScenario {
    /// 3. Echo from 1 byte to 16 MiB through the raw ``EchoHandler``.
    public static let echoIntegrity = ConformanceScenario(
        "Bytes written in random chunks echo back intact, from 1 byte to 16 MiB",
        checklist: ["B1", "B4", "B7", "C2", "C5", "D3"]
    ) { context in
        let listener = try await context.listen()
        defer { listener.close() }
        let echoes = Task(executorPreference: KitClock.taskExecutor) {
            for await connection in listener.connections { EchoHandler(connection).start() }
        }
        defer { echoes.cancel() }

        // (size, whether it goes as one write); the rest go in random chunks.
        let cases: [(size: Int, oneWrite: Bool)] = [
            (1, false), (100, false), (4096, false), (65_537, false), (1 << 20, false),
            (8 << 20, true), (16 << 20, false),
        ]
        for (index, testCase) in cases.enumerated() {
            let size = testCase.size
            let started = KitClock.now
            let client = AsyncConnection(try await context.connect(to: context.endpoint(of: listener)))
            let payload = ConformancePattern.bytes(count: size, seed: UInt64(300 + index))
            // The writer runs beside the reader: the echo server stops reading while its
            // writes are pending, so a client that wrote everything first could deadlock.
            let writer = Task(executorPreference: KitClock.taskExecutor) {
                if testCase.oneWrite {
                    try await client.write(payload)
                    return 1
                }
                var generator = ConformancePattern.Generator(seed: UInt64(size))
                var offset = 0
                var writes = 0
                while offset < size {
                    // Mostly small chunks, sometimes large ones.
                    let limit = generator.next(in: 0...3) == 0 ? 256 * 1024 : 8 * 1024
                    let length = min(size - offset, generator.next(in: 1...limit))
                    try await client.write(Array(payload[offset..<offset + length]))
                    offset += length
                    writes += 1
                }
                return writes
            }
            let echoed: [UInt8]
            do {
                echoed = try await context.read(exactly: size, from: client, seconds: 90)
            } catch {
                writer.cancel()
                throw error
            }
            let writes = try await context.step("the writer of \(size) bytes") { try await writer.value }
            try context.expectBytes(echoed, payload, "the echo of \(size) bytes written in \(writes) writes")
            client.close()
            context.log("\(size) bytes in \(writes) writes echoed intact in \(KitClock.now - started)")
        }
    }

    /// 4. A thousand connections at once, each with its own message.
    public static let concurrentConnections = ConformanceScenario(
        "A thousand concurrent connections each echo their own message intact",
        checklist: ["A11", "B1"]
    ) { context in
        let listener = try await context.listen()
        defer { listener.close() }
        let echoes = Task(executorPreference: KitClock.taskExecutor) {
            for await connection in listener.connections { EchoHandler(connection).start() }
        }
        defer { echoes.cancel() }
        let endpoint = context.endpoint(of: listener)
        let client = context.client
        let count = 1000
        let started = KitClock.now
        // What the connections have done so far, for a failure to say: a backend that
        // loses bytes leaves echoes short, and the wait ends once none moved for a while.
        let tally = EchoTally(count: count)
        let progress = WaitProgress(tally.summary)
        let succeeded = try await context.within(seconds: 100, quiet: 5, "\(count) concurrent echoes", progress: progress) {
            try await withThrowingTaskGroup(of: Void.self, returning: Int.self) { group in
                for index in 0..<count {
                    group.addTask {
                        let message = Array("connection \(index): ".utf8)
                            + ConformancePattern.bytes(count: 16 + index % 200, seed: UInt64(4000 + index))
                        let connection: AsyncConnection
                        do {
                            connection = AsyncConnection(try await client.connect(to: endpoint))
                        } catch {
                            throw context.failure("connection \(index) of \(count): connect failed: \(error)")
                        }
                        defer { connection.close() }
                        progress.advance(tally.connected())
                        var echoed: [UInt8] = []
                        do {
                            try await connection.write(message)
                            while echoed.count < message.count {
                                guard let chunk = try await connection.read(upTo: message.count - echoed.count) else {
                                    throw TransportError(
                                        code: .unavailable, reason: .closed,
                                        message: "end of stream after \(echoed.count) of \(message.count) bytes")
                                }
                                echoed += chunk
                                progress.advance(tally.received(chunk.count))
                            }
                        } catch {
                            throw context.failure("connection \(index) of \(count): the echo failed: \(error)")
                        }
                        if let difference = ConformancePattern.difference(echoed, message) {
                            throw context.failure("connection \(index) of \(count) got someone else's bytes or lost some: \(difference)")
                        }
                        progress.advance(tally.echoed())
                    }
                }
                var succeeded = 0
                for try await _ in group { succeeded += 1 }
                return succeeded
            }
        }
        try context.expectEqual(succeeded, count, "connections that echoed")
        context.log("\(count) connections echoed in \(KitClock.now - started)")
    }

    /// 11. Completion order, and completions when closing with writes queued.
    public static let writeCompletions = ConformanceScenario(
        "Write completions run in order and exactly once, also when the connection closes with ten thousand writes queued",
        checklist: ["B5", "B3", "F1", "F2"]
    ) { context in
        // Part 1: 1,000 writes of varied sizes, issued without waiting.
        do {
            let (client, serverRaw) = try await context.connectedRawPair()
            _ = RecordingHandler(on: client)
            let server = AsyncConnection(serverRaw)
            var generator = ConformancePattern.Generator(seed: 11)
            let payloads = (0..<1000).map { index in
                ConformancePattern.bytes(count: generator.next(in: 1...16_384), seed: UInt64(11_000 + index))
            }
            var expected: [UInt8] = []
            expected.reserveCapacity(payloads.reduce(0) { $0 + $1.count })
            for payload in payloads { expected += payload }
            let total = expected.count
            let reader = Task(executorPreference: KitClock.taskExecutor) { [server] in try await context.read(exactly: total, from: server, seconds: 60) }
            let log = CompletionLog()
            for (index, payload) in payloads.enumerated() {
                // Both write paths, alternately.
                if index.isMultiple(of: 2) {
                    client.write(payload) { log.record(index, $0) }
                } else {
                    payload.withUnsafeBytes { client.write(borrowing: $0) { log.record(index, $0) } }
                }
            }
            let received = try await reader.value
            try await context.waitUntil(seconds: 10, quiet: quietLimit, "all 1000 write completions ran (\(log.count) did)") { log.count >= 1000 }
            try await KitClock.sleep(for: .milliseconds(100))
            let entries = log.all
            try context.expectEqual(entries.count, 1000, "how many write completions ran for 1000 writes")
            if let misplaced = entries.enumerated().first(where: { $0.offset != $0.element.index }) {
                try context.fail("write completions out of order: position \(misplaced.offset) was write \(misplaced.element.index); order begins \(entries.prefix(misplaced.offset + 3).map(\.index))")
            }
            if let failed = entries.first(where: { $0.error != nil }) {
                try context.fail("write \(failed.index) completed with \(failed.error!); expected nil")
            }
            try context.expectBytes(received, expected, "the concatenation of 1000 writes as the peer read it")
            client.close()
            server.close()
        }

        // Part 2: close with 10,000 writes queued while the peer does not read.
        do {
            let (client, server) = try await context.connectedRawPair()
            _ = RecordingHandler(on: client)
            let serverEvents = RecordingHandler(on: server)  // and does not read until the client closed
            let log = CompletionLog()
            let chunk = ConformancePattern.bytes(count: 1024, seed: 12)
            let count = 10_000
            for index in 0..<count {
                client.write(chunk) { log.record(index, $0) }
            }
            client.close()
            try await context.waitUntil(seconds: 20, quiet: quietLimit, "all \(count) completions ran after close (\(log.count) did)") { log.count >= count }
            try await KitClock.sleep(for: .milliseconds(100))
            let entries = log.all
            try context.expectEqual(entries.count, count, "how many completions ran for \(count) writes queued before close")
            var seen = [Bool](repeating: false, count: count)
            var cancelled = 0
            for (position, entry) in entries.enumerated() {
                try context.expect(!seen[entry.index], "write \(entry.index)'s completion ran twice")
                seen[entry.index] = true
                try context.expectEqual(entry.index, position, "the write whose completion ran at position \(position)")
                if let error = entry.error {
                    try context.expectError(error, code: .cancelled, reason: .closed, "the completion of write \(entry.index), queued when the connection closed")
                    cancelled += 1
                } else {
                    try context.expect(cancelled == 0, "write \(entry.index) completed successfully after an earlier write was cancelled by the close")
                }
            }
            context.log("\(count - cancelled) writes were in the kernel before the close, \(cancelled) were cancelled")

            // What the peer reads: the completed writes, at most part of one more (a write
            // the kernel took in part), never the cancelled rest.
            server.startReading()
            try await context.waitUntil(seconds: 10, quiet: quietLimit, "the server saw end of stream after the client closed (read \(serverEvents.byteCount) bytes)") {
                let events = serverEvents.snapshot
                return events.readEnds > 0 || !events.closes.isEmpty
            }
            let events = serverEvents.snapshot
            // Over TLS the peer sees `unavailable`/`truncated`, never a clean end: the
            // close's `close_notify` would have to follow the records already queued, and
            // the close cancels those, so TCP ends without it (and may cut a record in two).
            // Truncated is what the peer did receive, and the TLS layer says so (ERRORS.md).
            let overTLS = context.serverTransportBackend?.speaksTLS == true
            if let error = events.closes.first ?? nil, !(overTLS && error.code == .unavailable && error.reason == .truncated) {
                try context.fail("the server's connection ended with \(error) instead of a clean end of stream\(overTLS ? " or unavailable (truncated)" : "") after reading \(events.bytes.count) bytes")
            }
            let completed = (count - cancelled) * chunk.count
            try context.expect(
                events.bytes.count >= completed && events.bytes.count < completed + chunk.count,
                "the peer read \(events.bytes.count) bytes; \(count - cancelled) writes of \(chunk.count) completed, so expected \(completed) bytes plus at most part of one cancelled write")
            for start in stride(from: 0, to: events.bytes.count, by: chunk.count) {
                let piece = Array(events.bytes[start..<min(start + chunk.count, events.bytes.count)])
                try context.expectBytes(piece, Array(chunk[..<piece.count]), "write \(start / chunk.count) as the peer read it")
            }
            server.close()
        }
    }
}

/// What a thousand echoing connections have done so far: how many connected, how many
/// bytes came back, how many echoes were whole.
private final class EchoTally: Sendable {
    private let counts = Mutex<(connected: Int, bytes: Int, echoed: Int)>((0, 0, 0))
    let count: Int

    init(count: Int) {
        self.count = count
    }

    func connected() -> String { update { $0.connected += 1 } }
    func received(_ bytes: Int) -> String { update { $0.bytes += bytes } }
    func echoed() -> String { update { $0.echoed += 1 } }

    var summary: String { update { _ in } }

    private func update(_ change: (inout (connected: Int, bytes: Int, echoed: Int)) -> Void) -> String {
        let now = counts.withLock { counts in
            change(&counts)
            return counts
        }
        return "\(now.connected) of \(count) connected, \(now.echoed) echoed whole, \(now.bytes) bytes echoed in all"
    }
}
