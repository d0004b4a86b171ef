import Switchyard
import Synchronization

// A peer that goes away under writes (E2, E3, F1): every queued write completes once, in
// order, with the connection's terminal error, before `connectionDidClose`; and a write
// into a peer that is gone fails cleanly, never with a SIGPIPE (the backends write with
// `MSG_NOSIGNAL`). The reset is a real one: the peer's `reset()` (a linger-0 close; on
// a network of socket paths, a close with data left unread, which resets the writer
// too).

extension ConformanceScenario {
    /// 51. A peer reset with ten thousand writes queued.
    public static let resetWithQueuedWrites = ConformanceScenario(
        "When the peer resets with ten thousand writes queued, every write completes exactly once, in order, the ones after the reset with unavailable (reset), all before connectionDidClose",
        checklist: ["E2", "F1", "B5", "E6"], timeLimit: .seconds(90)
    ) { context in
        let (client, server) = try await context.connectedRawPair()
        let events = OrderedConnectionEvents(on: client)
        let serverEvents = RecordingHandler(on: server)  // never reads: the writes queue up
        client.startReading()
        let chunk = ConformancePattern.bytes(count: 4096, seed: 51)
        let count = 10_000
        let (_, seen) = try await SIGPIPEWatch.watching {
            for index in 0..<count {
                client.write(chunk) { events.completed(index, $0) }
            }
            // Until the writer is pushed back: completions stop coming.
            var last = -1
            var stable = KitClock.now
            while KitClock.now - stable < .milliseconds(200) {
                let now = events.completionCount
                if now != last { last = now; stable = KitClock.now }
                if now == count { break }
                try await KitClock.sleep(for: .milliseconds(10))
            }
            let beforeReset = events.completionCount
            context.record("completed before the reset", count: beforeReset)
            try context.expect(beforeReset < count, "all \(count) writes of 4 KiB completed while the peer did not read; the scenario needs writes still queued when the peer resets")
            let reset = KitClock.now
            server.reset()
            try await context.waitUntil(seconds: 20, quiet: quietLimit, "every write completed and connectionDidClose ran after the peer reset (\(events.completionCount) completions, close: \(events.closed))") {
                events.completionCount >= count && events.closed
            }
            context.record("all completed after the reset", events.closedAt.map { $0 - reset } ?? .zero)
            try await KitClock.sleep(for: .milliseconds(100))
        }
        try context.expectEqual(seen.received, 0, "SIGPIPEs the process received while writes to a reset peer failed")
        let pending = SIGPIPEWatch.pendingOnThreads()
        try context.expect(pending.isEmpty, "threads hold a SIGPIPE pending (raised while they block it, by a write without MSG_NOSIGNAL): \(pending.joined(separator: ", "))")

        let log = events.all
        let completions = log.compactMap { event -> (Int, TransportError?)? in
            if case .completion(let index, let error) = event { return (index, error) }
            return nil
        }
        try context.expectEqual(completions.count, count, "how many write completions ran for \(count) writes")
        var failed = 0
        for (position, (index, error)) in completions.enumerated() {
            try context.expectEqual(index, position, "the write whose completion ran at position \(position)")
            if let error {
                try context.expectError(error, code: .unavailable, reason: .reset, "the completion of write \(index), queued when the peer reset")
                failed += 1
            } else {
                try context.expect(failed == 0, "write \(index) completed successfully after write \(index - failed) failed with the reset")
            }
        }
        let closes = log.enumerated().filter { if case .close = $0.element { return true } else { return false } }
        try context.expectEqual(closes.count, 1, "how many times connectionDidClose ran")
        try context.expect(closes[0].offset == log.count - 1, "connectionDidClose ran at event \(closes[0].offset) of \(log.count): before \(log.count - 1 - closes[0].offset) write completions; it must come after every one")
        if case .close(let error) = closes[0].element {
            try context.expectError(error, code: .unavailable, reason: .reset, "connectionDidClose after the peer reset")
        }
        try context.expect(failed > 0, "every one of \(count) writes completed successfully although the peer reset with writes queued")
        try context.expect(events.offLoop.isEmpty, "callbacks ran off the connection's event loop: \(events.offLoop)")
        context.record("failed with the reset", count: failed)
        context.log("\(count - failed) writes completed, \(failed) failed with the reset, then connectionDidClose; SIGPIPE \(seen.wasIgnored ? "was ignored before the scenario (the watch counted it)" : "was not ignored")")
        _ = serverEvents
        client.close()
    }

    /// 52. A write to a peer that closed (or shut its output down, then closed).
    public static let writeToHalfOpenPeer = ConformanceScenario(
        "Writes to a peer that closed fail with unavailable (reset) without a SIGPIPE, also a large write queued when the peer went away, and after a peer's half-close writes still reach it",
        checklist: ["E3", "D2", "D9"], timeLimit: .seconds(60)
    ) { context in
        let (_, seen) = try await SIGPIPEWatch.watching {
            // The peer closes; we saw its end of stream, and write on.
            do {
                let (client, server) = try await context.connectedRawPair()
                let clientEvents = RecordingHandler(on: client)
                _ = RecordingHandler(on: server)
                client.startReading()
                server.close()
                try await context.waitUntil(seconds: 5, quiet: quietLimit, "the client saw the peer's end of stream", seen: clientEvents.seen) { clientEvents.snapshot.readEnds == 1 }
                let error = try await context.writeUntilFailure(on: client, "a peer that closed")
                try context.expectError(error, code: .unavailable, reason: .reset, "a write to a peer that closed")
                try await context.waitUntil(seconds: 5, quiet: quietLimit, "connectionDidClose ran after the failed write", seen: clientEvents.seen) { !clientEvents.snapshot.closes.isEmpty }
                try context.expectEqual(clientEvents.snapshot.closes.count, 1, "connectionDidClose calls")
                client.close()
            }
            // The peer shuts its output down: we still write, and it reads; then it
            // closes, and a large write (more than the kernel takes at once) fails.
            do {
                let (client, server) = try await context.connectedRawPair()
                let clientEvents = RecordingHandler(on: client)
                let serverEvents = RecordingHandler(on: server)
                client.startReading()
                server.startReading()
                let shutdown: TransportError? = try await context.within(seconds: 5, "the peer's shutdownOutput") {
                    await withCheckedContinuation { continuation in server.shutdownOutput { continuation.resume(returning: $0) } }
                }
                try context.expect(shutdown == nil, "the peer's shutdownOutput failed: \(shutdown!)")
                try await context.waitUntil(seconds: 5, quiet: quietLimit, "the client saw the peer's end of stream", seen: clientEvents.seen) { clientEvents.snapshot.readEnds == 1 }
                let message = ConformancePattern.bytes(count: 1000, seed: 52)
                try context.expectEqual(try await context.write(message, on: client), nil, "a write to a peer that only shut its output down")
                try await context.waitUntil(seconds: 5, quiet: quietLimit, "the half-closed peer read the write", seen: serverEvents.seen) { serverEvents.byteCount == message.count }
                server.close()
                try await KitClock.sleep(for: .milliseconds(50))
                let large = ConformancePattern.bytes(count: 8 << 20, seed: 521)
                var error = try await context.write(large, on: client)
                if error == nil {
                    // The kernel took it all before the peer's reset came back: go on
                    // writing until the reset is seen.
                    error = try await context.writeUntilFailure(on: client, "a peer that half-closed, then closed")
                }
                try context.expectError(error, code: .unavailable, reason: .reset, "a large write to a peer that half-closed, then closed")
                client.close()
            }
        }
        try context.expectEqual(seen.received, 0, "SIGPIPEs the process received while writing to peers that were gone")
        // A thread that blocks SIGPIPE keeps one it raised pending instead: raised all the
        // same (a write without MSG_NOSIGNAL), only hidden.
        let pending = SIGPIPEWatch.pendingOnThreads()
        context.log("no SIGPIPE delivered (it was \(seen.wasIgnored ? "ignored" : "not ignored") before the scenario); threads holding a blocked one: \(pending.isEmpty ? "none" : pending.joined(separator: ", "))")
        try context.expect(pending.isEmpty, "threads hold a SIGPIPE pending (raised while they block it, by a write without MSG_NOSIGNAL): \(pending.joined(separator: ", "))")
    }
}

extension ConformanceScenario {
    /// 71. A peer's reset reaches a connection whose reads are paused.
    public static let resetWhileReadsPaused = ConformanceScenario(
        "A peer's reset ends a connection whose reads are paused (never started, or started and stopped) with unavailable (reset) within 5 s, with nothing written or read",
        checklist: ["E8", "E1", "C2"], timeLimit: .seconds(60)
    ) { context in
        for stopped in [false, true] {
            let variant = stopped ? "reads started, then stopped" : "reads never started"
            let (client, server) = try await context.connectedRawPair()
            _ = RecordingHandler(on: client)
            let events = RecordingHandler(on: server)
            var delivered = 0
            if stopped {
                server.startReading()
                let first = ConformancePattern.bytes(count: 100, seed: 71)
                try context.expectEqual(try await context.write(first, on: client), nil, "the client's first write (\(variant))")
                try await context.waitUntil(seconds: 5, quiet: quietLimit, "the server read the client's first 100 bytes (\(variant); it has \(events.byteCount))", seen: events.seen) { events.byteCount >= 100 }
                server.stopReading()
                try await context.barrier(on: server.eventLoop, "after stopReading")
                delivered = 100
            }
            if context.listensOnPaths {
                // A Unix-domain socket has no reset: its close resets the peer only when
                // data the peer sent is left unread. The server's write (complete before
                // the reset: nothing pending) is what the client leaves unread.
                let unread = try await context.write(ConformancePattern.bytes(count: 100, seed: 710), on: server)
                try context.expect(unread == nil, "the server's write the client leaves unread failed: \(unread!)")
            }
            try context.expectEqual(server.pendingWriteBytes, 0, "the server's pending write bytes before the reset (\(variant))")
            let reset = KitClock.now
            client.reset()
            try await context.waitUntil(seconds: 5, quiet: quietLimit, "the server, \(variant), heard connectionDidClose after the client reset (it has neither read nor written since)") {
                !events.snapshot.closes.isEmpty
            }
            context.record("detected, \(variant)", KitClock.now - reset)
            try await KitClock.sleep(for: .milliseconds(50))
            let seen = events.snapshot
            try context.expectEqual(seen.closes.count, 1, "connectionDidClose calls after the peer reset (\(variant))")
            try context.expectError(seen.closes[0], code: .unavailable, reason: .reset, "connectionDidClose after the peer reset (\(variant))")
            try context.expectEqual(seen.bytes.count, delivered, "bytes delivered to the server (\(variant))")
            try context.expectEqual(seen.readEnds, 0, "end-of-stream events on the server (\(variant))")
            try context.expect(seen.offLoopCalls.isEmpty, "handler callbacks ran off the connection's event loop: \(seen.offLoopCalls)")
            server.close()
        }
    }

    /// 72. A peer's write and close, with reads stopped: nothing is lost or reported early.
    public static let peerCloseWhileReadsStopped = ConformanceScenario(
        "When the peer writes and closes while reads are stopped, nothing is reported and the loop stays idle until reading starts again, then every byte and end of stream arrive, with no error",
        checklist: ["E8", "D3", "C2", "C6"], timeLimit: .seconds(60)
    ) { context in
        let (client, server) = try await context.connectedRawPair()
        _ = RecordingHandler(on: client)
        let events = RecordingHandler(on: server)
        server.startReading()
        let first = ConformancePattern.bytes(count: 100, seed: 72)
        try context.expectEqual(try await context.write(first, on: client), nil, "the client's first write")
        try await context.waitUntil(seconds: 5, quiet: quietLimit, "the server read the client's first 100 bytes (it has \(events.byteCount))", seen: events.seen) { events.byteCount >= 100 }
        server.stopReading()
        try await context.barrier(on: server.eventLoop, "after stopReading")

        let last = ConformancePattern.bytes(count: 5000, seed: 720)
        try context.expectEqual(try await context.write(last, on: client), nil, "the client's last write")
        client.close()
        // The close (a FIN) waits behind the unread bytes: nothing to report, and nothing
        // to spin on, until the server reads.
        try await KitClock.sleep(for: .milliseconds(100))
        try await context.expectNoBusyLoop(for: .milliseconds(400), while: "the peer's close waited unread")
        var seen = events.snapshot
        try context.expectEqual(seen.bytes.count, 100, "bytes delivered with reads stopped, 500 ms after the peer wrote and closed")
        try context.expectEqual(seen.readEnds, 0, "end-of-stream events with reads stopped")
        try context.expectEqual(seen.closes.count, 0, "connectionDidClose calls with reads stopped after the peer closed (its close is an end of stream, not an error, and the server may still write)")

        server.startReading()
        try await context.waitUntil(seconds: 5, quiet: quietLimit, "the server read the last bytes and the end of stream (it has \(events.byteCount) bytes, \(events.snapshot.readEnds) ends)") {
            events.snapshot.readEnds == 1
        }
        seen = events.snapshot
        try context.expectBytes(seen.bytes, first + last, "what the server read, across the stop, up to the end of stream")
        try context.expectEqual(seen.lateBytes, 0, "bytes delivered after the end of stream")
        try context.expect(seen.closes.allSatisfy { $0 == nil }, "connectionDidClose with an error after a peer's plain close: \(seen.closes)")
        try context.expect(seen.offLoopCalls.isEmpty, "handler callbacks ran off the connection's event loop: \(seen.offLoopCalls)")
        server.close()
    }
}

extension ConformanceContext {
    /// Writes 1 KiB every 10 ms until a write fails (at most 200); returns that error.
    func writeUntilFailure(on connection: any Connection, _ what: String, file: String = #fileID, line: Int = #line) async throws -> TransportError {
        let chunk = ConformancePattern.bytes(count: 1024, seed: 520)
        for attempt in 1...200 {
            if let error = try await write(chunk, on: connection, seconds: 10, file: file, line: line) {
                log("write \(attempt) to \(what) failed: \(error)")
                return error
            }
            try await KitClock.sleep(for: .milliseconds(10))
        }
        try fail("200 writes to \(what) all completed over 2 s; expected unavailable (reset)", file: file, line: line)
    }
}

/// A raw handler that logs write completions and `connectionDidClose` in one sequence,
/// so a scenario can check their order.
final class OrderedConnectionEvents: ConnectionHandler {
    enum Event: Sendable {
        case completion(Int, TransportError?)
        case close(TransportError?)
    }

    private struct State: Sendable {
        var log: [Event] = []
        var completions = 0
        var closedAt: ContinuousClock.Instant?
        var offLoop: [String] = []
    }

    private let state = Mutex(State())
    private let loop: any TransportEventLoop

    init(on connection: any Connection) {
        loop = connection.eventLoop
        connection.setHandler(self)
    }

    var all: [Event] { state.withLock { $0.log } }
    var completionCount: Int { state.withLock { $0.completions } }
    var closed: Bool { state.withLock { $0.closedAt != nil } }
    var closedAt: ContinuousClock.Instant? { state.withLock { $0.closedAt } }
    var offLoop: [String] { state.withLock { $0.offLoop } }

    /// A write's completion (call from its completion).
    func completed(_ index: Int, _ error: TransportError?) {
        let inLoop = loop.inEventLoop
        state.withLock {
            $0.log.append(.completion(index, error))
            $0.completions += 1
            if !inLoop { $0.offLoop.append("completion of write \(index)") }
        }
    }

    func connectionDidRead(_ bytes: UnsafeRawBufferPointer) {}
    func connectionDidReadEnd() {}
    func connectionDidClose(error: TransportError?) {
        let inLoop = loop.inEventLoop
        state.withLock {
            $0.log.append(.close(error))
            if $0.closedAt == nil { $0.closedAt = KitClock.now }
            if !inLoop { $0.offLoop.append("connectionDidClose") }
        }
    }
}
