import Switchyard
import SwitchyardCalls

// Stall detection held to both sides of its bound (DESIGN.md, behaviour 3; I1, I2):
// it must not fire on a healthy connection, however long it idles or however long the
// peer thinks (below the timeout), and a backend's own stall monitor must meet the
// bound without the kernel's help. The fault scenarios 30 and 31 prove detection with
// the kernel's help on.

/// The short stall timeout of ``ConformanceScenario/idleCallOutlivesStallTimeout``.
private let shortStallTimeout: Duration = .seconds(1)
/// The request the idle scenario's server answers only after a pause of ``answerPause``.
private let pauseRequest: [UInt8] = Array("pause".utf8)
/// How long that server thinks before it answers: under the stall timeout.
private let answerPause: Duration = .milliseconds(600)

extension ConformanceScenario {
    /// 47. No false stall: idle well past the stall timeout, and answers after pauses
    /// shorter than it.
    public static let idleCallOutlivesStallTimeout = ConformanceScenario(
        "With a 1 s stall timeout, a healthy call left idle for 3 s stays open and then echoes, and a peer that answers after pauses shorter than the timeout ends the call OK",
        checklist: ["I1", "I3", "I5"], timeLimit: .seconds(60)
    ) { context in
        try await context.withStallTimeoutTransports(shortStallTimeout) { client, server in
            let callServer = try await context.step("starting a call server on the stall-timeout server transport", seconds: 10) {
                try await CallServer.start(transport: server, on: context.localEndpoint()) { call in
                    for try await message in call.messages {
                        if message == pauseRequest { try await KitClock.sleep(for: answerPause) }
                        try await call.write(message)
                    }
                    return .ok
                }
            }
            defer { callServer.closeNow() }
            let channel = CallChannel(target: context.target(of: callServer.localAddress), transport: client)
            defer { channel.close() }
            let recorder = CallRecorder()
            let call = try await context.startCall(on: channel, handler: recorder)

            // One echo, so the call is open end to end; then nothing for 3 x the timeout.
            let first = ConformancePattern.bytes(count: 100, seed: 47)
            call.send(first)
            try await context.waitUntil(seconds: 10, quiet: quietLimit, "the first echo arrived", seen: recorder.seen) { recorder.messageCount == 1 }
            let idle = shortStallTimeout * 3
            let idleStart = KitClock.now
            while KitClock.now - idleStart < idle {
                if let status = recorder.status {
                    try context.fail("the idle call ended after \(milliseconds(KitClock.now - idleStart)) of idling with \(status); the stall timeout is \(shortStallTimeout) and nothing was outstanding")
                }
                try await KitClock.sleep(for: .milliseconds(20))
            }
            context.record("idle without a stall", KitClock.now - idleStart)
            let second = ConformancePattern.bytes(count: 100, seed: 471)
            let sent = KitClock.now
            call.send(second)
            try await context.waitUntil(seconds: 5, quiet: quietLimit, "the echo after \(idle) idle arrived", seen: recorder.seen) { recorder.messageCount == 2 }
            context.record("echo after idling", KitClock.now - sent)
            try context.expectBytes(recorder.snapshot.messages[1], second, "the echo after idling")

            // Three requests the server answers after 600 ms each: 1.8 s awaiting replies
            // in all, more than the timeout, never silent for that long at a stretch.
            for round in 0..<3 {
                let asked = KitClock.now
                call.send(pauseRequest)
                try await context.waitUntil(seconds: 5, "the answer to paused request \(round) arrived") { recorder.messageCount == 3 + round }
                let waited = KitClock.now - asked
                try context.expect(waited >= answerPause, "the answer to paused request \(round) came after \(milliseconds(waited)); the server pauses \(answerPause) before answering")
                if round == 0 { context.record("answer after a pause", waited) }
            }
            call.finishSending()
            let status = try await context.status(of: recorder, "the call after its paused answers")
            try context.expectOK(status, "the call whose peer answered after pauses shorter than the stall timeout")
            try context.expectWellBehaved(recorder, "the idle call")
            context.log("idle \(idle) without a stall, then an echo; three answers after \(answerPause) pauses; status OK")
        }
    }

    /// 48. The bsd stall monitor on its own: no keepalive, no `TCP_USER_TIMEOUT`.
    public static let stallMonitorWithoutKernelHelp = ConformanceScenario(
        "With the kernel's stall detection off (no keepalive, no TCP_USER_TIMEOUT), a backend's own monitor still ends a black-holed call with data in flight with unavailable (stalled) within the stall timeout plus one second, and the error is not the kernel's",
        checklist: ["I2", "E6"], timeLimit: .seconds(45)
    ) { context in
        try await context.withFaultNetwork(clientSettings: { $0.kernelStallDetection = false }) { rig in
            let (active, _) = try await rig.activeCall()
            let fault = KitClock.now
            try context.networkStep("dropping the server port's packets both ways") { try rig.network.blackHole(port: rig.port) }
            active.call.send(ConformancePattern.bytes(count: 1 << 20, seed: 48))
            try await context.expectStalls(
                [("the call with data in flight", active.recorder)], since: fault, fault: "the black hole opened")
            guard let error = active.recorder.status?.error else { return }
            context.log("the error: \(error)")
            // The kernel's detectors end a connection with ETIMEDOUT (EHOSTUNREACH and
            // ENETUNREACH after a link went down), kept in `native`: with them off, the
            // stall must have been the backend's own finding.
            let kernelCodes: Set<String> = ["ETIMEDOUT", "EHOSTUNREACH", "ENETUNREACH", "UV_ETIMEDOUT", "UV_EHOSTUNREACH", "UV_ENETUNREACH"]
            if let native = error.native, kernelCodes.contains(native.name) {
                try context.fail("with the kernel's stall detection off, the stall was reported from the kernel's \(native.name) (\(error)); keepalive or TCP_USER_TIMEOUT is still set, or the stall was not the monitor's")
            }
        }
    }
}

extension ConformanceContext {
    /// Runs `body` with a fresh client and server transport of this pair, both made with
    /// `stallTimeout`, on the pair's own network (loopback, or the in-memory one); shuts
    /// both down afterwards, also when `body` fails.
    func withStallTimeoutTransports(
        _ stallTimeout: Duration, _ body: @escaping @Sendable (any Transport, any Transport) async throws -> Void
    ) async throws {
        guard let clientBackend = clientTransportBackend, let serverBackend = serverTransportBackend else {
            try skip("the runner did not say which backends to make transports of")
        }
        var configuration = self.configuration
        configuration.stallTimeout = stallTimeout
        let client: any Transport
        let server: any Transport
        do {
            client = try clientBackend.make(configuration)
        } catch {
            try fail("making a \(clientBackend.name) transport with a stall timeout of \(stallTimeout) failed: \(error)")
        }
        do {
            server = try serverBackend.make(configuration)
        } catch {
            await client.shutdownNow()
            try fail("making a \(serverBackend.name) transport with a stall timeout of \(stallTimeout) failed: \(error)")
        }
        func shutDown() async {
            for transport in [client, server] {
                _ = try? await within(seconds: 10, "shutting down a stall-timeout transport") { await transport.shutdownNow() }
            }
        }
        do {
            try await body(client, server)
        } catch {
            await shutDown()
            throw error
        }
        await shutDown()
    }
}
