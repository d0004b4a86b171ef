import Switchyard
import SwitchyardCalls
import SwitchyardSimulation
import Testing

/// A `CallChannel` over the simulation, across a Wi-Fi to cellular switch that a
/// `SimulatedConnectivityMonitor` reports in virtual time: the channel, its calls and
/// its timers run on the network's clock, so a run is a function of its seed.
@Suite(.timeLimit(.minutes(2)))
struct ChannelAcrossASwitchTests {
    static let wifi = ConnectivityPath(category: .wifi, interface: "wlan0", addresses: ["10.0.1.2"])
    static let cellular = ConnectivityPath(category: .cellular, interface: "wwan0", addresses: ["10.0.2.2"])
    static let server = "10.0.100.1"
    static let link = SimulatedLink(latency: .milliseconds(20), jitter: .milliseconds(10))

    struct Outcome: Equatable {
        /// How the call open at the switch ended.
        var switched: TransportError?
        /// The echo of the call after the switch.
        var echoed: [UInt8]
        /// When (virtual time) the open call ended, and the next call's reply came.
        var endedAt: Duration
        var repliedAt: Duration
    }

    /// A call is open when the path moves from Wi-Fi to cellular at 500 ms: it must end
    /// `unavailable`/`connectivity changed`, and the next call must connect afresh from
    /// the cellular address and get its echo.
    static func switchScenario(on network: SimulatedNetwork) async throws -> Outcome {
        let monitor = SimulatedConnectivityMonitor(network: network, path: wifi)
        let phone = try SimulationTransport(network: network, following: monitor)
        let serverTransport = try SimulationTransport(network: network, host: server)
        return try await network.run {
            let echo = try await CallServer.start(transport: serverTransport, on: Endpoint(host: server, port: 50051)) { call in
                for try await message in call.messages { try await call.write(message) }
                return .ok
            }
            let channel = CallChannel(target: Endpoint(host: server, port: 50051), transport: phone, monitor: monitor)
            monitor.schedule(cellular, at: .milliseconds(500))

            let switched: TransportError? = try await channel.withCall { call in
                try await call.write([1])
                var messages = call.messages.makeAsyncIterator()
                let first = try await messages.next()
                try #require(first == [1], "the first echo: \(String(describing: first))")
                do {
                    while try await messages.next() != nil {}
                    return nil
                } catch let error as TransportError {
                    return error
                }
            }
            let endedAt = network.now
            let echoed = try await channel.withCall { call in
                try await call.write([2])
                var messages = call.messages.makeAsyncIterator()
                return try await messages.next() ?? []
            }
            let repliedAt = network.now
            channel.close()
            echo.closeNow()
            await phone.shutdownNow()
            await serverTransport.shutdownNow()
            return Outcome(switched: switched, echoed: echoed, endedAt: endedAt, repliedAt: repliedAt)
        }
    }

    /// Checks what every run must show, throwing so that a sweep sees a failure.
    static func check(_ outcome: Outcome, _ network: SimulatedNetwork) throws {
        try #require(outcome.switched?.code == .unavailable, "the open call ended \(String(describing: outcome.switched)), \(network)")
        try #require(outcome.switched?.reason == .connectivityChanged, "\(String(describing: outcome.switched)), \(network)")
        try #require(outcome.endedAt == .milliseconds(500), "the call ended at \(outcome.endedAt), not at the switch, \(network)")
        try #require(outcome.echoed == [2], "the call after the switch: \(outcome.echoed), \(network)")
        let log = network.eventLog
        try #require(log.contains { $0.contains("connect 10.0.1.2:") }, "the first connection was not from the Wi-Fi address")
        try #require(log.contains { $0.contains("connect 10.0.2.2:") }, "the call after the switch did not connect from the cellular address")
    }

    @Test("a call open across a Wi-Fi to cellular switch ends unavailable at the switch, the next connects afresh over cellular; the same seed gives the same event log")
    func switchReplays() async throws {
        var logs: [[String]] = []
        for _ in 0..<2 {
            let network = try SimulatedNetwork(seed: 7, link: Self.link)
            try Self.check(try await Self.switchScenario(on: network), network)
            logs.append(network.eventLog)
        }
        #expect(logs[0] == logs[1], "seed 7 gave two event logs")
        #expect(logs[0].contains { $0.contains("path wifi (wlan0) > cellular (wwan0)") })
    }

    @Test("1,000 seeds across the switch: every one ends the open call and reconnects over cellular")
    func thousandSeeds() async throws {
        let started = ContinuousClock.now
        let found = try await SimulatedNetwork.sweep(seeds: 1...1_000, link: Self.link) { network in
            try Self.check(try await Self.switchScenario(on: network), network)
        }
        #expect(found == nil, "\(String(describing: found))")
        print("1,000 seeds across the switch in \(ContinuousClock.now - started)")
    }
}
