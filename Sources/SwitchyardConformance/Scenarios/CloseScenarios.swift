import Glibc
import Switchyard
import Synchronization

// Half-close, close, reset, shutdown: KitChecklist.md sections D, E and F.

extension ConformanceScenario {
    /// 5. Half-close: end of stream one way, the other way goes on.
    public static let halfClose = ConformanceScenario(
        "After the client shuts its output down, the server reads everything then end of stream and can still reply",
        checklist: ["D1", "D3", "D6", "D8", "D9"]
    ) { context in
        let (client, server) = try await context.connectedPair()
        let request = ConformancePattern.bytes(count: 1 << 20, seed: 5)
        // shutdownOutput right behind an unfinished write: the FIN waits for the queued
        // bytes (D8). The kernel cannot hold 1 MiB, so the write is still queued.
        let writeResult = CompletionLog()
        client.connection.write(request) { writeResult.record(0, $0) }
        let shutdown = Task(executorPreference: KitClock.taskExecutor) { try await client.shutdownOutput() }
        let received = try await context.readToEnd(from: server)
        try await context.step("the client's shutdownOutput") { try await shutdown.value }
        try await context.waitUntil(seconds: 5, quiet: quietLimit, "the write queued before shutdownOutput completed") { writeResult.count == 1 }
        try context.expect(writeResult.all[0].error == nil, "the write queued before shutdownOutput completed with \(writeResult.all[0].error!); expected nil")
        try context.expectBytes(received, request, "what the server read before end of stream")
        let again = try await context.step("a second read at end of stream") { try await server.read() }
        try context.expect(again == nil, "a read after end of stream returned \(again!.count) bytes; expected nil again")

        // End of stream did not close the server's side: it still writes, and the
        // client, whose output is shut, still reads.
        let reply = ConformancePattern.bytes(count: 50_000, seed: 55)
        let replyWriter = Task(executorPreference: KitClock.taskExecutor) { try await server.write(reply) }
        let replyReceived = try await context.read(exactly: reply.count, from: client)
        try await context.step("the server's reply after end of stream") { try await replyWriter.value }
        try context.expectBytes(replyReceived, reply, "the reply the client read after shutting its output down")
        server.close()
        let end = try await context.step("the client's read after the server closed") { try await client.read() }
        try context.expect(end == nil, "the client read \(end?.count ?? 0) more bytes after the reply; expected end of stream")
        client.close()

        // Both sides shut their output down at once: each sees end of stream, no hang.
        let (left, right) = try await context.connectedPair()
        let ends = try await context.step("simultaneous shutdownOutput on both sides, then a read on each", seconds: 10) {
            async let leftShutdown: Void = left.shutdownOutput()
            async let rightShutdown: Void = right.shutdownOutput()
            _ = try await (leftShutdown, rightShutdown)
            let leftEnd = try await left.read()
            let rightEnd = try await right.read()
            return (leftEnd?.count, rightEnd?.count)
        }
        try context.expect(ends.0 == nil && ends.1 == nil, "after simultaneous shutdownOutput, the reads returned \(ends); expected end of stream on both sides")
        left.close()
        right.close()
    }

    /// 6. The peer writes and closes: all bytes, then end of stream, no error.
    public static let peerCloseEndsStream = ConformanceScenario(
        "When the peer writes and closes, the client reads every byte and then end of stream, with no error",
        checklist: ["D3", "E1", "E8"]
    ) { context in
        let (client, server) = try await context.connectedPair()
        let payload = ConformancePattern.bytes(count: 200_000, seed: 6)
        let writer = Task(executorPreference: KitClock.taskExecutor) {
            try await server.write(payload)
            server.close()
        }
        // The client does not read while the peer writes and closes (with reads paused,
        // the close is still found, after the data).
        try await KitClock.sleep(for: .milliseconds(100))
        let received = try await context.readToEnd(from: client)
        try await context.step("the server's write and close") { try await writer.value }
        try context.expectBytes(received, payload, "what the client read before end of stream")
        let again = try await context.step("a second read at end of stream") { try await client.read() }
        try context.expect(again == nil, "a read after end of stream returned bytes; expected nil again")
        client.close()
    }

    /// 7. The peer resets: reads and writes fail with unavailable (reset).
    public static let peerResetIsUnavailable = ConformanceScenario(
        "When the peer resets the connection, reads and writes fail with unavailable (reset)",
        checklist: ["E1", "E3", "E6"]
    ) { context in
        // A reader waiting when the reset comes.
        do {
            let (client, server) = try await context.connectedPair()
            if context.listensOnPaths {
                // A Unix-domain socket has no reset: its close resets the peer only when
                // data the peer sent is left unread. Leave some at the server (not
                // reading), so the close is a reset.
                let unread = try await context.write(ConformancePattern.bytes(count: 100, seed: 70), on: client.connection)
                try context.expect(unread == nil, "the client's write the server leaves unread failed: \(unread!)")
            }
            let pendingRead = Task(executorPreference: KitClock.taskExecutor) { try await client.read() }
            try await KitClock.sleep(for: .milliseconds(50))
            server.reset()
            try await context.expectError(code: .unavailable, reason: .reset, "the client's read when the peer reset") {
                try await pendingRead.value
            }
            // The connection's terminal error is reset; later writes get it too.
            try context.expectError(
                try await context.write(ConformancePattern.bytes(count: 100, seed: 7), on: client.connection),
                code: .unavailable, reason: .reset, "a write after the read failed with reset")
            client.close()
        }
        // A writer, not reading, finds the reset through its writes.
        do {
            let (client, server) = try await context.connectedRawPair()
            _ = RecordingHandler(on: client)
            _ = RecordingHandler(on: server)
            server.reset()
            let chunk = ConformancePattern.bytes(count: 1024, seed: 77)
            var error: TransportError?
            var attempts = 0
            while error == nil && attempts < 200 {
                attempts += 1
                error = try await context.write(chunk, on: client)
                if error == nil { try await KitClock.sleep(for: .milliseconds(10)) }
            }
            guard let error else {
                try context.fail("200 writes to a peer that reset all completed without an error over 2 s; expected unavailable (reset)")
            }
            try context.expectError(error, code: .unavailable, reason: .reset, "write \(attempts) to a peer that reset")
            context.log("write \(attempts) failed with \(error)")
            client.close()
        }
        // Data and the reset after it, met by the reader in one wakeup: the client's loop
        // is held busy while the server writes and resets, so both are on the socket when
        // it looks. The reset is reported, never an end of stream (libuv, for one, reports
        // a short read in a wakeup that brought POLLHUP as an end of stream).
        // A Unix-domain socket has no reset to send after data.
        if !context.listensOnPaths {
            let (client, server) = try await context.connectedRawPair()
            let events = RecordingHandler(on: client)
            _ = RecordingHandler(on: server)
            client.startReading()
            try await context.barrier(on: client.eventLoop, "after the client's startReading")
            let hold = LoopHold()
            // A simulated network's loops share one thread with the scenario: there the
            // data and the reset arrive as consecutive events, with no hold.
            let holds = KitClock.simulatedNetwork == nil
            if holds {
                client.eventLoop.execute { hold.hold() }
                try await context.waitUntil(seconds: 5, quiet: quietLimit, "the client's loop is held") { hold.isHeld }
            }
            let data = ConformancePattern.bytes(count: 1000, seed: 707)
            let written = try await context.write(data, on: server)
            server.reset()
            // The segments cross loopback or the namespaces' link while the client's loop is held.
            try await KitClock.sleep(for: .milliseconds(50))
            hold.release()
            try context.expect(written == nil, "the server's write before its reset failed: \(written!)")
            try await context.waitUntil(seconds: 5, quiet: quietLimit, "the client heard connectionDidClose after data and a reset in one wakeup", seen: events.seen) {
                !events.snapshot.closes.isEmpty
            }
            let seen = events.snapshot
            // Whether data that came before a reset is still read is the backend's choice
            // (Linux keeps it readable; RFC 793 flushes it): what arrives is a prefix.
            try context.expect(
                seen.bytes.count <= data.count && seen.bytes[...] == data.prefix(seen.bytes.count),
                "the client read \(seen.bytes.count) bytes that are not a prefix of the \(data.count) the server wrote before its reset")
            try context.expectEqual(seen.readEnds, 0, "end-of-stream events on a connection the peer reset after writing")
            try context.expectError(seen.closes[0], code: .unavailable, reason: .reset, "connectionDidClose after data and the peer's reset in one wakeup")
            client.close()
        }
    }

    /// Holds an event loop's thread (a task on it spins) until released.
    private final class LoopHold: Sendable {
        private let held = Atomic<Bool>(false)
        private let released = Atomic<Bool>(false)
        var isHeld: Bool { held.load(ordering: .acquiring) }
        func hold() {
            held.store(true, ordering: .releasing)
            while !released.load(ordering: .acquiring) { sched_yield() }
        }
        func release() { released.store(true, ordering: .releasing) }
    }

    /// 10. Operations after a local close or shutdownOutput.
    public static let operationsAfterClose = ConformanceScenario(
        "Writes after close fail with cancelled (closed), a pending read ends with it, and writes after shutdownOutput fail with failedPrecondition",
        checklist: ["D4", "D5", "D7", "E7"]
    ) { context in
        let bytes = ConformancePattern.bytes(count: 100, seed: 10)
        // A write and a shutdownOutput after close.
        do {
            let (client, server) = try await context.connectedRawPair()
            let events = RecordingHandler(on: client)
            _ = RecordingHandler(on: server)
            client.close()
            try context.expectError(try await context.write(bytes, on: client), code: .cancelled, reason: .closed, "a write after close")
            try context.expectError(
                try await context.within(seconds: 5, "shutdownOutput's completion after close") {
                    await withCheckedContinuation { continuation in client.shutdownOutput { continuation.resume(returning: $0) } }
                },
                code: .cancelled, reason: .closed, "shutdownOutput after close")
            client.close()
            try await context.waitUntil(seconds: 5, quiet: quietLimit, "connectionDidClose ran after close()", seen: events.seen) { !events.snapshot.closes.isEmpty }
            try await KitClock.sleep(for: .milliseconds(50))
            try context.expectEqual(events.snapshot.closes.count, 1, "connectionDidClose calls after closing twice")
            server.close()
        }
        // A read pending when the connection is closed locally.
        do {
            let (client, server) = try await context.connectedPair()
            let pendingRead = Task(executorPreference: KitClock.taskExecutor) { try await client.read() }
            try await KitClock.sleep(for: .milliseconds(100))
            client.close()
            try await context.expectError(code: .cancelled, reason: .closed, "a read pending when the connection was closed locally") {
                try await pendingRead.value
            }
            server.close()
        }
        // Writes and a second shutdownOutput after shutdownOutput.
        do {
            let (client, server) = try await context.connectedRawPair()
            let clientEvents = RecordingHandler(on: client)
            let serverEvents = RecordingHandler(on: server)
            server.startReading()
            let first: TransportError? = try await context.within(seconds: 5, "shutdownOutput's completion") {
                await withCheckedContinuation { continuation in client.shutdownOutput { continuation.resume(returning: $0) } }
            }
            try context.expect(first == nil, "shutdownOutput completed with \(first!); expected nil")
            try context.expectError(try await context.write(bytes, on: client), code: .failedPrecondition, reason: .outputShutdown, "a write after shutdownOutput")
            try context.expectError(
                try await context.within(seconds: 5, "a second shutdownOutput's completion") {
                    await withCheckedContinuation { continuation in client.shutdownOutput { continuation.resume(returning: $0) } }
                },
                code: .failedPrecondition, reason: .outputShutdown, "a second shutdownOutput")
            try await context.waitUntil(seconds: 5, quiet: quietLimit, "the peer saw end of stream", seen: serverEvents.seen) { serverEvents.snapshot.readEnds > 0 }
            try context.expectEqual(serverEvents.byteCount, 0, "bytes the peer read from writes refused after shutdownOutput")
            client.close()
            try await context.waitUntil(seconds: 5, quiet: quietLimit, "connectionDidClose ran after shutdownOutput then close()", seen: clientEvents.seen) { !clientEvents.snapshot.closes.isEmpty }
            try context.expect(clientEvents.snapshot.closes == [nil], "connectionDidClose after shutdownOutput then close() got \(clientEvents.snapshot.closes); expected one call with nil")
            server.close()
        }
    }

    /// 14. shutdownNow with open connections.
    public static let shutdownClosesConnections = ConformanceScenario(
        "Shutting the server transport down ends its open connections with cancelled (shutdown) and refuses new ones",
        checklist: ["A9", "F6", "F8"]
    ) { context in
        let listener = try await context.listen()
        let endpoint = context.endpoint(of: listener)
        var clients: [AsyncConnection] = []
        var handlers: [RecordingHandler] = []
        for index in 0..<10 {
            let client = AsyncConnection(try await context.connect(to: endpoint))
            let accepted = try await context.accept(from: listener)
            let handler = RecordingHandler(on: accepted)
            accepted.startReading()
            try await context.step("connection \(index)'s first write") { try await client.write([UInt8(index)]) }
            try await context.waitUntil(seconds: 5, quiet: quietLimit, "the server side of connection \(index) read its byte", seen: handler.seen) { handler.byteCount == 1 }
            clients.append(client)
            handlers.append(handler)
        }

        let server = context.server
        try await context.within(seconds: 30, "server.shutdownNow() with 10 connections open") { await server.shutdownNow() }
        for (index, handler) in handlers.enumerated() {
            try await context.waitUntil(seconds: 2, "connection \(index)'s server handler got connectionDidClose after shutdownNow") {
                !handler.snapshot.closes.isEmpty
            }
            let closes = handler.snapshot.closes
            try context.expectEqual(closes.count, 1, "connectionDidClose calls on server connection \(index)")
            try context.expectError(closes[0], code: .cancelled, reason: .shutdown, "server connection \(index)'s close after shutdownNow")
            try context.expect(handler.snapshot.offLoopCalls.isEmpty, "server connection \(index)'s callbacks ran off its event loop during shutdown: \(handler.snapshot.offLoopCalls)")
        }
        // The client sees the server's close as a clean end of stream, or as a reset if
        // the server closed with unread data (either is correct TCP).
        var outcomes: [String: Int] = [:]
        for (index, client) in clients.enumerated() {
            let outcome = try await context.expectEndOfStreamOrReset(client, "client \(index)'s read after the server transport shut down")
            outcomes[outcome, default: 0] += 1
            client.close()
        }
        context.log("the clients' reads ended with \(outcomes)")

        let clientTransport = context.client
        let connectStarted = KitClock.now
        try await context.expectError(code: .unavailable, reason: .refused, "a new connect to \(endpoint) after the server shut down", within: 2) {
            try await clientTransport.connect(to: endpoint)
        }
        try context.expectAtOnce(KitClock.now - connectStarted, "refused after shutdown", "a new connect after the server shut down was refused")
        let elsewhere = context.localEndpoint()
        try await context.expectError(code: .cancelled, reason: .shutdown, "listen on a transport that was shut down", within: 5) {
            try await server.listen(on: elsewhere)
        }
        try await context.expectError(code: .cancelled, reason: .shutdown, "connect from a transport that was shut down", within: 5) {
            try await server.connect(to: endpoint)
        }
    }
}

extension ConformanceScenario {
    /// 17. Graceful shutdown: listeners close at once, open connections get the grace
    /// period, then what is left is closed as by shutdownNow.
    public static let gracefulShutdown = ConformanceScenario(
        "A graceful shutdown refuses new connections at once, lets open ones work through the grace period, then closes them with cancelled (shutdown)",
        checklist: ["F8", "A9"]
    ) { context in
        let listener = try await context.listen()
        let endpoint = context.endpoint(of: listener)
        var clients: [AsyncConnection] = []
        var echoes: [EchoHandler] = []
        for _ in 0..<2 {
            clients.append(AsyncConnection(try await context.connect(to: endpoint)))
            let echo = EchoHandler(try await context.accept(from: listener))
            echo.start()
            echoes.append(echo)
        }
        let (leaving, staying) = (clients[0], clients[1])

        let server = context.server
        let grace: Duration = .seconds(1)
        let started = KitClock.now
        let shutdown = Task(executorPreference: KitClock.taskExecutor) { await server.shutdown(gracePeriod: grace) }
        try await KitClock.sleep(for: .milliseconds(50))

        let clientTransport = context.client
        let connectStarted = KitClock.now
        try await context.expectError(code: .unavailable, reason: .refused, "a new connect during the grace period", within: 2) {
            try await clientTransport.connect(to: endpoint)
        }
        try context.expectAtOnce(KitClock.now - connectStarted, "refused in the grace period", "a new connect during the grace period was refused")
        // Open connections still work during the grace period.
        for (index, client) in clients.enumerated() {
            let message = ConformancePattern.bytes(count: 1000, seed: UInt64(1700 + index))
            try await context.step("connection \(index)'s write during the grace period", seconds: 5) { try await client.write(message) }
            let echoed = try await context.read(exactly: message.count, from: client, seconds: 5)
            try context.expectBytes(echoed, message, "connection \(index)'s echo during the grace period")
        }
        try context.expect(KitClock.now - started < grace, "the echoes during the grace period took longer than the grace period; the scenario cannot tell grace from force")
        // One connection finishes on its own during the grace period.
        try await context.step("the leaving connection's shutdownOutput", seconds: 5) { try await leaving.shutdownOutput() }
        let leftEnd = try await context.step("the leaving connection's read to end", seconds: 5) { try await leaving.read() }
        try context.expect(leftEnd == nil, "the leaving connection read bytes after its echo; expected end of stream")
        leaving.close()

        try await context.within(seconds: 10, "shutdown(gracePeriod: 1 s) returned") { await shutdown.value }
        let elapsed = KitClock.now - started
        try context.expect(elapsed >= grace * 0.9, "shutdown(gracePeriod: 1 s) returned after \(elapsed) with a connection still open; expected it to wait out the grace period")

        try await context.waitUntil(seconds: 2, "both server connections ended") { echoes.allSatisfy { $0.state.closed } }
        try context.expect(echoes[0].state.error == nil, "the connection that finished during the grace period ended with \(echoes[0].state.error!); expected a clean close")
        try context.expectError(echoes[1].state.error, code: .cancelled, reason: .shutdown, "the connection still open when the grace period ended")
        let outcome = try await context.expectEndOfStreamOrReset(staying, "the client's read after the grace period ended")
        context.log("shutdown returned after \(elapsed); the staying client's read ended with \(outcome)")
        staying.close()
    }
}
