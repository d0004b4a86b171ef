import Switchyard
import SwitchyardCalls
import SwitchyardSimulation

// Stalls and resets on a real path (DESIGN.md, behaviour 3): two network namespaces
// joined by a veth pair (`FaultNetwork`), the client transport's loops in one and the
// server transport's in the other, both with a stall timeout; faults made with `ip link`
// and nft. Every socket pair runs them; they need root (and ip, nft), and say so in one
// line and are reported skipped without it; so are pairs without TCP sockets, except the
// simulation's, which runs them on its own simulated network (`SimulatedFaultNetwork`).
//
// Each prints the detection time it measured, and holds it to the bound the design
// sets: a stall ends the call with `unavailable` (stalled) within the stall timeout plus
// one second, a reset ends it with `unavailable` (reset) at once (under 100 ms).

/// The stall timeout the fault scenarios configure.
let faultStallTimeout: Duration = .seconds(2)
/// What a stall's detection may take, from the fault: the stall timeout plus one second.
let stallBound: Duration = faultStallTimeout + .seconds(1)
/// The request the fault scenarios' server holds without answering (a call awaiting a reply).
private let holdRequest: [UInt8] = Array("hold".utf8)

extension ConformanceScenario {
    /// 30. A link taken down under a call in flight and under a call awaiting a reply.
    public static let linkDownStallsCalls = ConformanceScenario(
        "With a stall timeout, taking the link down ends a call with data in flight and a call awaiting a reply with unavailable (stalled) within the stall timeout plus one second",
        checklist: ["I2", "E6"], timeLimit: .seconds(45), run: linkDownStall(.ipv4))

    /// 30 over `family`.
    static func linkDownStall(_ family: FaultNetwork.Family) -> @Sendable (ConformanceContext) async throws -> Void { { context in
        try await context.withFaultNetwork(family: family) { rig in
            let (active, waiting) = try await rig.activeAndWaitingCalls()
            let fault = KitClock.now
            try context.networkStep("taking the client's link down") { try rig.network.takeClientLinkDown() }
            active.call.send(ConformancePattern.bytes(count: 1 << 20, seed: 30))
            try await context.expectStalls(
                [("the call with data in flight", active.recorder), ("the call awaiting a reply", waiting.recorder)],
                since: fault, fault: "the link went down")
        }
    } }

    /// 31. A black hole with the carrier up, under the same two calls.
    public static let blackHoleStallsCalls = ConformanceScenario(
        "With a stall timeout, a black hole with the carrier up ends a call with data in flight and a call awaiting a reply with unavailable (stalled) within the stall timeout plus one second",
        checklist: ["I2", "E6"], timeLimit: .seconds(45), run: blackHoleStall(.ipv4))

    /// 31 over `family`.
    static func blackHoleStall(_ family: FaultNetwork.Family) -> @Sendable (ConformanceContext) async throws -> Void { { context in
        try await context.withFaultNetwork(family: family) { rig in
            let (active, waiting) = try await rig.activeAndWaitingCalls()
            let fault = KitClock.now
            try context.networkStep("dropping the server port's packets both ways") { try rig.network.blackHole(port: rig.port) }
            active.call.send(ConformancePattern.bytes(count: 1 << 20, seed: 31))
            try await context.expectStalls(
                [("the call with data in flight", active.recorder), ("the call awaiting a reply", waiting.recorder)],
                since: fault, fault: "the black hole opened")
        }
    } }

    /// 32. A reset injected on the path ends the call at once.
    public static let injectedResetEndsCall = ConformanceScenario(
        "A reset injected on the path (nft reject with tcp reset) ends a call with unavailable (reset) at once (under 100 ms)",
        checklist: ["E3", "E6"], timeLimit: .seconds(45), run: injectedReset(.ipv4))

    /// 32 over `family`.
    static func injectedReset(_ family: FaultNetwork.Family) -> @Sendable (ConformanceContext) async throws -> Void { { context in
        try await context.withFaultNetwork(family: family) { rig in
            let (active, _) = try await rig.activeCall()
            try context.networkStep("injecting resets on the server port") { try rig.network.injectReset(port: rig.port) }
            let fault = KitClock.now
            active.call.send([1, 2, 3])
            let status = try await context.status(of: active.recorder, "the call after the reset", seconds: 5)
            let elapsed = KitClock.now - fault
            context.record("reset", elapsed)
            context.log("\(rig.pair): the call ended \(status.error.map(describe) ?? "OK") \(milliseconds(elapsed)) after it sent into the reset")
            try context.expectStatus(status, code: .unavailable, reason: .reset, "the call after the reset")
            try context.expect(elapsed < atOnceBound, "the reset took \(fineMilliseconds(elapsed)) to end the call; expected at once (under \(milliseconds(atOnceBound)))")
            try context.expectWellBehaved(active.recorder, "the call after the reset")
        }
    } }
}

/// A fault network with a call server inside, and the transports on both sides.
struct FaultRig: Sendable {
    let context: ConformanceContext
    let network: any FaultPath
    let client: any Transport
    let server: any Transport
    let callServer: CallServer
    /// How many held requests the server received.
    let held: Collected<Int>

    var port: Int { callServer.localAddress.port }
    var target: Endpoint { Endpoint(host: network.serverAddress, port: port) }
    /// The network's links, routes and addresses: a layout of two paths (the
    /// connectivity scenarios ask for one).
    var switchable: any SwitchablePaths {
        guard let switchable = network as? any SwitchablePaths else {
            preconditionFailure("\(type(of: network)) has no links to switch (a bug in the scenario)")
        }
        return switchable
    }
    var pair: String { "\(context.clientBackend)→\(context.serverBackend)" }

    struct OpenCall: Sendable {
        let call: Call
        let recorder: CallRecorder
    }

    /// A call on a channel of its own (a broken call ends its channel's other calls, so
    /// each call watched for its own detection has its own channel), one echo done.
    func activeCall(seed: UInt64 = 1) async throws -> (OpenCall, CallChannel) {
        let channel = CallChannel(target: target, transport: client)
        return (try await openCall(on: channel, seed: seed), channel)
    }

    /// A call on `channel`, one echo done (so it is surely open end to end).
    func openCall(on channel: CallChannel, seed: UInt64) async throws -> OpenCall {
        let recorder = CallRecorder()
        let call = try await context.startCall(on: channel, handler: recorder)
        call.send(ConformancePattern.bytes(count: 100, seed: seed))
        try await context.waitUntil(seconds: 10, quiet: quietLimit, "the first echo arrived over the fault network", seen: recorder.seen) { recorder.messageCount == 1 }
        return OpenCall(call: call, recorder: recorder)
    }

    /// Sends a request the server holds without answering, and waits until the server
    /// has it and its acknowledgement landed: the call then awaits a reply with nothing
    /// in flight.
    func hold(_ open: OpenCall) async throws {
        let before = held.count
        open.call.send(holdRequest)
        try await context.waitUntil(seconds: 5, quiet: quietLimit, "the server received the held request") { held.count > before }
        try await KitClock.sleep(for: .milliseconds(50))
    }

    /// A call that will send into the fault, and a call that sent a request the server
    /// holds (nothing in flight, awaiting a reply), each with one echo done.
    func activeAndWaitingCalls() async throws -> (active: OpenCall, waiting: OpenCall) {
        let (active, _) = try await activeCall(seed: 1)
        let (waiting, _) = try await activeCall(seed: 2)
        try await hold(waiting)
        return (active, waiting)
    }
}

extension ConformanceContext {
    /// Runs `body` with a fault network of `layout` (addresses of `family`) and transports of this pair on both
    /// sides of it, each made inside its namespace with the stall timeout. Skips the
    /// scenario (``ConformanceSkip``) without root or tools, and for a backend without
    /// TCP sockets.
    /// Everything it made is removed afterwards, also when `body` fails.
    ///
    /// A pair of the simulation runs on a simulated network of its own instead
    /// (``SimulatedFaultNetwork``), in virtual time, without root.
    ///
    /// `clientSettings` changes the client transport's configuration (the server's stays
    /// as it is); a client backend that refuses the change with `invalidArgument` skips
    /// the scenario with its message. `serverConfiguration` is the call server's.
    func withFaultNetwork(
        _ layout: FaultNetwork.Layout = .direct, family: FaultNetwork.Family = .ipv4,
        clientSettings: @escaping @Sendable (inout TransportConfiguration) -> Void = { _ in },
        serverConfiguration: CallServerConfiguration = CallServerConfiguration(),
        _ body: @escaping @Sendable (FaultRig) async throws -> Void
    ) async throws {
        guard let clientBackend = clientTransportBackend, let serverBackend = serverTransportBackend else {
            try skip("the runner did not say which backends to make transports of")
        }
        let network: any FaultPath
        if SimulatedFaultNetwork.runs(clientBackend, serverBackend) {
            guard let simulated = KitClock.simulatedNetwork else {
                try fail("a pair of the simulation outside the runner: no simulated network to run on")
            }
            network = SimulatedFaultNetwork(layout, family: family, on: simulated)
        } else {
            guard clientBackend.travelsOverTCP && serverBackend.travelsOverTCP else {
                try skip("\(pair) has no TCP sockets to put in network namespaces")
            }
            if let reason = FaultNetwork.unavailableReason {
                try skip("\(reason) (network namespaces, veth, nft)")
            }
            do {
                network = try FaultNetwork.make(layout, family: family)
            } catch {
                try fail("could not make the fault network: \(error)")
            }
        }
        var configuration = self.configuration
        configuration.eventLoopCount = 1
        configuration.stallTimeout = faultStallTimeout
        var transports: [any Transport] = []
        var callServer: CallServer?
        do {
            let server = try await network.makeServerTransport(serverBackend, configuration: configuration)
            transports.append(server)
            var clientConfiguration = configuration
            clientSettings(&clientConfiguration)
            let client: any Transport
            do {
                client = try await network.makeClientTransport(clientBackend, configuration: clientConfiguration)
            } catch let error as TransportError where error.code == .invalidArgument {
                try skip("the \(clientBackend.name) client cannot be made so: \(error.message)")
            }
            transports.append(client)
            let held = Collected<Int>()
            let address = network.serverAddress
            let started = try await step("starting a call server in the server's namespace", seconds: 10) {
                try await CallServer.start(transport: server, on: Endpoint(host: address, port: 0), configuration: serverConfiguration) { call in
                    for try await message in call.messages {
                        if message == holdRequest {
                            held.append(1)
                        } else {
                            try await call.write(message)
                        }
                    }
                    return .ok
                }
            }
            callServer = started
            try await body(FaultRig(
                context: self, network: network, client: client, server: server, callServer: started, held: held))
        } catch {
            await tearDown(callServer, transports, network)
            throw error
        }
        await tearDown(callServer, transports, network)
    }

    private func tearDown(_ callServer: CallServer?, _ transports: [any Transport], _ network: any FaultPath) async {
        callServer?.closeNow()
        for transport in transports {
            _ = try? await within(seconds: 10, "shutting down a transport in a namespace") { await transport.shutdownNow() }
        }
        network.remove()
    }

    /// Runs one `ip`/`nft` step, failing the scenario with its description.
    func networkStep(_ what: String, file: String = #fileID, line: Int = #line, _ body: () throws -> Void) throws {
        do {
            try body()
        } catch {
            throw failure("\(what): \(error)", file: file, line: line)
        }
    }

    /// Waits for every call to end, noting when each did; fails unless each ended with
    /// `unavailable` (stalled) within the stall bound of `since`. Logs the times.
    func expectStalls(
        _ calls: [(String, CallRecorder)], since fault: ContinuousClock.Instant, fault what: String,
        file: String = #fileID, line: Int = #line
    ) async throws {
        var ended: [ContinuousClock.Instant?] = Array(repeating: nil, count: calls.count)
        let deadline = fault + stallBound + .seconds(4)
        while ended.contains(where: { $0 == nil }) && KitClock.now < deadline {
            for (index, (_, recorder)) in calls.enumerated() where ended[index] == nil && recorder.status != nil {
                ended[index] = KitClock.now
            }
            try await KitClock.sleep(for: .milliseconds(2))
        }
        for (index, (name, recorder)) in calls.enumerated() {
            guard let at = ended[index], let status = recorder.status else {
                throw failure("\(name) had not ended \(milliseconds(deadline - fault)) after \(what) (the stall timeout is \(faultStallTimeout))", file: file, line: line)
            }
            let elapsed = at - fault
            record(measurementName(for: name), elapsed)
            log("\(name): \(status.error.map(describe) ?? "OK") \(milliseconds(elapsed)) after \(what) (stall timeout \(faultStallTimeout))")
            try expectStatus(status, code: .unavailable, reason: .stalled, name, file: file, line: line)
            try expect(elapsed <= stallBound, "\(name) took \(milliseconds(elapsed)) to end after \(what); the bound is \(stallBound)", file: file, line: line)
            try expectWellBehaved(recorder, name, file: file, line: line)
        }
    }
}

/// A duration in whole milliseconds, for the scenarios' logs.
func milliseconds(_ duration: Duration) -> String {
    let (seconds, attoseconds) = duration.components
    return "\(seconds * 1000 + attoseconds / 1_000_000_000_000_000) ms"
}

/// An error's code and reason (and native code), for the scenarios' logs.
func describe(_ error: TransportError) -> String {
    "\(error.code) (\(error.reason))" + (error.native.map { " from \($0.name)" } ?? "")
}
