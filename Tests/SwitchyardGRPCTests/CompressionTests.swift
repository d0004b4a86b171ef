import GRPCCore
import Synchronization
import Switchyard
import SwitchyardGRPC
import Testing

@Suite("Compression over SwitchyardGRPC", .serialized, .timeLimit(.minutes(2)))
struct CompressionTests {
    /// 64 KiB that gzip shrinks to well under 1 KiB (a 256-byte period).
    static let message = bytes(64 * 1024, seed: 7)

    static func gzipClient(algorithm: CompressionAlgorithm = .gzip) -> SwitchyardClientTransport.Config {
        .defaults { $0.compression = .init(algorithm: algorithm, enabledAlgorithms: .gzip) }
    }

    static let gzipServer = SwitchyardServerTransport.Config.defaults { $0.compression = .init(enabledAlgorithms: .gzip) }

    /// One `Get` of ``message`` with `options` over a client whose connection counts its
    /// bytes: what the client wrote and read, the echo checked.
    static func echo(
        backend: Backend, client: SwitchyardClientTransport.Config, server: SwitchyardServerTransport.Config, options: CallOptions = .defaults
    ) async throws -> (written: Int, read: Int) {
        let counting = CountingTransport(try backend.transport())
        try await withEcho(server: try backend.transport(), client: counting, clientConfig: client, serverConfig: server) { client, _, _ in
            let reply = try await client.get(Self.message, options: options)
            #expect(try reply.message == Self.message)
        }
        return (counting.written.load(ordering: .acquiring), counting.read.load(ordering: .acquiring))
    }

    @Test("gzip both ways: the request and the reply cross the client's connection compressed", arguments: Backend.allCases)
    func gzipBothWays(backend: Backend) async throws {
        let (written, read) = try await Self.echo(backend: backend, client: Self.gzipClient(), server: Self.gzipServer)
        #expect(written < 8 * 1024, "the client wrote \(written) bytes for a 64 KiB request")
        #expect(read < 8 * 1024, "the client read \(read) bytes for a 64 KiB reply")
    }

    @Test("Off by default: the same RPC crosses uncompressed", arguments: Backend.allCases)
    func offByDefault(backend: Backend) async throws {
        let (written, read) = try await Self.echo(backend: backend, client: .defaults, server: .defaults)
        #expect(written > 64 * 1024, "the client wrote \(written) bytes")
        #expect(read > 64 * 1024, "the client read \(read) bytes")
    }

    @Test("CallOptions.compression overrides the config's algorithm, both ways", arguments: [Backend.bsd])
    func callOptionsOverride(backend: Backend) async throws {
        var gzip = CallOptions.defaults
        gzip.compression = .gzip
        let on = try await Self.echo(backend: backend, client: Self.gzipClient(algorithm: .none), server: .defaults, options: gzip)
        #expect(on.written < 8 * 1024, "with CallOptions.compression gzip the client wrote \(on.written) bytes")
        #expect(on.read > 64 * 1024, "a server without compression answered with \(on.read) bytes")
        var none = CallOptions.defaults
        none.compression = CompressionAlgorithm.none
        let off = try await Self.echo(backend: backend, client: Self.gzipClient(), server: Self.gzipServer, options: none)
        #expect(off.written > 64 * 1024, "with CallOptions.compression none the client wrote \(off.written) bytes")
        #expect(off.read < 8 * 1024, "the server still compressed for a client that accepts gzip: \(off.read) bytes")
    }

    @Test("A server with gzip enabled answers a client that did not enable it uncompressed", arguments: [Backend.bsd])
    func notAccepted(backend: Backend) async throws {
        let (written, read) = try await Self.echo(backend: backend, client: .defaults, server: Self.gzipServer)
        #expect(written > 64 * 1024, "the client wrote \(written) bytes")
        #expect(read > 64 * 1024, "the client read \(read) bytes: the server compressed for a client that did not list gzip")
    }
}

/// A transport whose connections count the bytes they write and read.
final class CountingTransport: Transport {
    let base: any Transport
    let written = Atomic<Int>(0)
    let read = Atomic<Int>(0)

    init(_ base: any Transport) { self.base = base }

    var name: String { base.name }

    func connect(to endpoint: Endpoint, options: ConnectOptions) async throws -> any Connection {
        CountingConnection(try await base.connect(to: endpoint, options: options), self)
    }

    func listen(on endpoint: Endpoint, options: ListenOptions) async throws -> any Listener {
        CountingListener(try await base.listen(on: endpoint, options: options), self)
    }

    func shutdown(gracePeriod: Duration) async { await base.shutdown(gracePeriod: gracePeriod) }
    func shutdownNow() async { await base.shutdownNow() }
}

/// A listener whose accepted connections count into their ``CountingTransport``.
final class CountingListener: Listener {
    let base: any Listener
    let counts: CountingTransport

    init(_ base: any Listener, _ counts: CountingTransport) {
        self.base = base
        self.counts = counts
    }

    var backendName: String { base.backendName }
    var localAddress: Endpoint { base.localAddress }
    var connections: AcceptedConnections { base.connections }
    func close() { base.close() }
    func acceptConnections(_ handler: @escaping @Sendable (any Connection) -> Void) {
        let counts = counts
        base.acceptConnections { handler(CountingConnection($0, counts)) }
    }
}

/// A connection that counts what crosses it into its ``CountingTransport``.
final class CountingConnection: Connection {
    let base: any Connection
    let counts: CountingTransport

    init(_ base: any Connection, _ counts: CountingTransport) {
        self.base = base
        self.counts = counts
    }

    var backendName: String { base.backendName }
    var eventLoop: any TransportEventLoop { base.eventLoop }
    var localAddress: Endpoint { base.localAddress }
    var remoteAddress: Endpoint { base.remoteAddress }
    var pendingWriteBytes: Int { base.pendingWriteBytes }
    func setHandler(_ handler: any ConnectionHandler) { base.setHandler(CountingHandler(handler, counts)) }
    func startReading() { base.startReading() }
    func stopReading() { base.stopReading() }
    func write(_ bytes: [UInt8], completion: WriteCompletion?) {
        counts.written.add(bytes.count, ordering: .relaxed)
        base.write(bytes, completion: completion)
    }
    func write(borrowing bytes: UnsafeRawBufferPointer, completion: WriteCompletion?) {
        counts.written.add(bytes.count, ordering: .relaxed)
        base.write(borrowing: bytes, completion: completion)
    }
    func shutdownOutput(completion: WriteCompletion?) { base.shutdownOutput(completion: completion) }
    func close() { base.close() }
    func reset() { base.reset() }
}

/// Counts what a connection reads, then hands it on.
final class CountingHandler: ConnectionHandler {
    let inner: any ConnectionHandler
    let counts: CountingTransport

    init(_ inner: any ConnectionHandler, _ counts: CountingTransport) {
        self.inner = inner
        self.counts = counts
    }

    func connectionDidRead(_ bytes: UnsafeRawBufferPointer) {
        counts.read.add(bytes.count, ordering: .relaxed)
        inner.connectionDidRead(bytes)
    }
    func connectionDidReadEnd() { inner.connectionDidReadEnd() }
    func connectionDidDrainWrites() { inner.connectionDidDrainWrites() }
    func connectionDidClose(error: TransportError?) { inner.connectionDidClose(error: error) }
}
