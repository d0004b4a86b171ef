import Switchyard
import SwitchyardSimulation
import Testing

/// A connect whose SYN vanishes into a black hole stays pending, in virtual time, until
/// its timeout, its task's cancellation or its transport's shutdown.
@Suite(.timeLimit(.minutes(1)))
struct SimulatedPendingConnectTests {
    static let serverHost = "10.0.0.2"
    static let target = Endpoint(host: serverHost, port: 80)

    /// A network with a listener on the server's host, black-holed, and a client transport.
    static func blackHoled(seed: UInt64) async throws -> (SimulatedNetwork, SimulationTransport, SimulationTransport, any Listener) {
        let network = try SimulatedNetwork(seed: seed, link: SimulatedLink(latency: .milliseconds(5)))
        let server = try SimulationTransport(network: network, host: serverHost)
        let client = try SimulationTransport(network: network, host: "10.0.0.1")
        let listener = try await server.listen(on: target)
        network.inject(.blackHole(host: serverHost))
        await network.advance(by: .zero)
        return (network, client, server, listener)
    }

    @Test("a connect into a black hole ends deadlineExceeded (connect timeout) at its timeout in virtual time, not before")
    func timesOut() async throws {
        let (network, client, server, listener) = try await Self.blackHoled(seed: 21)
        let started = network.now
        let error = try await network.run { () -> TransportError? in
            do {
                _ = try await client.connect(to: Self.target, options: ConnectOptions(timeout: .seconds(1)))
                return nil
            } catch let error as TransportError {
                return error
            }
        }
        #expect(error?.code == .deadlineExceeded)
        #expect(error?.reason == .connectTimeout)
        #expect(network.now - started == .seconds(1))
        #expect(network.eventLog.contains { $0.hasSuffix("SYN dropped") })
        listener.close()
        try await network.run { await client.shutdownNow(); await server.shutdownNow() }
    }

    @Test("a pending connect ends cancelled (task cancelled) with its task, and cancelled (shutdown) with its transport, at once")
    func cancelledAndShutDown() async throws {
        let (network, client, server, listener) = try await Self.blackHoled(seed: 22)
        let (cancelled, shutDown) = try await network.run { () -> (TransportError?, TransportError?) in
            let clock = client.clock
            func pending() -> Task<any Connection, any Error> {
                Task(executorPreference: clock.taskExecutor) {
                    try await client.connect(to: Self.target, options: ConnectOptions(timeout: .seconds(30)))
                }
            }
            let first = pending()
            try await clock.sleep(until: clock.now + .milliseconds(200))
            let cancelledAt = clock.now
            first.cancel()
            let cancelled = await first.result.failure
            #expect(clock.now == cancelledAt, "the cancelled connect ended at once")

            let second = pending()
            try await clock.sleep(until: clock.now + .milliseconds(200))
            await client.shutdownNow()
            return (cancelled, await second.result.failure)
        }
        #expect(cancelled?.code == .cancelled)
        #expect(cancelled?.reason == .taskCancelled)
        #expect(shutDown?.code == .cancelled)
        #expect(shutDown?.reason == .shutdown)
        listener.close()
        try await network.run { await server.shutdownNow() }
    }

    @Test("a transport that follows a path of none still connects to loopback, from loopback")
    func loopbackWithoutAPath() async throws {
        let network = try SimulatedNetwork(seed: 23)
        let monitor = SimulatedConnectivityMonitor(network: network, path: .none)
        let transport = try SimulationTransport(network: network, following: monitor)
        let listener = try await transport.listen(on: Endpoint(host: "127.0.0.1", port: 90))
        let connection = try await transport.connect(to: Endpoint(host: "127.0.0.1", port: 90))
        #expect(connection.localAddress.host == "127.0.0.1")
        connection.close()
        listener.close()
        try await network.run { await transport.shutdownNow() }
    }
}

extension Result {
    /// The error, as a `TransportError`, if the result is a failure.
    fileprivate var failure: TransportError? {
        if case .failure(let error) = self { return error as? TransportError }
        return nil
    }
}
