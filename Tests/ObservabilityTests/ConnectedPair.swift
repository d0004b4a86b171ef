import Switchyard
import Synchronization

/// A connection made to a listener and its accepted end, each with a ``Recorder``, both
/// reading once made; the tests' common start.
struct ConnectedPair {
    let client: any Connection
    let clientSide: Recorder
    let server: any Connection
    let serverSide: Recorder

    /// Connects `transport` to the listener of `accepted` and waits for the accepted end.
    /// With `echo` the server's end echoes what it reads and closes at the end of stream;
    /// without, it only records (and does not read).
    static func connect(_ transport: any Transport, to accepted: Accepted, echo: Bool) async throws -> ConnectedPair {
        let client = try await transport.connect(to: accepted.listener.localAddress)
        let clientSide = Recorder()
        client.setHandler(clientSide)
        client.startReading()
        let server = try await accepted.next()
        let serverSide = Recorder(echoingOn: echo ? server : nil)
        server.setHandler(serverSide)
        if echo { server.startReading() }
        return ConnectedPair(client: client, clientSide: clientSide, server: server, serverSide: serverSide)
    }
}

/// The connections a listener accepts, for the test that waits for one.
final class Accepted: Sendable {
    let listener: any Listener
    private let queue = Mutex<[any Connection]>([])

    /// Takes over `listener`'s accepted connections.
    init(_ listener: any Listener) {
        self.listener = listener
        listener.acceptConnections { [weak self] in self?.push($0) }
    }

    private func push(_ connection: any Connection) {
        queue.withLock { $0.append(connection) }
    }

    func next() async throws -> any Connection {
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline {
            if let connection = queue.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) { return connection }
            try await Task.sleep(for: .milliseconds(5))
        }
        throw ObservabilityTestFailure("no connection was accepted within 10 s")
    }
}

/// Counts what its connection read, optionally echoes it (and closes at end of stream),
/// and remembers how the connection ended.
final class Recorder: ConnectionHandler {
    private let state = Mutex<(received: Int, end: TransportError??)>((0, nil))
    private let echo: (any Connection)?

    init(echoingOn connection: (any Connection)? = nil) {
        self.echo = connection
    }

    func connectionDidRead(_ bytes: UnsafeRawBufferPointer) {
        state.withLock { $0.received += bytes.count }
        echo?.write(borrowing: bytes, completion: nil)
    }

    func connectionDidReadEnd() {
        echo?.close()
    }

    func connectionDidClose(error: TransportError?) {
        state.withLock { $0.end = .some(error) }
    }

    func received(_ count: Int) async throws {
        let deadline = ContinuousClock.now + .seconds(10)
        while state.withLock({ $0.received }) < count {
            guard ContinuousClock.now < deadline else { throw ObservabilityTestFailure("received \(state.withLock { $0.received }) of \(count) bytes") }
            try await Task.sleep(for: .milliseconds(5))
        }
    }

    func end() async throws -> TransportError? {
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline {
            if let end = state.withLock({ $0.end }) { return end }
            try await Task.sleep(for: .milliseconds(5))
        }
        throw ObservabilityTestFailure("the connection did not end within 10 s")
    }
}

struct ObservabilityTestFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
