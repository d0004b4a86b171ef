import Switchyard
import SwitchyardBSD
import SwitchyardTLS
import SwitchyardUV
import Testing

/// Calls run unchanged on TLS connections: a CallChannel and a CallServer over TLSTransports,
/// mixed backends included (each side wraps its own backend).
@Suite("Calls over TLS", .serialized, .timeLimit(.minutes(1)))
struct TLSCallTests {
    @Test("Framed messages echo over TLS between two backends, and the call ends ok",
          arguments: [(Backend.libuv, Backend.bsd), (.bsd, .libuv), (.memory, .memory)])
    func echoCall(client clientBackend: Backend, server serverBackend: Backend) async throws {
        let serverBase = try serverBackend.transport()
        let clientBase = try clientBackend.transport()
        let serverTLS = try TLSTransport(wrapping: serverBase, server: TestCertificates.server())
        let clientTLS = try TLSTransport(wrapping: clientBase, client: TestCertificates.client())
        let server = try await CallServer.start(transport: serverTLS, on: loopback) { call in
            for try await message in call.messages { try await call.write(message) }
            return .ok
        }
        let channel = CallChannel(target: Endpoint(host: "localhost", port: server.localAddress.port), transport: clientTLS)
        let messages = (0..<20).map { testBytes(1 + $0 * 5_000, seed: UInt64($0)) }
        let (echoed, status) = try await channel.withCall { call in
            var echoed: [[UInt8]] = []
            for message in messages {
                try await call.write(message)
                echoed.append(try #require(try await call.next()))
            }
            try await call.finishSending()
            return (echoed, await call.status())
        }
        #expect(echoed == messages)
        #expect(status == .ok)
        channel.close()
        server.close()
        await clientTLS.shutdownNow()
        await serverTLS.shutdownNow()
    }

    @Test("TransportBackend.tls: backends named +tls, on a network of their own, whose transports speak TLS to each other")
    func backends() async throws {
        let bsd = try TransportBackend.tls(wrapping: BSDTransport.backend, client: TestCertificates.client(), server: TestCertificates.server())
        let uv = try TransportBackend.tls(wrapping: UVTransport.backend, client: TestCertificates.client(), server: TestCertificates.server())
        #expect(bsd.name == "bsd+tls")
        #expect(bsd.network == "tcp+tls")
        #expect(bsd.network == uv.network)
        let client = try bsd.make(.init(eventLoopCount: 1))
        let server = try uv.make(.init(eventLoopCount: 1))
        let listener = try await server.listen(on: uv.localEndpoint())
        serveEcho(listener)
        let connection = try await client.connect(to: Endpoint(host: "127.0.0.1", port: listener.localAddress.port))
        #expect(connection is TLSConnection)
        let async = AsyncConnection(connection)
        try await async.write(Array("over tls".utf8))
        #expect(try await async.read(exactly: 8) == Array("over tls".utf8))
        async.close()
        listener.close()
        await client.shutdownNow()
        await server.shutdownNow()

        #expect(throws: TransportError.self) {
            _ = try TransportBackend.tls(wrapping: BSDTransport.backend, client: TestCertificates.server(), server: nil)
        }
    }
}
