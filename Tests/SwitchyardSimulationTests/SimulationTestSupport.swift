import Switchyard
import SwitchyardSimulation
import Synchronization

/// A connection handler that records what it hears and when, in the network's virtual
/// time.
final class Recorder: ConnectionHandler {
    struct Read {
        var count: Int
        var at: Duration
    }

    private struct State {
        var bytes: [UInt8] = []
        var reads: [Read] = []
        var readEnded = false
        var closed = false
        var error: TransportError?
    }

    private let state = Mutex(State())
    let network: SimulatedNetwork

    init(network: SimulatedNetwork) {
        self.network = network
    }

    var bytes: [UInt8] { state.withLock { $0.bytes } }
    var reads: [Read] { state.withLock { $0.reads } }
    var readEnded: Bool { state.withLock { $0.readEnded } }
    var closed: Bool { state.withLock { $0.closed } }
    var error: TransportError? { state.withLock { $0.error } }

    func connectionDidRead(_ bytes: UnsafeRawBufferPointer) {
        let now = network.now
        state.withLock {
            $0.bytes += bytes
            $0.reads.append(Read(count: bytes.count, at: now))
        }
    }

    func connectionDidReadEnd() { state.withLock { $0.readEnded = true } }
    func connectionDidDrainWrites() {}

    func connectionDidClose(error: TransportError?) {
        state.withLock {
            $0.closed = true
            $0.error = error
        }
    }
}

/// Counts write completions (and their errors).
final class Completions: Sendable {
    private let state = Mutex((succeeded: 0, failed: 0))
    var succeeded: Int { state.withLock { $0.succeeded } }
    var failed: Int { state.withLock { $0.failed } }

    func record(_ error: TransportError?) {
        state.withLock { if error == nil { $0.succeeded += 1 } else { $0.failed += 1 } }
    }
}

/// A server transport on `serverHost` listening on port 80, a client transport on
/// `clientHost`, and one connection between them, both ends recorded and reading.
struct SimulatedPair {
    let network: SimulatedNetwork
    let client: SimulationTransport
    let server: SimulationTransport
    let listener: any Listener
    let connection: any Connection
    let accepted: any Connection
    let clientRecorder: Recorder
    let serverRecorder: Recorder

    static let clientHost = "10.0.0.1"
    static let serverHost = "10.0.0.2"

    static func make(
        network: SimulatedNetwork, clientHost: String = clientHost, port: Int = 80,
        configuration: TransportConfiguration = TransportConfiguration()
    ) async throws -> SimulatedPair {
        let server = try SimulationTransport(network: network, host: serverHost, configuration: configuration)
        let client = try SimulationTransport(network: network, host: clientHost, configuration: configuration)
        let listener = try await server.listen(on: Endpoint(host: serverHost, port: port))
        let connection = try await client.connect(to: Endpoint(host: serverHost, port: port))
        var iterator = listener.connections.makeAsyncIterator()
        guard let accepted = await iterator.next() else { throw TransportError(code: .unavailable, reason: .refused, message: "no connection accepted") }
        let clientRecorder = Recorder(network: network)
        let serverRecorder = Recorder(network: network)
        connection.setHandler(clientRecorder)
        connection.startReading()
        accepted.setHandler(serverRecorder)
        accepted.startReading()
        return SimulatedPair(
            network: network, client: client, server: server, listener: listener, connection: connection,
            accepted: accepted, clientRecorder: clientRecorder, serverRecorder: serverRecorder)
    }

    func shutDown() async {
        listener.close()
        await client.shutdownNow()
        await server.shutdownNow()
    }
}

/// `count` bytes of a repeating pattern.
func pattern(count: Int, seed: UInt8 = 0) -> [UInt8] {
    (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31) &+ seed }
}
