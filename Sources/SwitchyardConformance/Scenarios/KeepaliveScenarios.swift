import Switchyard
import SwitchyardCalls

// Keepalive and GOAWAY on the wire (DESIGN.md, behaviour 8): a channel's keepalive pings
// find a dead path with no data in flight, where neither a write nor the transport's
// stall monitor has anything to watch (76); a server closed gracefully drains with
// GOAWAY: its open calls finish, new ones are refused (77).

/// 76's keepalive: a ping after 1 s without reads, 1 s for its answer.
private let keepaliveTime: Duration = .seconds(1)
private let keepaliveTimeout: Duration = .seconds(1)
/// What 76's detection may take from the black hole: time + timeout + 3 s.
private let keepaliveBound: Duration = keepaliveTime + keepaliveTimeout + .seconds(3)

extension ConformanceScenario {
    /// 76. Keepalive finds a black hole with nothing in flight.
    public static let keepaliveFindsBlackHole = ConformanceScenario(
        "A channel with keepalive (time 1 s, timeout 1 s, permitted without calls) over a transport without stall detection: its idle call stays open through 3 s of answered pings, then a black hole with nothing in flight ends it with unavailable (stalled, by keepalive) within time + timeout + 3 s; once the black hole is lifted the channel's next call connects afresh and succeeds",
        checklist: ["I1", "I2"], timeLimit: .seconds(60)
    ) { context in
        // The server permits a ping a second (gRPC's default is one per 5 minutes); the
        // client's transport has no stall timeout, so nothing but keepalive can find the
        // black hole.
        let enforcement = KeepaliveEnforcement(minimumPingInterval: .milliseconds(500), permitWithoutCalls: true)
        try await context.withFaultNetwork(
            clientSettings: { $0.stallTimeout = nil }, serverConfiguration: CallServerConfiguration(keepaliveEnforcement: enforcement)
        ) { rig in
            let keepalive = Keepalive(time: keepaliveTime, timeout: keepaliveTimeout, permitWithoutCalls: true)
            let channel = CallChannel(target: rig.target, transport: rig.client, configuration: ChannelConfiguration(keepalive: keepalive))
            defer { channel.close() }
            let open = try await rig.openCall(on: channel, seed: 76)

            // Three keepalive periods of quiet: pings go out and are answered.
            let quietStart = KitClock.now
            while KitClock.now - quietStart < keepaliveTime * 3 {
                if let status = open.recorder.status {
                    try context.fail("the idle call ended after \(milliseconds(KitClock.now - quietStart)) of quiet on a healthy path with \(status); its pings were answered")
                }
                try await KitClock.sleep(for: .milliseconds(20))
            }

            let fault = KitClock.now
            try context.networkStep("dropping the server port's packets both ways") { try rig.network.blackHole(port: rig.port) }
            let status = try await context.status(of: open.recorder, "the idle call in the black hole", seconds: (keepaliveBound + .seconds(4)) / .seconds(1))
            let elapsed = (open.recorder.closedAt ?? KitClock.now) - fault
            context.record("keepalive detection", elapsed)
            context.log("the idle call: \(status.error.map(describe) ?? "OK") \(milliseconds(elapsed)) after the black hole (keepalive time \(keepaliveTime), timeout \(keepaliveTimeout)): \(status.error?.message ?? "")")
            try context.expectStatus(status, code: .unavailable, reason: .stalled, "the idle call in the black hole")
            try context.expect(
                status.error?.message.contains("keepalive") == true,
                "the idle call ended with \(status.error.map { "\($0)" } ?? "OK"); expected keepalive's error (the client transport has no stall detection)")
            try context.expect(elapsed <= keepaliveBound, "the idle call took \(milliseconds(elapsed)) to end after the black hole; the bound is \(keepaliveBound)")
            try context.expectWellBehaved(open.recorder, "the idle call")

            try context.networkStep("lifting the black hole") { try rig.network.liftBlackHole() }
            let message = ConformancePattern.bytes(count: 1000, seed: 760)
            let started = KitClock.now
            let next = try await context.echoCall(on: channel, message, step: "the next call after the black hole was lifted")
            try context.expectOK(next.status, "the next call after the black hole was lifted")
            try context.expectEqual(next.replies.count, 1, "messages echoed in the next call")
            try context.expectBytes(next.replies[0], message, "the next call's echo")
            context.record("next call", KitClock.now - started)
            try context.expect(
                next.local != open.call.connection.localAddress,
                "the next call came from \(next.local), the address of the connection keepalive closed; expected a new connection")
        }
    }

    /// 77. A server's graceful close drains its connection with GOAWAY.
    public static let goAwayDrainsCalls = ConformanceScenario(
        "A server closed gracefully with 5 calls open on one channel sends GOAWAY: the 5 calls go on, echo again and end OK, serve() returns once they ended and not before, and the channel's next call (on a new connection, since its connection is going away) fails at connect with unavailable (refused)",
        checklist: ["D8", "A2"], timeLimit: .seconds(60)
    ) { context in
        let server = try await context.startCallServer { call in
            for try await message in call.messages { try await call.write(message) }
            return .ok
        }
        defer { server.closeNow() }
        let served = Collected<ContinuousClock.Instant>()
        let serving = Task(executorPreference: KitClock.taskExecutor) {
            await server.serve()
            served.append(KitClock.now)
        }
        let channel = context.channel(to: server)
        defer { channel.close() }
        let count = 5
        var open: [(call: Call, recorder: CallRecorder)] = []
        for index in 0..<count {
            let recorder = CallRecorder()
            let call = try await context.startCall(on: channel, handler: recorder)
            call.send(ConformancePattern.bytes(count: 100, seed: UInt64(77_000 + index)))
            try await context.waitUntil(seconds: 10, quiet: quietLimit, "call \(index + 1)'s first echo arrived", seen: recorder.seen) { recorder.messageCount == 1 }
            open.append((call, recorder))
        }

        let closed = KitClock.now
        server.close()
        // Give the GOAWAY the time to reach the client (loopback: well under 100 ms).
        try await KitClock.sleep(for: .milliseconds(200))
        try context.expect(served.count == 0, "serve() returned while \(count) calls were still open")
        for (index, held) in open.enumerated() {
            let what = "call \(index + 1) of \(count) after the server's close"
            let message = ConformancePattern.bytes(count: 1000, seed: UInt64(77_100 + index))
            held.call.send(message)
            try await context.waitUntil(seconds: 10, quiet: quietLimit, "\(what): its second echo arrived", seen: held.recorder.seen) { held.recorder.messageCount == 2 }
            try context.expectBytes(held.recorder.snapshot.messages[1], message, "\(what): its second echo")
            try context.expect(served.count == 0, "serve() returned while call \(index + 1) was still open")
            held.call.finishSending()
            try context.expectOK(try await context.status(of: held.recorder, what, quiet: quietLimit), what)
            try context.expectWellBehaved(held.recorder, what)
        }
        let lastEnded = open.compactMap { $0.recorder.closedAt }.max() ?? KitClock.now
        try await context.within(seconds: 10, "serve() returning after the last call ended") { await serving.value }
        let servedAfter = (served.all.first ?? KitClock.now) - lastEnded
        context.record("serve() after the last call", max(servedAfter, .zero))
        context.record("drain", lastEnded - closed)

        let refused = try await context.expectError(code: .unavailable, reason: .refused, "a call started on the channel after the drain", within: 15) {
            try await channel.startCall(handler: CallRecorder())
        }
        context.log("the call after the drain: \(describe(refused)): \(refused.message)")
        context.log("5 calls drained in \(milliseconds(lastEnded - closed)) after the close; serve() returned \(milliseconds(max(servedAfter, .zero))) after the last")
    }
}
