import Switchyard
import SwitchyardCalls
import SwitchyardNetlink

// A path change within one category (DESIGN.md, behaviour 2): Wi-Fi
// that moves to another hotspot stays `wifi`, yet the old socket would stall without an
// error. The rtnetlink monitor, made inside the client's namespace, watches two Wi-Fi
// links (`FaultNetwork.Layout.twoWifi`: `wlan0-…` and `wlan1-…`), and a channel that
// follows it makes calls to a server behind both. The default route moves to the other
// link, or the address the calls use is removed from the link; the category stays
// `wifi`. Every socket pair runs them; they need root (and ip, nft), say so in one line
// and pass without it, and skip the in-memory backend, as the fault scenarios do.
//
// The bound: the calls on the old path end with `unavailable` (path changed) within
// 100 ms of the monitor's report, with no stall timeout involved (the rig's 2 s stall
// timeout would be far later). Each run records that time (`… call ended`, from the
// report), and the report's delay after the `ip` command (`monitor`).

/// How long after the monitor's report the calls on the old path may take to end.
private let pathChangeBound: Duration = .milliseconds(100)

extension ConformanceScenario {
    /// 38. Wi-Fi to another Wi-Fi: the calls on the old link end, the next call takes the new one.
    public static let pathChangeEndsCalls = ConformanceScenario(
        "Moving the default route from a wlan0 link to a wlan1 link (both wifi; wlan0 stays up with its address): the netlink monitor reports the path change, the channel's open calls (one with messages flowing, one awaiting a reply) end with unavailable (path changed) within 100 ms of the report, a call to a loopback server on a channel following the same monitor goes on, and a new call connects over the wlan1 link, from its address",
        checklist: ["J1", "J3"], timeLimit: .seconds(45)
    ) { context in
        try await context.withMonitoredNetwork(.twoWifi) { rig in
            let wlan0 = rig.wifi, wlan1 = rig.cellular
            let channel = rig.channel()
            defer { channel.close() }
            let flowing = try await rig.openCall(on: channel, seed: 38, over: wlan0)
            let waiting = try await rig.openCall(on: channel, seed: 39, over: wlan0)
            try await rig.base.hold(waiting)

            // A loopback server inside the client's namespace: its calls never leave over
            // an interface, so a path change leaves them alone (a category change would not).
            let client = rig.base.client
            let local = try await context.step("starting a call server on 127.0.0.1 in the client's namespace", seconds: 10) {
                try await CallServer.start(transport: client, on: Endpoint(host: "127.0.0.1", port: 0)) { call in
                    for try await message in call.messages { try await call.write(message) }
                    return .ok
                }
            }
            defer { local.closeNow() }
            let loopbackChannel = CallChannel(
                target: Endpoint(host: "127.0.0.1", port: local.localAddress.port), transport: client, monitor: rig.monitor)
            defer { loopbackChannel.close() }
            let loopback = try await rig.base.openCall(on: loopbackChannel, seed: 40)

            // Messages flow on the first call while the route moves: a message every
            // millisecond, each echoed, until the call ends (at most two seconds' worth).
            let pump = Task(executorPreference: KitClock.taskExecutor) {
                for index in 0..<2000 where flowing.recorder.status == nil {
                    flowing.call.send(ConformancePattern.bytes(count: 1024, seed: UInt64(38_000 + index)))
                    try? await KitClock.sleep(for: .milliseconds(1))
                }
            }
            defer { pump.cancel() }
            try await context.waitUntil(seconds: 5, quiet: quietLimit, "messages flowed on the first call", seen: flowing.recorder.seen) { flowing.recorder.messageCount >= 10 }

            let command = KitClock.now
            try context.networkStep("moving the default route from \(wlan0.link) to \(wlan1.link)") {
                try rig.network.routeDefault(via: wlan1)
            }
            let moved = wlan1.monitoredPath(.wifi)
            let report = try await rig.report(after: 0, since: command, "the move to \(wlan1.link)") { $0 == moved }
            try context.expectEqual(rig.changes.all.map(\.path), [moved], "the monitor's changes after \(wlan0.link)")
            try await context.expectPathChangeEnded(
                [("the call with messages flowing", "flowing call ended", flowing), ("the call awaiting a reply", "waiting call ended", waiting)], report: report)

            // The loopback call is still open and echoes.
            try context.expect(loopback.recorder.status == nil, "the loopback call ended at the path change: \(loopback.recorder.status.map { "\($0)" } ?? "")")
            let before = loopback.recorder.messageCount
            loopback.call.send([38, 38])
            try await context.waitUntil(seconds: 5, "the loopback call echoed after the path change") { loopback.recorder.messageCount > before }
            context.log("the call to a loopback server on a channel following the same monitor went on and echoed")

            try await rig.expectCallWorks(on: channel, over: wlan1, "the first call after the path change")
        }
    }

    /// 39. The address in use goes away from the same link: the calls from it end.
    public static let addressRemovalEndsCalls = ConformanceScenario(
        "A second address added to the wlan0 link is reported and ends nothing; removing the address the open call uses (the second one promoted, the default route staying on wlan0) is a path change the netlink monitor reports, the call ends with unavailable (path changed) within 100 ms of the report, and a new call connects over wlan0 from the remaining address",
        checklist: ["J1", "J3"], timeLimit: .seconds(45)
    ) { context in
        try await context.withMonitoredNetwork(.twoWifi) { rig in
            let wlan0 = rig.wifi
            let renewed = "10.214.1.3"
            let channel = rig.channel()
            defer { channel.close() }
            let open = try await rig.openCall(on: channel, seed: 41, over: wlan0)

            // A new address alone ends nothing.
            var command = KitClock.now
            do {
                try await rig.network.addClientAddress(renewed, to: wlan0)
            } catch {
                try context.fail("adding \(renewed) to \(wlan0.link): \(error)")
            }
            let both = ConnectivityPath(category: .wifi, interface: wlan0.link, addresses: [wlan0.clientAddress, renewed])
            let added = try await rig.report(after: 0, since: command, "\(renewed) added to \(wlan0.link)") { $0 == both }
            try await KitClock.sleep(until: added + .milliseconds(150))
            try context.expect(open.recorder.status == nil, "the open call ended when an address was added: \(open.recorder.status.map { "\($0)" } ?? "")")
            let before = open.recorder.messageCount
            open.call.send(ConformancePattern.bytes(count: 100, seed: 42))
            try await context.waitUntil(seconds: 5, "the open call echoed after the address was added") { open.recorder.messageCount > before }

            let count = rig.changes.count
            command = KitClock.now
            try context.networkStep("removing \(wlan0.clientAddress) from \(wlan0.link)") {
                try rig.network.removeClientAddress(wlan0.clientAddress, from: wlan0)
            }
            let remaining = ConnectivityPath(category: .wifi, interface: wlan0.link, addresses: [renewed])
            let report = try await rig.report(after: count, since: command, "\(wlan0.clientAddress) gone from \(wlan0.link)") { $0 == remaining }
            try await context.expectPathChangeEnded([("the open call", "open call ended", open)], report: report)

            // The next call connects over wlan0 from the remaining address.
            let recorder = CallRecorder()
            let call = try await context.startCall(on: channel, handler: recorder)
            call.send([4, 5, 6])
            call.finishSending()
            let status = try await context.status(of: recorder, "the first call after the address went away", seconds: 5)
            context.log("the first call after the address went away connected from \(call.connection.localAddress.host)")
            try context.expectEqual(call.connection.localAddress.host, renewed, "the source address of the first call after the address went away")
            try context.expectOK(status, "the first call after the address went away")
            try context.expectEqual(recorder.snapshot.messages, [[4, 5, 6]], "the echo on the first call after the address went away")
        }
    }
}

extension ConformanceContext {
    /// Fails unless every call (a name for the log, a name for its measurement, the call)
    /// ended with `unavailable` (path changed) within ``pathChangeBound`` of the
    /// monitor's `report`; records each time from the report, and logs it.
    fileprivate func expectPathChangeEnded(
        _ calls: [(String, String, FaultRig.OpenCall)], report: ContinuousClock.Instant, file: String = #fileID, line: Int = #line
    ) async throws {
        for (name, measurement, open) in calls {
            let status = try await self.status(of: open.recorder, name, seconds: 3, file: file, line: line)
            let closed = open.recorder.closedAt ?? KitClock.now
            // The channel and the rig observe the same report; the channel may hear it first.
            let afterReport = max(closed - report, .zero)
            record(measurement, afterReport)
            log("\(name): \(status.error.map(describe) ?? "OK") \(fineMilliseconds(afterReport)) after the monitor's report")
            try expectStatus(status, code: .unavailable, reason: .pathChanged, name, file: file, line: line)
            try expect(
                afterReport <= pathChangeBound,
                "\(name) ended \(milliseconds(afterReport)) after the monitor's report; the bound is \(milliseconds(pathChangeBound))",
                file: file, line: line)
            try expectWellBehaved(open.recorder, name, file: file, line: line)
        }
    }
}
