import Switchyard
import SwitchyardSimulation
import Synchronization
import Testing

/// The simulated network driven by hand: virtual time, links, replay from a seed.
@Suite(.timeLimit(.minutes(1)))
struct SimulatedNetworkTests {
    @Test("bytes arrive exactly one link latency after they are sent, in virtual time")
    func latency() async throws {
        let network = try SimulatedNetwork(seed: 1, link: SimulatedLink(latency: .milliseconds(5)))
        let pair = try await SimulatedPair.make(network: network)
        pair.connection.write(pattern(count: 100), completion: nil)
        await network.advance(by: .milliseconds(5) - .nanoseconds(1))
        #expect(pair.serverRecorder.bytes.isEmpty, "bytes arrived before the latency had passed")
        await network.advance(by: .nanoseconds(1))
        #expect(pair.serverRecorder.bytes == pattern(count: 100))
        #expect(pair.serverRecorder.reads.map(\.at) == [.milliseconds(5)])
        #expect(network.now == .milliseconds(5))
        await pair.shutDown()
    }

    @Test("advance(by:) runs each event at its own virtual time and leaves the clock at the end")
    func advanceRunsEventsAtTheirTimes() async throws {
        let network = try SimulatedNetwork(seed: 1, link: SimulatedLink(latency: .milliseconds(3)))
        let pair = try await SimulatedPair.make(network: network)
        pair.connection.write([1], completion: nil)
        await network.advance(by: .milliseconds(1))
        pair.connection.write([2], completion: nil)
        await network.advance(by: .milliseconds(1))
        pair.connection.write([3], completion: nil)
        await network.advance(by: .milliseconds(10))
        #expect(pair.serverRecorder.bytes == [1, 2, 3])
        #expect(pair.serverRecorder.reads.map(\.at) == [.milliseconds(3), .milliseconds(4), .milliseconds(5)])
        #expect(network.now == .milliseconds(12))
        await network.run(until: .milliseconds(20))
        #expect(network.now == .milliseconds(20))
        await pair.shutDown()
    }

    @Test("runUntilIdle() runs every event however far ahead and stops the clock at the last one")
    func runUntilIdle() async throws {
        let network = try SimulatedNetwork(seed: 1, link: SimulatedLink(latency: .seconds(30)))
        let pair = try await SimulatedPair.make(network: network)
        pair.connection.write([7], completion: nil)
        await network.runUntilIdle()
        #expect(pair.serverRecorder.bytes == [7])
        // The byte at 30 s, its window back to the writer at 60 s.
        #expect(network.now == .seconds(60))
        await pair.shutDown()
    }

    @Test("nothing runs on a manual network until the test drives it")
    func manualWaits() async throws {
        let network = try SimulatedNetwork(seed: 1)
        let pair = try await SimulatedPair.make(network: network)
        pair.connection.write([1, 2, 3], completion: nil)
        try await Task.sleep(for: .milliseconds(50))
        #expect(pair.serverRecorder.bytes.isEmpty)
        await network.advance(by: .zero)
        #expect(pair.serverRecorder.bytes == [1, 2, 3])
        await pair.shutDown()
    }

    @Test("a link of its own overrides the default for that pair of hosts only, both ways")
    func links() async throws {
        let network = try SimulatedNetwork(seed: 1, link: SimulatedLink(latency: .milliseconds(1)))
        network.setLink(between: SimulatedPair.serverHost, and: SimulatedPair.clientHost, SimulatedLink(latency: .milliseconds(8)))
        #expect(network.link(between: SimulatedPair.clientHost, and: SimulatedPair.serverHost).latency == .milliseconds(8))
        #expect(network.link(between: SimulatedPair.clientHost, and: "10.0.0.9").latency == .milliseconds(1))
        let pair = try await SimulatedPair.make(network: network)
        pair.accepted.write([9], completion: nil)
        await network.advance(by: .milliseconds(20))
        #expect(pair.clientRecorder.reads.map(\.at) == [.milliseconds(8)])
        await pair.shutDown()
    }

    @Test("the same seed and the same steps give the same event log, byte for byte")
    func replay() async throws {
        let first = try await jitteredRun(seed: 0x5EED)
        let second = try await jitteredRun(seed: 0x5EED)
        #expect(!first.log.isEmpty)
        #expect(first.log == second.log)
        #expect(first.order == second.order)
    }

    @Test("different seeds deliver the clients' bytes in different orders when the links jitter")
    func seedsChooseOrders() async throws {
        var orders: Set<[String]> = []
        for seed: UInt64 in 1...6 {
            orders.insert(try await jitteredRun(seed: seed).order)
        }
        #expect(orders.count > 1, "six seeds gave one order: \(orders)")
    }

    @Test("without jitter every seed gives the same log")
    func noJitterNoRandomness() async throws {
        let first = try await jitteredRun(seed: 1, jitter: .zero)
        let second = try await jitteredRun(seed: 2, jitter: .zero)
        #expect(first.log == second.log)
    }

    /// Three clients each send three messages to one server over links with 1 ms of
    /// latency and `jitter`; returns the event log and the order (by client) in which
    /// the server read them.
    private func jitteredRun(seed: UInt64, jitter: Duration = .milliseconds(4)) async throws -> (log: [String], order: [String]) {
        let network = try SimulatedNetwork(seed: seed, link: SimulatedLink(latency: .milliseconds(1), jitter: jitter))
        let server = try SimulationTransport(network: network, host: "10.0.0.100")
        let listener = try await server.listen(on: Endpoint(host: "10.0.0.100", port: 80))
        var accepted = listener.connections.makeAsyncIterator()
        var clients: [SimulationTransport] = []
        var connections: [any Connection] = []
        let order = OrderRecorder()
        for index in 1...3 {
            let client = try SimulationTransport(network: network, host: "10.0.0.\(index)")
            clients.append(client)
            connections.append(try await client.connect(to: Endpoint(host: "10.0.0.100", port: 80)))
            let end = try #require(await accepted.next())
            end.setHandler(OrderHandler(name: "client \(index)", recorder: order))
            end.startReading()
        }
        for round in 0..<3 {
            for (index, connection) in connections.enumerated() { connection.write([UInt8(index), UInt8(round)], completion: nil) }
            await network.advance(by: .microseconds(500))
        }
        await network.runUntilIdle()
        let log = network.eventLog
        listener.close()
        for client in clients { await client.shutdownNow() }
        await server.shutdownNow()
        return (log, order.names)
    }
}

/// The order in which named handlers read.
final class OrderRecorder: Sendable {
    private let state = Mutex<[String]>([])
    var names: [String] { state.withLock { $0 } }
    func append(_ name: String) { state.withLock { $0.append(name) } }
}

final class OrderHandler: ConnectionHandler {
    let name: String
    let recorder: OrderRecorder
    init(name: String, recorder: OrderRecorder) {
        self.name = name
        self.recorder = recorder
    }

    func connectionDidRead(_ bytes: UnsafeRawBufferPointer) { recorder.append(name) }
    func connectionDidReadEnd() {}
    func connectionDidDrainWrites() {}
    func connectionDidClose(error: TransportError?) {}
}
