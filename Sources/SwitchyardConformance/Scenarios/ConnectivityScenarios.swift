import Switchyard
import SwitchyardCalls

// What a connectivity change and a broken connection do to a channel's calls (DESIGN.md,
// behaviour 2), driven by a ManualConnectivityMonitor so it runs on every pair. The
// same consequences with real links, routes and the rtnetlink monitor are the
// namespace scenarios' business.

extension ConformanceScenario {
    /// 28. A category change tears the channel's calls down; the next call connects afresh.
    public static let categoryChangeEndsCalls = ConformanceScenario(
        "A connectivity category change ends every open call with unavailable (connectivity changed) at once, the next call connects afresh, and with no connectivity a call fails at once",
        checklist: ["J1", "J3", "J5"], timeLimit: .seconds(60)
    ) { context in
        let monitor = ManualConnectivityMonitor(initial: ConnectivityPath(category: .wifi, interface: "wlan0"))
        let server = try await context.startCallServer { call in
            for try await message in call.messages { try await call.write(message) }
            return .ok
        }
        defer { server.close() }
        let channel = CallChannel(
            target: context.target(of: server.localAddress), transport: context.client, monitor: monitor)

        // Three calls, each with one echo done, so each is surely open end to end.
        var recorders: [CallRecorder] = []
        var addresses: Set<Endpoint> = []
        for index in 0..<3 {
            let recorder = CallRecorder()
            let call = try await context.startCall(on: channel, handler: recorder)
            call.send(ConformancePattern.bytes(count: 100, seed: UInt64(28_000 + index)))
            try await context.waitUntil(seconds: 10, quiet: quietLimit, "call \(index)'s echo arrived", seen: recorder.seen) { recorder.messageCount == 1 }
            recorders.append(recorder)
            addresses.insert(call.connection.localAddress)
        }
        try context.expectEqual(channel.openCalls, 3, "open calls before the change")

        let changed = KitClock.now
        monitor.report(ConnectivityPath(category: .cellular, interface: "wwan0"))
        for (index, recorder) in recorders.enumerated() {
            let status = try await context.status(of: recorder, "call \(index) after the change to cellular", seconds: 5)
            try context.expectStatus(status, code: .unavailable, reason: .connectivityChanged, "call \(index) after the change to cellular")
            try context.expectWellBehaved(recorder, "call \(index)")
        }
        try context.expectAtOnce(KitClock.now - changed, "calls ended", "every open call ended unavailable (connectivity changed)")
        try await context.waitUntil(seconds: 5, quiet: quietLimit, "the channel forgot its ended calls") { channel.openCalls == 0 }

        // The next call connects afresh and works.
        let after = CallRecorder()
        let fresh = try await context.startCall(on: channel, handler: after)
        try context.expect(!addresses.contains(fresh.connection.localAddress), "the call after the change reused an old connection's local address")
        fresh.send([1, 2, 3])
        fresh.finishSending()
        try context.expectOK(try await context.status(of: after, "the call after the change", quiet: quietLimit), "the call after the change")
        try context.expectEqual(after.snapshot.messages, [[1, 2, 3]], "the echo on the call after the change")

        // Nothing connects while the category is none: fail at once, not after a timeout.
        monitor.report(.none)
        let started = KitClock.now
        try await context.expectError(code: .unavailable, reason: .noConnectivity, "a call with no connectivity", within: 2) {
            try await channel.startCall(handler: CallRecorder())
        }
        try context.expectAtOnce(KitClock.now - started, "no connectivity", "with no connectivity a new call failed")

        // A link returns: calls work again.
        monitor.report(ConnectivityPath(category: .wifi, interface: "wlan0"))
        let back = CallRecorder()
        let again = try await context.startCall(on: channel, handler: back)
        again.send([4])
        again.finishSending()
        try context.expectOK(try await context.status(of: back, "the call after the link returned", quiet: quietLimit), "the call after the link returned")
    }

    /// 29. One broken connection ends the channel's other calls too.
    public static let brokenConnectionEndsChannelCalls = ConformanceScenario(
        "When one call's connection breaks, the channel's other open calls end with unavailable too, and the next call works",
        checklist: ["E6", "J3"], timeLimit: .seconds(60)
    ) { context in
        let server = try await context.startCallServer { call in
            for try await message in call.messages {
                if message == [0xde, 0xad] {
                    call.call.connection.reset()
                    return .ok
                }
                try await call.write(message)
            }
            return .ok
        }
        defer { server.close() }
        let channel = context.channel(to: server)
        let doomed = CallRecorder()
        let bystander = CallRecorder()
        let doomedCall = try await context.startCall(on: channel, handler: doomed)
        let bystanderCall = try await context.startCall(on: channel, handler: bystander)
        bystanderCall.send([7])
        try await context.waitUntil(seconds: 10, quiet: quietLimit, "the bystander's echo arrived", seen: bystander.seen) { bystander.messageCount == 1 }
        doomedCall.send([0xde, 0xad])
        let broken = try await context.status(of: doomed, "the call whose connection the server reset", quiet: quietLimit)
        try context.expectPeerReset(broken, "the call whose connection the server reset")
        let other = try await context.status(of: bystander, "the other open call on the channel", quiet: quietLimit)
        guard let error = other.error, error.code == .unavailable else {
            try context.fail("the other open call ended with \(other), expected unavailable")
        }
        context.log("the broken call ended \(broken); the other call ended \(other)")
        let next = CallRecorder()
        let call = try await context.startCall(on: channel, handler: next)
        call.send([9])
        call.finishSending()
        try context.expectOK(try await context.status(of: next, "the next call", quiet: quietLimit), "the next call")
    }
}
