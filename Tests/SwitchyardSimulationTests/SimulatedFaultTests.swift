import Switchyard
import SwitchyardSimulation
import Testing

/// Each scripted fault, applied in virtual time, against the same steps without it.
@Suite(.timeLimit(.minutes(1)))
struct SimulatedFaultTests {
    @Test("a black hole swallows bytes with no error, in flight too; lifted, new bytes travel again")
    func blackHole() async throws {
        let network = try SimulatedNetwork(seed: 3, link: SimulatedLink(latency: .milliseconds(10)))
        let pair = try await SimulatedPair.make(network: network)
        let completions = Completions()
        // Sent before the hole opens, still in flight when it does.
        pair.connection.write([1], completion: completions.record)
        network.schedule(.blackHole(host: SimulatedPair.serverHost), at: .milliseconds(5))
        await network.advance(by: .milliseconds(6))
        pair.connection.write([2], completion: completions.record)
        await network.advance(by: .milliseconds(50))
        #expect(pair.serverRecorder.bytes.isEmpty)
        #expect(completions.succeeded == 2, "writes complete: the bytes left; the network lost them")
        #expect(!pair.clientRecorder.closed && !pair.serverRecorder.closed, "a black hole gives no error")
        #expect(network.eventLog.contains { $0.hasSuffix("fault black hole 10.0.0.2") })

        network.inject(.liftBlackHole(host: SimulatedPair.serverHost))
        pair.connection.write([3], completion: completions.record)
        await network.advance(by: .milliseconds(10))
        #expect(pair.serverRecorder.bytes == [3])
        await pair.shutDown()
    }

    @Test("without a black hole the same steps deliver every byte")
    func noBlackHole() async throws {
        let network = try SimulatedNetwork(seed: 3, link: SimulatedLink(latency: .milliseconds(10)))
        let pair = try await SimulatedPair.make(network: network)
        pair.connection.write([1], completion: nil)
        await network.advance(by: .milliseconds(6))
        pair.connection.write([2], completion: nil)
        await network.advance(by: .milliseconds(50))
        #expect(pair.serverRecorder.bytes == [1, 2])
        await pair.shutDown()
    }

    @Test("a stall of a host's connections swallows their bytes both ways with no error; a connection made after it travels")
    func stallConnections() async throws {
        let network = try SimulatedNetwork(seed: 6, link: SimulatedLink(latency: .milliseconds(10)))
        let pair = try await SimulatedPair.make(network: network)
        let completions = Completions()
        pair.connection.write([1], completion: completions.record)
        network.schedule(.stallConnections(host: SimulatedPair.serverHost), at: .milliseconds(5))
        await network.advance(by: .milliseconds(50))
        #expect(pair.serverRecorder.bytes.isEmpty, "in flight when the stall came: lost")
        #expect(completions.succeeded == 1)
        #expect(!pair.clientRecorder.closed && !pair.serverRecorder.closed, "a stall gives no error")
        #expect(network.eventLog.contains { $0.hasSuffix("fault stall connections 10.0.0.2") })

        // The next connection between the same hosts travels.
        let fresh = try await SimulatedPair.make(network: network, port: 81)
        fresh.connection.write([2], completion: nil)
        await network.advance(by: .milliseconds(20))
        #expect(fresh.serverRecorder.bytes == [2])
        pair.connection.write([3], completion: nil)
        await network.advance(by: .milliseconds(20))
        #expect(pair.serverRecorder.bytes.isEmpty, "the stalled connection stays stalled")
        await fresh.shutDown()
        await pair.shutDown()
    }

    @Test("resetting a host's connections ends them there with unavailable/reset at once, and the peer after the latency")
    func resetConnections() async throws {
        let network = try SimulatedNetwork(seed: 4, link: SimulatedLink(latency: .milliseconds(10)))
        let pair = try await SimulatedPair.make(network: network)
        network.schedule(.resetConnections(host: SimulatedPair.clientHost), at: .milliseconds(20))
        await network.advance(by: .milliseconds(20))
        #expect(pair.clientRecorder.error?.code == .unavailable)
        #expect(pair.clientRecorder.error?.reason == .reset)
        #expect(pair.clientRecorder.error?.message.contains("seed 4") == true, "the error names the seed: \(String(describing: pair.clientRecorder.error))")
        #expect(!pair.serverRecorder.closed, "the peer hears the reset only after the latency")
        await network.advance(by: .milliseconds(10))
        #expect(pair.serverRecorder.error?.code == .unavailable)
        #expect(pair.serverRecorder.error?.reason == .reset)
        await pair.shutDown()
    }

    @Test("a reset of another host leaves the connection open")
    func resetOtherHost() async throws {
        let network = try SimulatedNetwork(seed: 4, link: SimulatedLink(latency: .milliseconds(10)))
        let pair = try await SimulatedPair.make(network: network)
        network.inject(.resetConnections(host: "10.9.9.9"))
        await network.advance(by: .milliseconds(30))
        #expect(!pair.clientRecorder.closed && !pair.serverRecorder.closed)
        pair.connection.write([5], completion: nil)
        await network.advance(by: .milliseconds(10))
        #expect(pair.serverRecorder.bytes == [5])
        await pair.shutDown()
    }

    @Test("a host that rejects with reset ends a connection at its next send, after the latency; an idle one stays; a connect is refused until it stops")
    func rejectWithReset() async throws {
        let network = try SimulatedNetwork(seed: 8, link: SimulatedLink(latency: .milliseconds(10)))
        let pair = try await SimulatedPair.make(network: network)
        network.inject(.rejectWithReset(host: SimulatedPair.serverHost))
        await network.advance(by: .milliseconds(50))
        #expect(!pair.clientRecorder.closed && !pair.serverRecorder.closed, "nothing sent, nothing rejected")

        pair.connection.write([1], completion: nil)
        await network.advance(by: .milliseconds(9))
        #expect(!pair.clientRecorder.closed, "the reset comes back after the latency")
        await network.advance(by: .milliseconds(1))
        #expect(pair.clientRecorder.error?.code == .unavailable)
        #expect(pair.clientRecorder.error?.reason == .reset)
        #expect(pair.serverRecorder.bytes.isEmpty)
        #expect(network.eventLog.contains { $0.contains("reject 10.0.0.1:") && $0.hasSuffix("data 1") })

        let error = await #expect(throws: TransportError.self) {
            _ = try await pair.client.connect(to: Endpoint(host: SimulatedPair.serverHost, port: 80))
        }
        #expect(error?.code == .unavailable)
        #expect(error?.reason == .refused)

        network.inject(.stopRejecting(host: SimulatedPair.serverHost))
        await network.advance(by: .zero)
        let fresh = try await pair.client.connect(to: Endpoint(host: SimulatedPair.serverHost, port: 80))
        fresh.close()
        await pair.shutDown()
    }

    @Test("a reclaimed socket ends its end alone with unavailable/reclaimed at once, its writes unsent; the peer hears a reset after the latency")
    func reclaimSocket() async throws {
        let network = try SimulatedNetwork(seed: 9, link: SimulatedLink(latency: .milliseconds(10)))
        let pair = try await SimulatedPair.make(network: network)
        let other = try await SimulatedPair.make(network: network, port: 81)
        network.inject(.reclaimSocket(local: pair.accepted.localAddress, remote: pair.accepted.remoteAddress))
        await network.advance(by: .zero)
        #expect(pair.serverRecorder.error?.code == .unavailable)
        #expect(pair.serverRecorder.error?.reason == .reclaimed)
        #expect(!pair.clientRecorder.closed, "the peer hears it after the latency")
        let completions = Completions()
        pair.accepted.write([1], completion: completions.record)
        await network.advance(by: .milliseconds(10))
        #expect(completions.succeeded == 0, "a write on a reclaimed socket is never sent")
        #expect(pair.clientRecorder.error?.reason == .reset)
        #expect(pair.clientRecorder.bytes.isEmpty)
        #expect(!other.clientRecorder.closed && !other.serverRecorder.closed, "another connection to the same host stays")
        await other.shutDown()
        await pair.shutDown()
    }

    @Test("a host that stops reading holds its writers back after one window; resumed, everything arrives")
    func stopReading() async throws {
        let network = try SimulatedNetwork(seed: 5, link: SimulatedLink(latency: .milliseconds(1)))
        let pair = try await SimulatedPair.make(network: network)
        network.inject(.stopReading(host: SimulatedPair.serverHost))
        let completions = Completions()
        let chunk = pattern(count: 64 * 1024)
        for _ in 0..<8 { pair.connection.write(chunk, completion: completions.record) }
        await network.advance(by: .milliseconds(100))
        #expect(pair.serverRecorder.bytes.isEmpty)
        #expect(completions.succeeded == 4, "a 256 KiB window takes four 64 KiB writes")
        #expect(pair.connection.pendingWriteBytes == 4 * 64 * 1024)

        network.inject(.resumeReading(host: SimulatedPair.serverHost))
        await network.advance(by: .milliseconds(100))
        #expect(pair.serverRecorder.bytes.count == 8 * 64 * 1024)
        #expect(completions.succeeded == 8)
        await pair.shutDown()
    }

    @Test("a reader that reads takes all eight writes without the fault")
    func readingHost() async throws {
        let network = try SimulatedNetwork(seed: 5, link: SimulatedLink(latency: .milliseconds(1)))
        let pair = try await SimulatedPair.make(network: network)
        let completions = Completions()
        let chunk = pattern(count: 64 * 1024)
        for _ in 0..<8 { pair.connection.write(chunk, completion: completions.record) }
        await network.advance(by: .milliseconds(100))
        #expect(pair.serverRecorder.bytes.count == 8 * 64 * 1024)
        #expect(completions.succeeded == 8)
        await pair.shutDown()
    }
}
