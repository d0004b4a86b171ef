import Switchyard
import SwitchyardCalls
import Synchronization

// Suspend and resume (DESIGN.md, behaviour 7): a `Lifecycle` over the pair's transports.
// What the lifecycle does is the core's; what these hold every backend to is what the
// lifecycle needs from it: a closed listener refuses at once, its port can be listened on
// again at once, a close waits on nothing (not even a black-holed peer), and a
// connection left open across a suspension still carries data.

/// How fast a connect while suspended must be refused.
private let refusalBound: Duration = .milliseconds(100)

extension ConformanceScenario {
    /// 41. Listeners close on suspend and come back on the same port on resume.
    public static let suspendRefusesConnects = ConformanceScenario(
        "While suspended a connect is refused in under 100 ms; after resume the listener is back on the same port and serves",
        checklist: ["A2", "A5", "A8", "A9"], timeLimit: .seconds(60)
    ) { context in
        let lifecycle = Lifecycle(gracePeriod: .seconds(2), clock: KitClock.current)
        let listener = try await context.suspendableListener(lifecycle)
        defer { listener.close() }
        listener.acceptConnections { connection in EchoHandler(connection).start() }
        let address = listener.localAddress
        let target = context.endpoint(of: listener)
        try await context.echoOnce(to: target, seed: 38, "an echo before the suspend")

        try await context.step("suspending", seconds: 10) { await lifecycle.suspend() }
        try context.expect(!listener.isListening, "the listener still listens after the suspend")
        let client = context.client
        let start = KitClock.now
        try await context.expectError(code: .unavailable, reason: .refused, "a connect to \(target) while suspended", within: 5) {
            try await client.connect(to: target)
        }
        let refusal = KitClock.now - start
        context.record("connect refused while suspended", refusal)
        context.log("a connect while suspended was refused in \(milliseconds(refusal))")
        try context.expect(refusal < refusalBound, "the connect while suspended took \(milliseconds(refusal)) to be refused; expected under \(refusalBound)")

        try await context.step("resuming", seconds: 10) { try await lifecycle.resume() }
        try context.expect(listener.isListening, "the listener does not listen after the resume")
        try context.expectEqual(listener.localAddress, address, "the listener's address after the resume")
        try await context.echoOnce(to: target, seed: 381, "an echo after the resume, on the same port")
        // A second round: the reopened socket closes and reopens like the first.
        try await context.step("suspending again", seconds: 10) { await lifecycle.suspend() }
        try await context.expectError(code: .unavailable, reason: .refused, "a connect while suspended again", within: 5) {
            try await client.connect(to: target)
        }
        try await context.step("resuming again", seconds: 10) { try await lifecycle.resume() }
        try await context.echoOnce(to: target, seed: 382, "an echo after the second resume")
    }

    /// 42. Policy close on the server: the connection is closed without waiting.
    public static let suspendClosesConnections = ConformanceScenario(
        "On suspend a connection registered with policy close is closed (its handler hears a local close, the peer an end of stream or a reset) and a new connection after resume echoes",
        checklist: ["F1", "F8"], timeLimit: .seconds(60)
    ) { context in
        let lifecycle = Lifecycle(gracePeriod: .seconds(2), clock: KitClock.current)
        let listener = try await context.suspendableListener(lifecycle)
        defer { listener.close() }
        let closes = Collected<String>()
        let hooks = Collected<String>()
        listener.acceptConnections { connection in
            let handler = EchoHandler(connection) { error in closes.append(error.map(describe) ?? "closed locally") }
            lifecycle.register(connection, policy: .close, willSuspend: { hooks.append("willSuspend") }, didResume: { hooks.append("didResume") })
            handler.start()
        }
        let target = context.endpoint(of: listener)
        let client = AsyncConnection(try await context.connect(to: target))
        let request = ConformancePattern.bytes(count: 1000, seed: 39)
        try await context.step("the echo before the suspend") { try await client.write(request) }
        try context.expectBytes(try await context.read(exactly: request.count, from: client), request, "the echo before the suspend")

        let start = KitClock.now
        try await context.step("suspending", seconds: 10) { await lifecycle.suspend() }
        try await context.waitUntil(seconds: 1, "the server's connection closed on suspend") { closes.count == 1 }
        context.record("suspend closed the connection", KitClock.now - start)
        try context.expectEqual(closes.all, ["closed locally"], "how the server's connection ended")
        let (_, ending) = try await context.drainToEndOrReset(client, "the client's connection after the server suspended", seconds: 5)
        context.log("the client saw \(ending) after the server suspended")
        client.close()
        try context.expectEqual(hooks.all, ["willSuspend"], "the hooks of the closed connection")

        try await context.step("resuming", seconds: 10) { try await lifecycle.resume() }
        try context.expectEqual(hooks.all, ["willSuspend"], "the hooks of the closed connection after the resume (a closed connection does not resume)")
        try await context.echoOnce(to: target, seed: 391, "an echo on a new connection after the resume")
    }

    /// 43. A channel registered with the lifecycle: calls end, refuse, then reconnect.
    public static let suspendEndsChannelCalls = ConformanceScenario(
        "On suspend a registered channel's open call ends with unavailable (suspended), a call while suspended fails in under 100 ms, and after resume the next call connects afresh",
        checklist: ["J3", "F8"], timeLimit: .seconds(60)
    ) { context in
        let server = try await context.startCallServer { call in
            for try await message in call.messages { try await call.write(message) }
            return .ok
        }
        defer { server.closeNow() }
        let lifecycle = Lifecycle(gracePeriod: .zero, clock: KitClock.current)
        let channel = context.channel(to: server)
        lifecycle.register(channel)

        let open = CallRecorder()
        let call = try await context.startCall(on: channel, handler: open)
        call.send(ConformancePattern.bytes(count: 100, seed: 40))
        try await context.waitUntil(seconds: 10, quiet: quietLimit, "the first echo arrived", seen: open.seen) { open.messageCount == 1 }
        let local = call.connection.localAddress

        try await context.step("suspending", seconds: 10) { await lifecycle.suspend() }
        let status = try await context.status(of: open, "the call open when the process suspended", seconds: 5)
        try context.expectStatus(status, code: .unavailable, reason: .suspended, "the call open when the process suspended")
        try context.expectWellBehaved(open, "the call open when the process suspended")

        let start = KitClock.now
        try await context.expectError(code: .unavailable, reason: .suspended, "a call started while suspended", within: 5) {
            try await channel.startCall(handler: CallRecorder())
        }
        let refusal = KitClock.now - start
        context.record("call refused while suspended", refusal)
        try context.expect(refusal < refusalBound, "a call while suspended took \(milliseconds(refusal)) to fail; expected under \(refusalBound)")

        try await context.step("resuming", seconds: 10) { try await lifecycle.resume() }
        let message = ConformancePattern.bytes(count: 10_000, seed: 401)
        let fresh = try await context.echoCall(on: channel, message, step: "a call after the resume")
        try context.expectOK(fresh.status, "the call after the resume")
        try context.expect(fresh.replies == [message], "the call after the resume received \(fresh.replies.map(\.count)) bytes in messages; expected its one message back")
        if !context.listensOnPaths {
            try context.expect(fresh.local != local, "the call after the resume used the old connection's address \(local); expected a new connection")
        }
    }

    /// 44. Policy keep: the connection stays open, quiet, and carries data after resume.
    public static let suspendKeepsConnections = ConformanceScenario(
        "On suspend a connection registered with policy keep stays open: its willSuspend hook quiets it, and after didResume it carries the data sent meanwhile",
        checklist: ["C1", "D9"], timeLimit: .seconds(60)
    ) { context in
        let lifecycle = Lifecycle(gracePeriod: .seconds(2), clock: KitClock.current)
        let listener = try await context.suspendableListener(lifecycle)
        defer { listener.close() }
        let hooks = Collected<String>()
        let handlers = Collected<EchoHandler>()
        listener.acceptConnections { connection in
            let handler = EchoHandler(connection)
            handlers.append(handler)
            // The protocol above goes quiet by not reading, and comes back by reading; the
            // hooks await the hop to the loop, so the suspend goes on once it is quiet.
            lifecycle.register(
                connection, policy: .keep,
                willSuspend: {
                    hooks.append("willSuspend")
                    await onLoop(of: connection) { connection.stopReading() }
                },
                didResume: {
                    hooks.append("didResume")
                    await onLoop(of: connection) { connection.startReading() }
                })
            handler.start()
        }
        let client = AsyncConnection(try await context.connect(to: context.endpoint(of: listener)))
        let before = ConformancePattern.bytes(count: 1000, seed: 41)
        try await context.step("the echo before the suspend") { try await client.write(before) }
        try context.expectBytes(try await context.read(exactly: before.count, from: client), before, "the echo before the suspend")
        let handler = handlers[0]

        try await context.step("suspending", seconds: 10) { await lifecycle.suspend() }
        try context.expectEqual(hooks.all, ["willSuspend"], "the hooks after the suspend")
        let during = ConformancePattern.bytes(count: 5000, seed: 411)
        try await context.step("a write while the server is suspended") { try await client.write(during) }
        try await KitClock.sleep(for: .milliseconds(200))
        let state = handler.state
        try context.expect(!state.closed, "the kept connection closed while suspended: \(state.error.map(describe) ?? "closed locally")")
        try context.expectEqual(state.echoed, before.count, "bytes the server echoed while suspended (it should be quiet)")

        try await context.step("resuming", seconds: 10) { try await lifecycle.resume() }
        try context.expectEqual(hooks.all, ["willSuspend", "didResume"], "the hooks after the resume")
        try context.expectBytes(try await context.read(exactly: during.count, from: client, seconds: 10), during, "the echo, after the resume, of what was sent while suspended")
        let after = ConformancePattern.bytes(count: 1000, seed: 412)
        try await context.step("an echo after the resume") { try await client.write(after) }
        try context.expectBytes(try await context.read(exactly: after.count, from: client), after, "an echo after the resume")
        client.close()
        try await context.waitUntil(seconds: 5, quiet: quietLimit, "the server's kept connection closed after the client closed") { handler.state.closed }
    }

    /// 45. The grace period ends on time, and the close after it waits on nothing,
    /// with the peer black-holed and a write stuck in flight.
    public static let suspendExpiresOnTimeWithBlackHole = ConformanceScenario(
        "With the peer black-holed and a write stuck, the grace period's expiration handler runs on time (within the grace period plus 500 ms) and the suspend closes the connection without waiting on the network",
        checklist: ["F8", "F1"], timeLimit: .seconds(60)
    ) { context in
        try await context.withFaultNetwork { rig in
            let grace: Duration = .milliseconds(500)
            let lifecycle = Lifecycle(gracePeriod: grace, clock: KitClock.current)
            let listener = try await context.step("listening through a lifecycle in the server's namespace", seconds: 10) {
                try await lifecycle.listen(on: Endpoint(host: rig.network.serverAddress, port: 0), using: rig.server)
            }
            defer { listener.close() }
            let accepted = Collected<EchoHandler>()
            let connections = Collected<any Connection>()
            let closes = Collected<String>()
            listener.acceptConnections { connection in
                let handler = EchoHandler(connection) { error in closes.append(error.map(describe) ?? "closed locally") }
                lifecycle.register(connection, policy: .close)
                connections.append(connection)
                accepted.append(handler)
                handler.start()
            }
            let target = Endpoint(host: rig.network.serverAddress, port: listener.localAddress.port)
            let clientTransport = rig.client
            let client = try await context.step("connecting over the fault network", seconds: 10) {
                try await clientTransport.connect(to: target)
            }
            defer { client.close() }
            try await context.waitUntil(seconds: 10, quiet: quietLimit, "the server accepted the connection") { connections.count == 1 }
            let server = connections[0]

            // The reply the background work is sending when the path goes black.
            let expired = Collected<ContinuousClock.Instant>()
            let work = lifecycle.beginBackgroundWork("sending the reply") { expired.append(KitClock.now) }
            try context.networkStep("dropping the server port's packets both ways") { try rig.network.blackHole(port: target.port) }
            let writes = Collected<String>()
            server.write(ConformancePattern.bytes(count: 4 << 20, seed: 42)) { error in
                writes.append(error.map(describe) ?? "sent")
            }
            try await KitClock.sleep(for: .milliseconds(50))
            try context.expect(writes.count == 0, "the 4 MiB write into the black hole completed (\(writes.all)); expected it stuck")

            let start = KitClock.now
            try await context.step("suspending", seconds: 10) { await lifecycle.suspend() }
            let suspendTook = KitClock.now - start
            guard let expiredAt = expired.all.first else { try context.fail("the expiration handler did not run") }
            let expiration = expiredAt - start
            context.record("expiration handler", expiration)
            context.record("suspend", suspendTook)
            context.log("grace \(milliseconds(grace)): the expiration handler ran \(milliseconds(expiration)) after the suspend began, the suspend returned after \(milliseconds(suspendTook))")
            try context.expect(expiration >= grace, "the expiration handler ran \(milliseconds(expiration)) after the suspend began, before the grace period of \(milliseconds(grace))")
            try context.expect(expiration <= grace + .milliseconds(500), "the expiration handler ran \(milliseconds(expiration)) after the suspend began; expected within the grace period plus 500 ms")
            try context.expect(suspendTook <= grace + .milliseconds(1000), "the suspend took \(milliseconds(suspendTook)); expected within the grace period plus 1 s")
            try context.expect(work.isExpired, "the background work is not marked expired")
            try await context.waitUntil(seconds: 1, "the stuck write completed after the suspend closed the connection") { writes.count == 1 }
            try context.expectEqual(writes.all, ["cancelled (closed)"], "how the stuck write ended")
            try await context.waitUntil(seconds: 1, "the server's connection closed") { closes.count == 1 }
            try context.expectEqual(closes.all, ["closed locally"], "how the server's connection ended")
            _ = accepted
        }
    }
}

extension ConformanceScenario {
    /// 46. A call server started with a lifecycle, under each policy.
    public static let suspendCallServer = ConformanceScenario(
        "A call server started with a lifecycle refuses calls while suspended; under policy close its open call ends (the client sees unavailable), under keep it goes on after resume; new calls work on the same port",
        checklist: ["F8", "J3"], timeLimit: .seconds(60)
    ) { context in
        for policy in [SuspendPolicy.close, .keep] {
            let lifecycle = Lifecycle(gracePeriod: .seconds(1), clock: KitClock.current)
            let transport = context.server
            let endpoint = context.localEndpoint()
            let server = try await context.step("starting a call server with a lifecycle (policy \(policy))", seconds: 10) {
                try await CallServer.start(transport: transport, on: endpoint, lifecycle: lifecycle, policy: policy) { call in
                    for try await message in call.messages { try await call.write(message) }
                    return .ok
                }
            }
            defer { server.closeNow() }
            let channel = context.channel(to: server)
            let open = CallRecorder()
            let call = try await context.startCall(on: channel, handler: open)
            call.send(ConformancePattern.bytes(count: 100, seed: 43))
            try await context.waitUntil(seconds: 10, quiet: quietLimit, "the first echo arrived (policy \(policy))", seen: open.seen) { open.messageCount == 1 }

            try await context.step("suspending the server (policy \(policy))", seconds: 10) { await lifecycle.suspend() }
            // The server closed its connections (close) or said GOAWAY (keep): depending
            // on whether the channel heard that yet, a new call is refused at its connect,
            // or refused on the old connection (the stream is reset or the connection
            // closes under it); either way it ends unavailable without reaching a handler.
            let refused = CallRecorder()
            do {
                let attempt = try await channel.startCall(handler: refused)
                let status = try await context.status(of: refused, "a call to the suspended server (policy \(policy))", seconds: 5)
                try context.expect(status.error?.code == .unavailable, "a call to the suspended server ended \(status); expected unavailable")
                try context.expect(refused.messageCount == 0, "a call to the suspended server got a message")
                _ = attempt
            } catch let error as TransportError {
                try context.expect(error.code == .unavailable && error.reason == .refused, "a call to the suspended server failed with \(error); expected unavailable (refused)")
            }
            if policy == .close {
                let status = try await context.status(of: open, "the open call after the server suspended (policy close)", seconds: 5)
                try context.expect(status.error?.code == .unavailable, "the open call after the server suspended ended \(status); expected unavailable")
                try await context.waitUntil(seconds: 5, "the server had no open call after the suspend (policy close)") { server.openCalls == 0 }
            } else {
                try await KitClock.sleep(for: .milliseconds(50))
                try context.expect(open.status == nil, "the open call ended while the server was suspended (policy keep): \(open.status!)")
            }

            try await context.step("resuming the server (policy \(policy))", seconds: 10) { try await lifecycle.resume() }
            if policy == .keep {
                call.send(ConformancePattern.bytes(count: 100, seed: 431))
                try await context.waitUntil(seconds: 10, "the kept call's echo after the resume") { open.messageCount == 2 }
                call.cancel()
            }
            let message = ConformancePattern.bytes(count: 1000, seed: 432)
            // The refused call put the channel in transient failure: gRPC's backoff runs,
            // and a fail-fast call would fail at once with the refusal until it ends. This
            // call waits for the channel to be ready (the next attempt, within 1.2 s).
            let waiting = {
                var options = CallConfiguration(timeout: .seconds(15))
                options.waitForReady = true
                return options
            }()
            let fresh = try await context.step("a new call after the resume (policy \(policy))", seconds: 20) {
                try await channel.withCall(options: waiting) { call -> (replies: [[UInt8]], status: CallStatus) in
                    try await call.write(message)
                    try await call.finishSending()
                    var replies: [[UInt8]] = []
                    for try await reply in call.messages { replies.append(reply) }
                    return (replies, await call.status())
                }
            }
            try context.expectOK(fresh.status, "a new call after the resume (policy \(policy))")
            try context.expect(fresh.replies == [message], "a new call after the resume (policy \(policy)) did not get its message back")
            try context.expectWellBehaved(open, "the call open across the suspension (policy \(policy))")
        }
    }
}

extension ConformanceContext {
    /// A listener on the server transport (``localEndpoint()``) through `lifecycle`.
    func suspendableListener(_ lifecycle: Lifecycle, file: String = #fileID, line: Int = #line) async throws -> SuspendableListener {
        let server = self.server
        let endpoint = localEndpoint()
        return try await step("listening on \(endpoint) through a lifecycle", seconds: 10, file: file, line: line) {
            try await lifecycle.listen(on: endpoint, using: server)
        }
    }

    /// Connects to an echo server at `target`, checks one echo, and closes.
    func echoOnce(to target: Endpoint, seed: UInt64, _ what: String, file: String = #fileID, line: Int = #line) async throws {
        let connection = AsyncConnection(try await connect(to: target, file: file, line: line))
        defer { connection.close() }
        let bytes = ConformancePattern.bytes(count: 1000, seed: seed)
        try await step(what, file: file, line: line) { try await connection.write(bytes) }
        try expectBytes(try await read(exactly: bytes.count, from: connection), bytes, what, file: file, line: line)
    }
}

/// Runs `work` on `connection`'s loop and returns once it ran.
private func onLoop(of connection: any Connection, _ work: @escaping @Sendable () -> Void) async {
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
        connection.eventLoop.execute {
            work()
            continuation.resume()
        }
    }
}
