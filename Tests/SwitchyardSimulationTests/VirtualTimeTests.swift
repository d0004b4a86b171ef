import Switchyard
import SwitchyardSimulation
import Synchronization
import Testing

/// The clock a manually driven network gives the code above its transports, and the
/// device path a `SimulatedConnectivityMonitor` scripts.
@Suite(.timeLimit(.minutes(1)))
struct VirtualTimeTests {
    @Test("a sleep on the transport's clock wakes at its virtual deadline, in no wall-clock time; the jitter repeats with the seed")
    func sleepInVirtualTime() async throws {
        var draws: [[Double]] = []
        for _ in 0..<2 {
            let network = try SimulatedNetwork(seed: 11)
            let transport = try SimulationTransport(network: network, host: "10.0.0.1")
            let started = ContinuousClock.now
            let woke = try await network.run {
                let clock = transport.clock
                try await clock.sleep(until: clock.now + .seconds(3600))
                return network.now
            }
            #expect(woke == .seconds(3600))
            #expect(ContinuousClock.now - started < .seconds(10), "an hour of virtual time took \(ContinuousClock.now - started)")
            draws.append((0..<5).map { _ in transport.clock.random(in: 0...1) })
            await transport.shutdownNow()
        }
        #expect(draws[0] == draws[1], "the same seed drew other numbers")
    }

    @Test("a cancelled sleep ends at once with CancellationError, and the clock does not move to its deadline")
    func cancelledSleep() async throws {
        let network = try SimulatedNetwork(seed: 12)
        let transport = try SimulationTransport(network: network, host: "10.0.0.1")
        let outcome = try await network.run {
            let clock = transport.clock
            let sleeper = Task(executorPreference: clock.taskExecutor) {
                try await clock.sleep(until: clock.now + .seconds(60))
            }
            try await clock.sleep(until: clock.now + .seconds(1))
            sleeper.cancel()
            return await sleeper.result
        }
        #expect(throws: CancellationError.self) { try outcome.get() }
        await network.runUntilIdle()
        #expect(network.now == .seconds(1), "the clock moved to the cancelled sleep's deadline: \(network.now)")
        await transport.shutdownNow()
    }

    @Test("a network that ran a channel and a server is freed once the test lets it go: run leaves no work queued that would hold it")
    func runLeavesNothingBehind() async throws {
        weak var weakNetwork: SimulatedNetwork?
        do {
            let network = try SimulatedNetwork(seed: 7, link: ChannelAcrossASwitchTests.link)
            weakNetwork = network
            _ = try await ChannelAcrossASwitchTests.switchScenario(on: network)
        }
        let deadline = ContinuousClock.now + .seconds(5)
        while weakNetwork != nil && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(weakNetwork == nil, "the network outlived the test: work left on its clock holds it (and its thread)")
    }

    @Test("a transport that follows a monitor connects from its path's address; with none, at once unavailable/unreachable")
    func followingTransport() async throws {
        let network = try SimulatedNetwork(seed: 13)
        let wifi = ConnectivityPath(category: .wifi, interface: "wlan0", addresses: ["10.0.1.2"])
        let monitor = SimulatedConnectivityMonitor(network: network, path: wifi)
        let phone = try SimulationTransport(network: network, following: monitor)
        let server = try SimulationTransport(network: network, host: "10.0.100.1")
        let listener = try await server.listen(on: Endpoint(host: "10.0.100.1", port: 80))
        let heard = HeardPaths()
        let observation = monitor.observe { path in heard.append(path) }
        defer { observation.cancel() }

        let first = try await phone.connect(to: listener.localAddress)
        #expect(first.localAddress.host == "10.0.1.2")
        monitor.schedule(.none, at: .milliseconds(10))
        await network.advance(by: .milliseconds(10))
        #expect(heard.paths == [.none])
        #expect(phone.host == nil)
        let refused = await #expect(throws: TransportError.self) { try await phone.connect(to: listener.localAddress) }
        #expect(refused?.code == .unavailable)
        #expect(refused?.reason == .unreachable)

        let cellular = ConnectivityPath(category: .cellular, interface: "wwan0", addresses: ["10.0.2.2"])
        monitor.change(to: cellular)
        await network.runUntilIdle()
        let second = try await phone.connect(to: listener.localAddress)
        #expect(second.localAddress.host == "10.0.2.2")
        #expect(network.eventLog.contains { $0.hasSuffix("path none > cellular (wwan0)") })
        listener.close()
        await phone.shutdownNow()
        await server.shutdownNow()
    }
}

/// The paths an observer heard.
final class HeardPaths: Sendable {
    private let state = Mutex<[ConnectivityPath]>([])
    var paths: [ConnectivityPath] { state.withLock { $0 } }
    func append(_ path: ConnectivityPath) { state.withLock { $0.append(path) } }
}
