import Switchyard
import SwitchyardSimulation
import Synchronization
import Testing

/// A seed sweep finds an ordering that one seed does not show, and its seed replays it.
@Suite(.timeLimit(.minutes(1)))
struct SeedSweepTests {
    /// The planted race: a server relays what its first connection reads to its second,
    /// without checking that the second is still open. The client writes on the first
    /// and, 7 ms later, closes the second; the link delays each segment by 5 ms plus up to
    /// 10 ms of jitter from the seed. The relayed write lands after the second connection
    /// closed when the close's jitter is more than 7 ms below the write's: in about 1
    /// ordering of 22.
    struct WriteAfterClose: Error, CustomStringConvertible {
        var description: String { "the relay wrote to a connection its peer had already closed" }
    }

    static let link = SimulatedLink(latency: .milliseconds(5), jitter: .milliseconds(10))

    @Test("a sweep over seeds finds the ordering where the relay writes after close, and its seed replays it with the same event log")
    func sweepFindsAndReplaysThePlantedRace() async throws {
        // doc-block begin
        let link = SimulatedLink(latency: .milliseconds(5), jitter: .milliseconds(10))
        let found = try await SimulatedNetwork.sweep(seeds: 1...400, link: link) { network in
            try await relayScenario(on: network)
        }
        // `found`: the first seed whose run threw, what it threw, and that run's event log.
        // doc-block end
        #expect(link == Self.link)
        let failure = try #require(found, "400 seeds never showed the race (it shows in about 1 ordering of 22)")
        #expect(failure.error is WriteAfterClose, "\(failure)")
        #expect(failure.seedsRun > 1, "the first seed already failed: the race is not rare, the test does not show a sweep's worth")
        #expect(failure.description.contains("seed \(failure.seed)"))

        for _ in 0..<2 {
            let replay = try SimulatedNetwork(seed: failure.seed, link: Self.link)
            await #expect(throws: WriteAfterClose.self) { try await relayScenario(on: replay) }
            #expect(replay.eventLog == failure.eventLog, "the same seed gave another event log")
        }
    }

    @Test("a seed the sweep passed before the failing one passes again")
    func passedSeedPassesAgain() async throws {
        let found = try await SimulatedNetwork.sweep(seeds: 1...400, link: Self.link) { network in
            try await relayScenario(on: network)
        }
        let failure = try #require(found)
        try #require(failure.seed > 1)
        try await relayScenario(on: try SimulatedNetwork(seed: 1, link: Self.link))
    }

    @Test("a sweep whose every run passes returns nil")
    func cleanSweep() async throws {
        let failure = try await SimulatedNetwork.sweep(seeds: 1...20, link: Self.link) { network in
            #expect(network.seed >= 1 && network.seed <= 20)
        }
        #expect(failure == nil)
    }
}

/// The planted race's steps, on `network`: throws `WriteAfterClose` when the relay wrote
/// after the close.
func relayScenario(on network: SimulatedNetwork) async throws {
    let server = try SimulationTransport(network: network, host: "10.0.0.2")
    let client = try SimulationTransport(network: network, host: "10.0.0.1")
    let listener = try await server.listen(on: Endpoint(host: "10.0.0.2", port: 80))
    var accepted = listener.connections.makeAsyncIterator()
    let first = try await client.connect(to: Endpoint(host: "10.0.0.2", port: 80))
    let second = try await client.connect(to: Endpoint(host: "10.0.0.2", port: 80))
    guard let firstEnd = await accepted.next(), let secondEnd = await accepted.next() else {
        throw TransportError(code: .unavailable, reason: .refused, message: "not accepted")
    }
    let relay = Relay(to: secondEnd)
    firstEnd.setHandler(relay)
    firstEnd.startReading()
    secondEnd.setHandler(ClosingAtEnd(secondEnd))
    secondEnd.startReading()

    first.write([42], completion: nil)
    await network.advance(by: .milliseconds(7))
    second.close()
    await network.advance(by: .milliseconds(50))
    let failed = relay.failedWrites
    first.close()
    listener.close()
    await network.runUntilIdle()
    await client.shutdownNow()
    await server.shutdownNow()
    if failed > 0 { throw SeedSweepTests.WriteAfterClose() }
}

/// The test double with the planted race: relays what it reads to `target` without
/// asking whether `target` is still open, and counts the writes that failed.
private final class Relay: ConnectionHandler, Sendable {
    private let target: any Connection
    private let failed = Mutex(0)
    init(to target: any Connection) { self.target = target }
    var failedWrites: Int { failed.withLock { $0 } }

    func connectionDidRead(_ bytes: UnsafeRawBufferPointer) {
        target.write(Array(bytes)) { error in
            if error != nil { self.failed.withLock { $0 += 1 } }
        }
    }
    func connectionDidReadEnd() {}
    func connectionDidDrainWrites() {}
    func connectionDidClose(error: TransportError?) {}
}

/// Closes its connection at the end of stream, as a plain server does.
private final class ClosingAtEnd: ConnectionHandler, Sendable {
    private let connection: any Connection
    init(_ connection: any Connection) { self.connection = connection }
    func connectionDidRead(_ bytes: UnsafeRawBufferPointer) {}
    func connectionDidReadEnd() { connection.close() }
    func connectionDidDrainWrites() {}
    func connectionDidClose(error: TransportError?) {}
}
