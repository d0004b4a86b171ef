import Switchyard
import SwitchyardCalls
import Synchronization

// The CallHandler contract: no callback runs inside a call the handler makes to its Call.

extension ConformanceScenario {
    /// 37. A handler that echoes one message at a time (flow control on: it sends from
    /// `didReceive` and asks for the next message from `callDidWriteData`) gets every
    /// message and one `callDidWriteData` per message, and none of its callbacks runs
    /// inside its own `send`, `receiveNextMessage` or `finish`.
    public static let callHandlerNotReentered = ConformanceScenario(
        "A handler echoing one message at a time with flow control on hears one didWriteData per message, and no callback runs inside its own calls to the Call",
        checklist: ["F4", "C1", "B5"], timeLimit: .seconds(60)
    ) { context in
        let probe = OneAtATimeEcho.Probe()
        // The first message is asked for by the policy: the handler has no earlier event.
        let server = try await context.startCallServer(
            options: CallConfiguration(enableFlowControl: true, flowController: FirstAskedFlowController())
        ) { _ in OneAtATimeEcho(probe: probe) }
        defer { server.close() }
        let channel = context.channel(to: server)
        let count = 300
        let messages = (0..<count).map { ConformancePattern.bytes(count: $0 % 97, seed: UInt64(37_000 + $0)) }
        let progress = WaitProgress("0 of \(count) replies")
        let (replies, status) = try await context.within(seconds: 30, "\(count) messages echoed one at a time", progress: progress) {
            try await channel.withCall(options: CallConfiguration()) { call in
                // All at once without waiting: many frames arrive in one read, so the
                // server handles several messages in one turn of its loop.
                for message in messages { call.call.send(message) }
                try await call.finishSending()
                var replies: [[UInt8]] = []
                for try await message in call.messages {
                    replies.append(message)
                    progress.advance("\(replies.count) of \(count) replies")
                }
                return (replies, await call.status())
            }
        }
        try context.expectOK(status, "the client's call")
        try context.expectEqual(replies.count, count, "replies to \(count) messages")
        for (index, message) in messages.enumerated() {
            try context.expectBytes(replies[index], message, "reply \(index)")
        }
        let seen = probe.state.withLock { $0 }
        try context.expectEqual(seen.received, count, "messages the server's handler received")
        try context.expectEqual(seen.writeReports, count, "didWriteData reports the server's handler heard")
        try context.expect(seen.reentered.isEmpty, "callbacks ran inside a call the handler made to its Call: \(seen.reentered.prefix(5))")
        channel.close()
    }
}

/// Manual flow control with one message asked for from the start.
private struct FirstAskedFlowController: FlowController {
    private var manual = ManualFlowController()
    init() { manual.request(1) }
    var reportsWrites: Bool { manual.reportsWrites }
    var mayDeliver: Bool { manual.mayDeliver }
    mutating func didDeliver(bytes: Int) { manual.didDeliver(bytes: bytes) }
    mutating func request(_ count: Int) { manual.request(count) }
}

/// Echoes each message from `didReceive` and asks for the next from `didWriteData`,
/// noting any callback that runs while it is inside a call to the `Call`.
private final class OneAtATimeEcho: CallHandler {
    struct Seen: Sendable {
        var received = 0
        var writeReports = 0
        var reentered: [String] = []
    }
    final class Probe: Sendable {
        let state = Mutex(Seen())
    }
    let probe: Probe
    private let insideCall = Atomic<Bool>(false)

    init(probe: Probe) { self.probe = probe }

    private func enter(_ callback: String) {
        if insideCall.load(ordering: .relaxed) { probe.state.withLock { $0.reentered.append(callback) } }
    }

    private func calling(_ body: () -> Void) {
        insideCall.store(true, ordering: .relaxed)
        body()
        insideCall.store(false, ordering: .relaxed)
    }

    func call(_ call: Call, didReceive message: [UInt8]) {
        enter("didReceive")
        probe.state.withLock { $0.received += 1 }
        calling { call.send(message) }
    }

    func callDidWriteData(_ call: Call) {
        enter("didWriteData")
        probe.state.withLock { $0.writeReports += 1 }
        calling { call.receiveNextMessage() }
    }

    func callDidReceiveEnd(_ call: Call) {
        enter("didReceiveEnd")
        calling { call.finish(.ok) }
    }

    func call(_ call: Call, didCloseWith status: CallStatus) {
        enter("didClose")
    }
}
