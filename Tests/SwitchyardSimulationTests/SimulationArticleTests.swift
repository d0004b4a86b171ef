import Switchyard
import SwitchyardSimulation
import Testing

/// The example of the "Simulating a network" article, run and held to what it says.
@Suite(.timeLimit(.minutes(1)))
struct SimulationArticleTests {
    @Test("The article's example: bytes arrive after the latency; the black hole takes what follows")
    func article() async throws {
        // doc-block begin
        let network = try SimulatedNetwork(seed: 42)
        network.setLink(between: "10.0.0.1", and: "10.0.0.2", SimulatedLink(latency: .milliseconds(20)))
        let server = try SimulationTransport(network: network, host: "10.0.0.2")
        let client = try SimulationTransport(network: network, host: "10.0.0.1")
        let listener = try await server.listen(on: Endpoint(host: "10.0.0.2", port: 80))
        let connection = try await client.connect(to: listener.localAddress)

        connection.write(Array("hello".utf8), completion: nil)
        network.schedule(.blackHole(host: "10.0.0.2"), at: .milliseconds(30))
        await network.advance(by: .milliseconds(25))   // "hello" arrived at 20 ms
        connection.write(Array("lost".utf8), completion: nil)
        await network.advance(by: .milliseconds(25))   // due at 45 ms: the black hole (30 ms) took it
        print(network.eventLog.joined(separator: "\n"))
        // doc-block end
        let log = network.eventLog
        #expect(log.contains("0.000000000 listen 10.0.0.2:80"))
        #expect(log.contains("0.000000000 connect 10.0.0.1:32768 > 10.0.0.2:80"))
        #expect(log.contains("0.020000000 deliver 10.0.0.1:32768 > 10.0.0.2:80 data 5"))
        #expect(log.contains("0.030000000 fault black hole 10.0.0.2"))
        #expect(log.contains("0.045000000 drop 10.0.0.1:32768 > 10.0.0.2:80 data 4"))
        #expect(network.now == .milliseconds(50))
        #expect(network.description.contains("seed 42"))
        listener.close()
        await client.shutdownNow()
        await server.shutdownNow()
    }
}
