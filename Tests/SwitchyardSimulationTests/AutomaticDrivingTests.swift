import Switchyard
import SwitchyardSimulation
import Testing

/// A network that drives itself: its clock jumps over the time nothing happens in.
@Suite(.timeLimit(.minutes(1)))
struct AutomaticDrivingTests {
    @Test("ten seconds of latency each way pass in far less wall-clock time, and the clock shows them")
    func jumpsOverIdleTime() async throws {
        let network = try SimulatedNetwork(seed: 9, driving: .automatic, link: SimulatedLink(latency: .seconds(10)))
        let pair = try await SimulatedPair.make(network: network)
        let start = ContinuousClock.now
        pair.connection.write([1, 2, 3], completion: nil)
        var waited = 0
        while pair.serverRecorder.bytes != [1, 2, 3], waited < 500 {
            try await Task.sleep(for: .milliseconds(10))
            waited += 1
        }
        #expect(pair.serverRecorder.bytes == [1, 2, 3])
        #expect(pair.serverRecorder.reads.map(\.at) == [.seconds(10)])
        #expect(ContinuousClock.now - start < .seconds(5))
        await pair.shutDown()
    }

    @Test("a fault scheduled in virtual time happens when the clock reaches it")
    func scheduledFault() async throws {
        let network = try SimulatedNetwork(seed: 9, driving: .automatic, link: SimulatedLink(latency: .milliseconds(1)))
        let pair = try await SimulatedPair.make(network: network)
        network.schedule(.resetConnections(host: SimulatedPair.serverHost), at: .seconds(60))
        var waited = 0
        while !pair.clientRecorder.closed, waited < 500 {
            try await Task.sleep(for: .milliseconds(10))
            waited += 1
        }
        #expect(pair.serverRecorder.error?.reason == .reset)
        #expect(pair.clientRecorder.error?.reason == .reset)
        #expect(network.now >= .seconds(60))
        await pair.shutDown()
    }
}
