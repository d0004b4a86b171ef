import Switchyard
import SwitchyardSimulation
import Testing

/// The kernel's stall detection on the simulated TCP, in virtual time: a stall timeout
/// ends a connection whose bytes go unacknowledged, or whose keepalive probes go
/// unanswered, with unavailable/stalled; a healthy idle connection lives on.
@Suite(.timeLimit(.minutes(1)))
struct SimulatedStallDetectionTests {
    static let stallTimeout: Duration = .seconds(2)
    static var configuration: TransportConfiguration { TransportConfiguration(stallTimeout: stallTimeout) }

    @Test("bytes sent into a black hole end the writer with unavailable/stalled at the stall timeout, not before")
    func unacknowledgedBytes() async throws {
        let network = try SimulatedNetwork(seed: 11, link: SimulatedLink(latency: .milliseconds(10)))
        let pair = try await SimulatedPair.make(network: network, configuration: Self.configuration)
        await network.advance(by: .milliseconds(500))
        network.inject(.blackHole(host: SimulatedPair.serverHost))
        await network.advance(by: .zero)
        let sentAt = network.now
        pair.connection.write(pattern(count: 1000), completion: nil)
        await network.run(until: sentAt + Self.stallTimeout - .milliseconds(1))
        #expect(!pair.clientRecorder.closed, "ended before the stall timeout: \(String(describing: pair.clientRecorder.error))")
        await network.run(until: sentAt + Self.stallTimeout)
        #expect(pair.clientRecorder.error?.code == .unavailable)
        #expect(pair.clientRecorder.error?.reason == .stalled)
        #expect(pair.clientRecorder.error?.message.contains("unacknowledged") == true, "\(String(describing: pair.clientRecorder.error))")
        await pair.shutDown()
    }

    @Test("an idle connection whose peer went dark ends with unavailable/stalled by keepalive within the stall timeout of the last word heard")
    func unansweredProbes() async throws {
        let network = try SimulatedNetwork(seed: 12, link: SimulatedLink(latency: .milliseconds(10)))
        let pair = try await SimulatedPair.make(network: network, configuration: Self.configuration)
        pair.connection.write([1, 2, 3], completion: nil)
        await network.advance(by: .milliseconds(100))
        #expect(pair.serverRecorder.bytes == [1, 2, 3])
        let lastHeard = network.now
        network.inject(.blackHole(host: SimulatedPair.serverHost))
        await network.run(until: lastHeard + .seconds(1))
        #expect(!pair.clientRecorder.closed && !pair.serverRecorder.closed)
        await network.run(until: lastHeard + Self.stallTimeout + .milliseconds(20))
        for recorder in [pair.clientRecorder, pair.serverRecorder] {
            #expect(recorder.error?.code == .unavailable)
            #expect(recorder.error?.reason == .stalled)
            #expect(recorder.error?.message.contains("keepalive") == true, "\(String(describing: recorder.error))")
        }
        #expect(network.eventLog.contains { $0.contains("drop") && $0.hasSuffix(" probe") })
        await pair.shutDown()
    }

    @Test("a healthy idle connection answers its keepalive probes and stays open")
    func answeredProbes() async throws {
        let network = try SimulatedNetwork(seed: 13, link: SimulatedLink(latency: .milliseconds(10)))
        let pair = try await SimulatedPair.make(network: network, configuration: Self.configuration)
        await network.advance(by: .seconds(30))
        #expect(!pair.clientRecorder.closed && !pair.serverRecorder.closed)
        #expect(network.eventLog.contains { $0.contains("deliver") && $0.hasSuffix(" probe") })
        #expect(network.eventLog.contains { $0.contains("deliver") && $0.hasSuffix(" ack 0") })
        pair.connection.write([9], completion: nil)
        await network.advance(by: .milliseconds(20))
        #expect(pair.serverRecorder.bytes == [9])
        await pair.shutDown()
    }

    @Test("without a stall timeout a black hole ends nothing, however long")
    func noStallTimeout() async throws {
        let network = try SimulatedNetwork(seed: 14, link: SimulatedLink(latency: .milliseconds(10)))
        let pair = try await SimulatedPair.make(network: network)
        network.inject(.blackHole(host: SimulatedPair.serverHost))
        pair.connection.write([1], completion: nil)
        await network.advance(by: .seconds(600))
        #expect(!pair.clientRecorder.closed && !pair.serverRecorder.closed)
        await pair.shutDown()
    }

    @Test("a stall timeout with the kernel's detection off is refused: the simulation has no monitor of its own")
    func kernelDetectionOff() throws {
        let network = try SimulatedNetwork(seed: 15)
        var configuration = Self.configuration
        configuration.kernelStallDetection = false
        let error = #expect(throws: TransportError.self) { try SimulationTransport(network: network, configuration: configuration) }
        #expect(error?.code == .invalidArgument)
        #expect(error?.reason == .invalidOption)
    }
}
