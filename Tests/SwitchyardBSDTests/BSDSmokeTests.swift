import Switchyard
import SwitchyardBSD
import Testing

@Suite("BSD backend basics", .serialized)
struct BSDSmokeTests {
    @Test("A connection echoes through the async face and shuts down clean")
    func echo() async throws {
        let transport = try BSDTransport(configuration: TransportConfiguration(eventLoopCount: 2))
        let listener = try await transport.listen(on: Endpoint(host: "127.0.0.1", port: 0))
        #expect(listener.localAddress.port > 0)
        let server = Task {
            for await connection in listener.connections {
                let async = AsyncConnection(connection)
                while let chunk = try await async.read() { try await async.write(chunk) }
                try await async.shutdownOutput()
                async.close()
                return
            }
        }
        let client = AsyncConnection(try await transport.connect(to: listener.localAddress))
        let payload = (0..<200_000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
        try await client.write(payload)
        try await client.shutdownOutput()
        let echoed = try await client.readToEnd()
        #expect(echoed == payload)
        client.close()
        try await server.value
        await transport.shutdownNow()
    }

    @Test("A path endpoint is refused in connect and listen with invalidArgument (invalid address)")
    func pathEndpointIsRefused() async throws {
        let transport = try BSDTransport(configuration: TransportConfiguration(eventLoopCount: 1))
        let path = Endpoint(unixPath: "/tmp/switchyard-bsd.sock")
        for operation in ["connect", "listen"] {
            await #expect {
                if operation == "connect" { _ = try await transport.connect(to: path) } else { _ = try await transport.listen(on: path) }
            } throws: { error in
                guard let error = error as? TransportError else { return false }
                return error.code == .invalidArgument && error.reason == .invalidAddress && error.message.contains("unix:/tmp/switchyard-bsd.sock")
            }
        }
        await transport.shutdownNow()
    }
}
