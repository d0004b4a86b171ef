import Switchyard
import SwitchyardCalls

// A channel's calls on one connection: one channel is one TCP connection that carries
// every call as a stream of its own (gRPC's wire, HTTP/2), as grpc-swift's and gRPC
// core's channels do. The server sees where each call comes from
// (`call.connection.remoteAddress`), so a channel that connects once per call shows as
// many remote addresses as calls. 73 counts them over 2,000 calls; 74 ends 100 calls
// open on one channel with a network switch (the rig of NetworkSwitchScenarios.swift);
// 75 resets the connection under 20 open calls and connects again.
//
// The calls held open at once are at most 100: the most streams the kit may count on a
// server allowing on one connection (RFC 9113 section 6.5.2 recommends no less, and
// gRPC servers announce 100), so every scenario holds whether the channel waits for a
// free stream or not.

/// How long after the monitor's report each of 74's 100 calls may take to end.
private let manyCallsEndBound: Duration = .milliseconds(100)

extension ConformanceScenario {
    /// 73. One channel, one connection: 2,000 calls, one remote address.
    public static let channelCallsShareOneConnection = ConformanceScenario(
        "A channel carries every call on one connection: 1,000 calls held open 100 at a time, then 1,000 more from 100 tasks at once, each echo their own message intact, and the server sees each thousand arrive from one remote address",
        checklist: ["B1"], timeLimit: .seconds(120)
    ) { context in
        let remotes = Collected<Endpoint>()
        let server = try await context.startCallServer { call in
            remotes.append(call.call.connection.remoteAddress)
            for try await message in call.messages { try await call.write(message) }
            return .ok
        }
        defer { server.close() }
        let channel = context.channel(to: server)
        defer { channel.close() }
        let rounds = 10, perRound = 100, tasks = 100, callsPerTask = 10

        // The handler face from one task: 100 calls open at once, each echoed before
        // any of them finishes, ten times.
        let heldStart = KitClock.now
        for round in 0..<rounds {
            var open: [(call: Call, recorder: CallRecorder, message: [UInt8])] = []
            for index in 0..<perRound {
                let number = round * perRound + index
                let recorder = CallRecorder()
                let call = try await context.startCall(on: channel, handler: recorder)
                let message = Array("call \(number): ".utf8) + ConformancePattern.bytes(count: 32 + number % 64, seed: UInt64(73_000 + number))
                call.send(message)
                open.append((call, recorder, message))
            }
            try await context.waitUntil(
                seconds: 30, quiet: quietLimit,
                "round \(round + 1)'s \(perRound) calls had their echoes (\(open.count(where: { $0.recorder.messageCount == 1 })) so far)"
            ) { open.allSatisfy { $0.recorder.messageCount == 1 } }
            try context.expectEqual(channel.openCalls, perRound, "calls open on the channel in round \(round + 1), every echo in")
            for held in open { held.call.finishSending() }
            for (index, held) in open.enumerated() {
                let what = "call \(round * perRound + index + 1) of \(rounds * perRound) (held open)"
                try context.expectOK(try await context.status(of: held.recorder, what, quiet: quietLimit), what)
                try context.expectEqual(held.recorder.snapshot.messages.count, 1, "\(what): messages echoed")
                try context.expectBytes(held.recorder.snapshot.messages[0], held.message, "\(what): its echo")
                try context.expectWellBehaved(held.recorder, what)
            }
        }
        let heldTime = KitClock.now - heldStart
        let heldRemotes = remotes.all
        try context.expectEqual(heldRemotes.count, rounds * perRound, "calls the server saw (held open)")

        // The async face from many tasks: 100 tasks at once, each making ten calls one
        // after the other on the same channel.
        let tasksStart = KitClock.now
        let progress = WaitProgress("no call of the 100 tasks has ended")
        let finished = Collected<Int>()
        try await context.within(seconds: 60, quiet: 5, "\(tasks) tasks making \(callsPerTask) calls each", progress: progress) {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for task in 0..<tasks {
                    group.addTask {
                        for index in 0..<callsPerTask {
                            let what = "task \(task + 1)'s call \(index + 1)"
                            let message = Array("task \(task) call \(index): ".utf8)
                                + ConformancePattern.bytes(count: 32 + (task + index) % 64, seed: UInt64(73_500 + task * callsPerTask + index))
                            let echo = try await context.echoCall(on: channel, message, step: what)
                            try context.expectOK(echo.status, what)
                            try context.expectEqual(echo.replies.count, 1, "\(what): messages echoed")
                            try context.expectBytes(echo.replies[0], message, "\(what): its echo")
                            finished.append(1)
                            progress.advance("\(finished.count) of \(tasks * callsPerTask) calls of the tasks ended OK")
                        }
                    }
                }
                try await group.waitForAll()
            }
        }
        let tasksTime = KitClock.now - tasksStart
        let taskRemotes = Array(remotes.all.dropFirst(heldRemotes.count))
        try context.expectEqual(taskRemotes.count, tasks * callsPerTask, "calls the server saw (tasks)")

        let heldConnections = Set(heldRemotes), taskConnections = Set(taskRemotes)
        context.record("held open, 10 × 100", heldTime)
        context.record("connections (held open)", count: heldConnections.count)
        context.record("tasks, 100 × 10", tasksTime)
        context.record("connections (tasks)", count: taskConnections.count)
        context.log(
            "1,000 calls held open 100 at a time: \(milliseconds(heldTime)), from \(heldConnections.count) remote address(es); 1,000 calls from 100 tasks: \(milliseconds(tasksTime)), from \(taskConnections.count); \(heldConnections.union(taskConnections).count) in all"
        )
        func sample(_ addresses: Set<Endpoint>) -> String {
            addresses.prefix(3).map(\.description).joined(separator: ", ") + (addresses.count > 3 ? ", ..." : "")
        }
        try context.expect(
            heldConnections.count == 1,
            "the server saw the 1,000 calls held open 100 at a time arrive from \(heldConnections.count) distinct remote addresses (\(sample(heldConnections))); expected one: one connection carrying every call of the channel")
        try context.expect(
            taskConnections.count == 1,
            "the server saw the 1,000 calls of 100 tasks arrive from \(taskConnections.count) distinct remote addresses (\(sample(taskConnections))); expected one: one connection carrying every call of the channel")
    }

    /// 74. Wi-Fi to cellular with 100 calls open on one channel: every one ends, at once.
    public static let networkSwitchEndsManyCalls = ConformanceScenario(
        "Moving the default route from a wlan0 link to a wwan0 link (the old link down) with 100 calls open on one channel: the netlink monitor reports cellular, every one of the 100 calls ends with unavailable (connectivity changed) within 100 ms of the report, and the next call connects over the wwan0 link, from its address",
        checklist: ["J1", "J3"], timeLimit: .seconds(60)
    ) { context in
        try await context.withMonitoredNetwork { rig in
            let wifi = rig.wifi, cellular = rig.cellular
            let channel = rig.channel()
            defer { channel.close() }
            let count = 100
            var calls: [(String, FaultRig.OpenCall)] = []
            for index in 0..<count {
                calls.append(("call \(index + 1) of \(count)", try await rig.openCall(on: channel, seed: UInt64(74_000 + index), over: wifi)))
            }
            try context.expectEqual(channel.openCalls, count, "calls open on the channel before the switch")
            let connections = Set(calls.map { $0.1.call.connection.localAddress }).count
            context.record("connections", count: connections)
            context.log("\(count) calls open over \(wifi.link) on \(connections) connection(s)")

            let command = KitClock.now
            try context.networkStep("moving the default route to \(cellular.link) and taking \(wifi.link) down") {
                try rig.network.routeDefault(via: cellular)
                try rig.network.setLink(wifi, up: false)
            }
            let report = try await rig.report(after: 0, since: command, "the switch to \(cellular.link)") {
                $0 == cellular.monitoredPath(.cellular)
            }
            // Every call's end against the report, summed up before any is checked: the
            // worst is the figure, and a failure below comes after it is printed.
            for (name, open) in calls { _ = try await context.status(of: open.recorder, name, seconds: 2) }
            let ends = calls.map { max(($0.1.recorder.closedAt ?? KitClock.now) - report, .zero) }.sorted()
            let worst = ends[ends.count - 1]
            context.record("median call end", ends[ends.count / 2])
            context.record("worst call end", worst)
            context.log(
                "the \(count) calls ended \(fineMilliseconds(ends[0])) to \(fineMilliseconds(worst)) after the monitor's report (median \(fineMilliseconds(ends[ends.count / 2]))); the bound is \(milliseconds(manyCallsEndBound))"
            )
            try await rig.expectEnded(
                calls, reason: .connectivityChanged, report: report, command: command, bound: manyCallsEndBound, logsEach: false)
            try await rig.expectCallWorks(on: channel, over: cellular, "the first call after the switch")
        }
    }

    /// 75. The connection under 20 calls breaks: all 20 end, the next call reconnects.
    public static let brokenSharedConnectionEndsCalls = ConformanceScenario(
        "When the server resets the connection that carries a channel's 20 open calls, every one of them ends with unavailable, and the next call on the channel connects afresh and succeeds",
        checklist: ["E6", "J3"], timeLimit: .seconds(60)
    ) { context in
        let resetMessage = Array("reset".utf8)
        let remotes = Collected<Endpoint>()
        let server = try await context.startCallServer { call in
            remotes.append(call.call.connection.remoteAddress)
            for try await message in call.messages {
                if message == resetMessage {
                    call.call.connection.reset()
                    break
                }
                try await call.write(message)
            }
            return .ok
        }
        defer { server.close() }
        let channel = context.channel(to: server)
        defer { channel.close() }

        let count = 20
        var open: [(call: Call, recorder: CallRecorder)] = []
        for index in 0..<count {
            let recorder = CallRecorder()
            let call = try await context.startCall(on: channel, handler: recorder)
            call.send(ConformancePattern.bytes(count: 100, seed: UInt64(75_000 + index)))
            try await context.waitUntil(seconds: 10, quiet: quietLimit, "call \(index + 1)'s echo arrived", seen: recorder.seen) { recorder.messageCount == 1 }
            open.append((call, recorder))
        }
        try context.expectEqual(channel.openCalls, count, "calls open on the channel before the reset")
        let carriers = Set(remotes.all)

        // The server resets the connection of the last call: with the calls multiplexed,
        // the one connection under all of them.
        let resetAt = KitClock.now
        open[count - 1].call.send(resetMessage)
        var reasons: [String: Int] = [:]
        for (index, held) in open.enumerated() {
            let what = "call \(index + 1) of \(count) after the server reset"
            let status = try await context.status(of: held.recorder, what, quiet: quietLimit)
            guard let error = status.error, error.code == .unavailable else {
                try context.fail("\(what) ended with \(status), expected unavailable")
            }
            reasons[describe(error), default: 0] += 1
            try context.expectWellBehaved(held.recorder, what)
        }
        let worst = open.map { ($0.recorder.closedAt ?? KitClock.now) - resetAt }.max() ?? .zero
        context.record("worst call end", worst)
        context.record("connections", count: carriers.count)
        let ended = reasons.sorted { $0.key < $1.key }.map { "\($0.value) \($0.key)" }.joined(separator: ", ")
        context.log("the \(count) calls, from \(carriers.count) remote address(es), ended within \(fineMilliseconds(worst)) of the reset request: \(ended)")
        try await context.waitUntil(seconds: 5, quiet: quietLimit, "the channel has no open call left (\(channel.openCalls))") { channel.openCalls == 0 }

        // The same server still listens: the next call connects afresh and works.
        let before = remotes.count
        let message = ConformancePattern.bytes(count: 10_000, seed: 75)
        let started = KitClock.now
        let fresh = try await context.echoCall(on: channel, message, step: "the next call on the channel")
        try context.expectOK(fresh.status, "the next call's status")
        try context.expectEqual(fresh.replies.count, 1, "messages echoed in the next call")
        try context.expectBytes(fresh.replies[0], message, "the next call's echo")
        try context.expectEqual(remotes.count, before + 1, "calls the server saw after the reset")
        let reconnected = remotes[before]
        context.record("next call", KitClock.now - started)
        context.log("the next call came from \(reconnected) and echoed in \(milliseconds(KitClock.now - started))")
        try context.expect(
            !carriers.contains(reconnected),
            "the next call came from \(reconnected), the remote address of the connection the server reset; expected a new connection")
        try context.expect(
            carriers.count == 1,
            "the server saw the \(count) calls arrive from \(carriers.count) distinct remote addresses; expected one: one connection carrying every call of the channel, which the reset broke")
    }
}
