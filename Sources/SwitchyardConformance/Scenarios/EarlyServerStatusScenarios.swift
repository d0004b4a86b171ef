import Switchyard
import SwitchyardCalls

extension ConformanceScenario {
    /// 87. A server that ends a call while its client still sends: its status goes out in
    /// trailers, then RST_STREAM NO_ERROR, which cuts the client's pending write short
    /// (SwitchyardCalls' EarlyServerStatus.swift). The client's call ends with the
    /// server's status, not with the reset after it:
    /// - an error status: the pending write fails with it, and the call's status is it;
    /// - an OK status after a message: the pending write fails `failedPrecondition`
    ///   (`call ended`), and the call still reads the message, then ends OK;
    /// - a status that arrived behind a message the client never asked for: cancelling
    ///   the call then ends it with the server's status, not `cancelled`.
    public static let earlyServerStatusEndsCall = ConformanceScenario(
        "A server's status sent while its client still writes ends the client's call with that status, not the reset after it: the pending write fails with it, messages before it are read, a cancel after it keeps it",
        checklist: ["E2", "F6"], timeLimit: .seconds(60)
    ) { context in
        let options = CallConfiguration(enableFlowControl: true)
        let early = TransportError(code: .resourceExhausted, reason: .init("answered early"), message: "the server ended the call before the client finished")
        // Sent until one waits: the server asks for no more messages, so the windows
        // fill and a write waits for window that never comes.
        let block = ConformancePattern.bytes(count: 64 << 10, seed: 87)
        let server = try await context.startCallServer(options: options) { call in
            guard let first = try await call.next(), let kind = first.first else { return .ok }
            if kind != 1 { try await call.write([9]) }
            // The client's writes are held back by now (it sends none in case 3).
            if kind != 3 { try await KitClock.sleep(for: .milliseconds(200)) }
            return kind == 2 ? .ok : CallStatus(error: early)
        }
        defer { server.close() }
        let channel = context.channel(to: server)

        let ended = try await context.step("a call whose write is held back when its server ends it with \(early.code)", seconds: 10) {
            try await channel.withCall(options: options) { call -> (write: TransportError?, status: CallStatus) in
                try await call.write([1])
                let failure = await writeUntilHeldBack(call, block)
                return (failure, await call.status())
            }
        }
        try context.expectStatus(ended.status, code: early.code, reason: early.reason, "the client's status, its write pending when the server ended the call")
        try context.expect(
            ended.write?.code == early.code && ended.write?.reason == early.reason,
            "the write held back: expected to fail with the server's status \(early.code) (\(early.reason)), it ended with \(ended.write.map { "\($0)" } ?? "no error")")

        let answered = try await context.step("a call whose write is held back when its server answers and ends it OK", seconds: 10) {
            try await channel.withCall(options: options) { call -> (write: TransportError?, messages: [[UInt8]], status: CallStatus) in
                try await call.write([2])
                let failure = await writeUntilHeldBack(call, block)
                var messages: [[UInt8]] = []
                do {
                    while let message = try await call.next() { messages.append(message) }
                } catch {}
                return (failure, messages, await call.status())
            }
        }
        try context.expectOK(answered.status, "the client's status, its write pending when the server answered OK")
        try context.expectEqual(answered.messages, [[9]], "the messages read after the held-back write failed")
        try context.expect(
            answered.write?.code == .failedPrecondition && answered.write?.reason == .callEnded,
            "the write held back: expected to fail failedPrecondition (call ended), it ended with \(answered.write.map { "\($0)" } ?? "no error")")

        let cancelled = try await context.step("a call cancelled 500 ms after its server's message and status came, unread", seconds: 10) {
            try await channel.withCall(options: options) { call -> CallStatus in
                try await call.write([3])
                try await KitClock.sleep(for: .milliseconds(500))
                call.cancel()
                return await call.status()
            }
        }
        try context.expectStatus(cancelled, code: early.code, reason: early.reason, "the status of a call cancelled after its server's status arrived")
        context.log("a write cut short by the server's status failed with it; the call ended with the server's status every time")
    }
}

/// Writes `block` until a write fails (up to 256 of them): the error, or nil if all went.
private func writeUntilHeldBack(_ call: AsyncCall, _ block: [UInt8]) async -> TransportError? {
    do {
        for _ in 0..<256 { try await call.write(block) }
        return nil
    } catch let error as TransportError {
        return error
    } catch {
        return TransportError(code: .unknown, reason: .init("not a TransportError"), message: "\(error)")
    }
}
