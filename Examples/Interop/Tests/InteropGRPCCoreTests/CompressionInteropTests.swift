import Foundation
import GRPCCore
import GRPCNIOTransportHTTP2Posix
import InteropGRPCCore
import InteropMessages
import InteropServices
import InteropTesting
import Switchyard
import SwitchyardGRPC
import Synchronization
import Testing

/// gzip both ways against grpc-swift-nio-transport, the reference GRPCCore transport: its
/// client and server with compression on, SwitchyardGRPC on the other side over a
/// Switchyard transport that counts the bytes its connections write and read, so the
/// tests see that what crossed the wire was compressed.
@Suite("gzip against grpc-swift-nio-transport", .serialized, .timeLimit(.minutes(2)))
struct CompressionInteropTests {
    /// 64 KiB of zeros each way (`payload` and `response_size`): gzip makes them a few
    /// hundred bytes.
    static var request: Grpc_Testing_SimpleRequest {
        var request = Grpc_Testing_SimpleRequest()
        request.responseSize = 64 * 1024
        request.payload.body = Data(repeating: 0, count: 64 * 1024)
        return request
    }

    @Test("NIO's client with gzip to SwitchyardGRPC's server with gzip: both directions compressed", arguments: ["bsd", "libuv"])
    func nioClientToSwitchyardServer(backend: String) async throws {
        let counting = CountingTransport(try await InteropTransport.make(backend: backend))
        let serverTransport = SwitchyardServerTransport.switchyard(
            address: Switchyard.Endpoint(host: "127.0.0.1", port: 0), transport: counting,
            config: .defaults { $0.compression = .init(enabledAlgorithms: .gzip) })
        let server = GRPCServer(transport: serverTransport, services: [GRPCCoreTestService()])
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await server.serve() }
            let port = try await serverTransport.listeningAddress.port
            let client = try HTTP2ClientTransport.Posix(
                target: .ipv4(host: "127.0.0.1", port: port), transportSecurity: .plaintext,
                config: .defaults { $0.compression = .init(algorithm: .gzip, enabledAlgorithms: .gzip) })
            try await withGRPCClient(transport: client) { client in
                let response = try await Grpc_Testing_TestService.Client(wrapping: client).unaryCall(Self.request)
                #expect(response.payload.body.count == 64 * 1024)
            }
            server.beginGracefulShutdown()
            try await group.waitForAll()
        }
        await counting.shutdown(gracePeriod: .seconds(2))
        let read = counting.read.load(ordering: .acquiring)
        let written = counting.written.load(ordering: .acquiring)
        #expect(read < 8 * 1024, "the server read \(read) bytes for a 64 KiB request")
        #expect(written < 8 * 1024, "the server wrote \(written) bytes for a 64 KiB response")
    }

    @Test("SwitchyardGRPC's client with gzip to NIO's server with gzip: both directions compressed", arguments: ["bsd", "libuv"])
    func switchyardClientToNIOServer(backend: String) async throws {
        let serverTransport = HTTP2ServerTransport.Posix(
            address: .ipv4(host: "127.0.0.1", port: 0), transportSecurity: .plaintext,
            config: .defaults { $0.compression = .init(enabledAlgorithms: .gzip) })
        let server = GRPCServer(transport: serverTransport, services: [GRPCCoreTestService()])
        let counting = CountingTransport(try await InteropTransport.make(backend: backend))
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await server.serve() }
            let port = try await serverTransport.listeningAddress.ipv4?.port ?? 0
            let client = SwitchyardClientTransport.switchyard(
                target: Switchyard.Endpoint(host: "127.0.0.1", port: port), transport: counting,
                config: .defaults { $0.compression = .init(algorithm: .gzip, enabledAlgorithms: .gzip) })
            try await withGRPCClient(transport: client) { client in
                let response = try await Grpc_Testing_TestService.Client(wrapping: client).unaryCall(Self.request)
                #expect(response.payload.body.count == 64 * 1024)
            }
            server.beginGracefulShutdown()
            try await group.waitForAll()
        }
        await counting.shutdown(gracePeriod: .seconds(2))
        let read = counting.read.load(ordering: .acquiring)
        let written = counting.written.load(ordering: .acquiring)
        #expect(written < 8 * 1024, "the client wrote \(written) bytes for a 64 KiB request")
        #expect(read < 8 * 1024, "the client read \(read) bytes for a 64 KiB response")
    }
}

/// A transport whose connections (made or accepted) count the bytes they write and read.
final class CountingTransport: Transport {
    let base: any Transport
    let written = Atomic<Int>(0)
    let read = Atomic<Int>(0)

    init(_ base: any Transport) { self.base = base }

    var name: String { base.name }

    func connect(to endpoint: Switchyard.Endpoint, options: ConnectOptions) async throws -> any Connection {
        CountingConnection(try await base.connect(to: endpoint, options: options), self)
    }

    func listen(on endpoint: Switchyard.Endpoint, options: ListenOptions) async throws -> any Listener {
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
    var localAddress: Switchyard.Endpoint { base.localAddress }
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
    var localAddress: Switchyard.Endpoint { base.localAddress }
    var remoteAddress: Switchyard.Endpoint { base.remoteAddress }
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
