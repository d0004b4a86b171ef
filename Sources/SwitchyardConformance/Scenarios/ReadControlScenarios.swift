import Switchyard

// Demand-driven reads and backpressure: KitChecklist.md section C.

extension ConformanceScenario {
    /// 12. Nothing is read before startReading, nothing after stopReading.
    public static let demandDrivenReads = ConformanceScenario(
        "Nothing is delivered before startReading, startReading delivers what waited, and nothing is delivered after stopReading",
        checklist: ["C1", "C2", "C6"]
    ) { context in
        let (client, server) = try await context.connectedRawPair()
        _ = RecordingHandler(on: client)
        let events = RecordingHandler(on: server)

        let first = ConformancePattern.bytes(count: 1000, seed: 12)
        try context.expectEqual(try await context.write(first, on: client), nil, "the first write's completion")
        try await KitClock.sleep(for: .milliseconds(200))
        try context.expectEqual(events.byteCount, 0, "bytes delivered to a handler that never called startReading")

        server.startReading()
        try await context.waitUntil(seconds: 5, quiet: quietLimit, "startReading delivered the 1000 bytes waiting (got \(events.byteCount))", seen: events.seen) { events.byteCount >= 1000 }
        try context.expectBytes(events.snapshot.bytes, first, "what startReading delivered")

        server.stopReading()
        try await context.barrier(on: server.eventLoop, "after stopReading")
        let second = ConformancePattern.bytes(count: 1000, seed: 13)
        try context.expectEqual(try await context.write(second, on: client), nil, "the second write's completion")
        try await KitClock.sleep(for: .milliseconds(200))
        try context.expectEqual(events.byteCount, 1000, "bytes delivered in all, 200 ms after stopReading and a second 1000-byte write")

        server.startReading()
        try await context.waitUntil(seconds: 5, quiet: quietLimit, "startReading again delivered the second 1000 bytes (got \(events.byteCount) in all)", seen: events.seen) { events.byteCount >= 2000 }
        try context.expectBytes(events.snapshot.bytes, first + second, "everything delivered, across the stop and the restart")
        try context.expect(events.snapshot.offLoopCalls.isEmpty, "handler callbacks ran off the connection's event loop: \(events.snapshot.offLoopCalls)")
        client.close()
        server.close()
    }

    /// 13. A slow reader pushes the writer back; then everything arrives.
    public static let slowReaderPushesBack = ConformanceScenario(
        "A peer that does not read pushes the writer back without a busy loop, and everything arrives once it reads",
        checklist: ["C5", "C6", "B3", "B5"]
    ) { context in
        let (client, server) = try await context.connectedRawPair()
        _ = RecordingHandler(on: client)
        let serverEvents = RecordingHandler(on: server)  // not reading yet

        let chunkSize = 64 * 1024
        let maxChunks = 1024  // 64 MiB
        let maxOutstanding = 16 << 20
        let log = CompletionLog()
        var issued = 0
        // Issue without waiting for completions, in 1 MiB batches, until 16 MiB wait
        // unwritten (the writer is pushed back) or 64 MiB were issued (it never was).
        while issued < maxChunks && issued * chunkSize - log.completedBytes < maxOutstanding {
            for _ in 0..<16 {
                let index = issued
                client.write(ConformancePattern.bytes(count: chunkSize, seed: UInt64(13_000 + index))) { log.record(index, byteCount: chunkSize, $0) }
                issued += 1
            }
            try await KitClock.sleep(for: .milliseconds(5))
        }
        let total = issued * chunkSize

        // Wait until completions stop for 500 ms.
        let quietWait = KitClock.now
        while KitClock.now - log.lastCompletion < .milliseconds(500) {
            try context.expect(KitClock.now - quietWait < .seconds(20), "write completions kept coming for 20 s while the peer did not read (\(log.completedBytes) of \(total) bytes)")
            try await KitClock.sleep(for: .milliseconds(20))
        }
        let completedBefore = log.completedBytes
        let pending = client.pendingWriteBytes
        context.log("issued \(total) bytes; \(completedBefore) completed and \(pending) pending while the peer did not read")
        try context.expect(completedBefore < total, "all \(total) bytes issued completed while the peer did not read: the writer was never pushed back")
        try context.expect(pending > 0, "pendingWriteBytes is \(pending) with \(total - completedBefore) bytes not completed; expected the unwritten bytes to be pending")
        try context.expectEqual(log.all.filter { $0.error != nil }.count, 0, "write completions with an error while pushed back")

        // No busy loop while pushed back, with the peer's inbound data unread.
        try await context.expectNoBusyLoop(for: .milliseconds(500), while: "the writer was pushed back and the reader idle")
        try context.expectEqual(log.completedBytes, completedBefore, "bytes completed during an idle 500 ms with the peer not reading")

        server.startReading()
        try await context.waitUntil(seconds: 60, quiet: quietLimit, "the peer read all \(total) bytes (it has \(serverEvents.byteCount))", seen: serverEvents.seen) { serverEvents.byteCount >= total }
        try await context.waitUntil(seconds: 10, quiet: quietLimit, "all \(issued) write completions ran (\(log.count) did)") { log.count >= issued }
        try await KitClock.sleep(for: .milliseconds(50))
        let entries = log.all
        try context.expectEqual(entries.count, issued, "write completions for \(issued) writes")
        if let misplaced = entries.enumerated().first(where: { $0.offset != $0.element.index }) {
            try context.fail("write completions out of order: position \(misplaced.offset) was write \(misplaced.element.index)")
        }
        if let failed = entries.first(where: { $0.error != nil }) {
            try context.fail("write \(failed.index) completed with \(failed.error!); expected nil")
        }
        try context.expectEqual(client.pendingWriteBytes, 0, "pendingWriteBytes after every write completed")
        let received = serverEvents.snapshot.bytes
        try context.expectEqual(received.count, total, "bytes the peer read")
        for index in 0..<issued {
            let piece = Array(received[index * chunkSize..<(index + 1) * chunkSize])
            try context.expectBytes(piece, ConformancePattern.bytes(count: chunkSize, seed: UInt64(13_000 + index)), "chunk \(index) of \(issued) as the peer read it")
        }
        client.close()
        server.close()
    }
}
