import Switchyard
@testable import SwitchyardTLS
import Testing

/// What a TLS connection keeps between its writes: an idle connection holds no buffer
/// of its handshake's size.
@Suite("TLS connection buffers", .serialized, .timeLimit(.minutes(1)))
struct TLSBufferTests {
    /// The room `connection`'s output buffer holds, read on its loop.
    func outputBufferCapacity(_ connection: TLSConnection) async -> Int {
        await withCheckedContinuation { continuation in
            connection.eventLoop.execute { continuation.resume(returning: connection.stream.outputBufferCapacity) }
        }
    }

    @Test("The handshake's output buffer is freed when the handshake ends; a write makes one of its own size", arguments: Backend.allCases)
    func outputBufferReleasedAfterHandshake(backend: Backend) async throws {
        try await withTLS(backend) { tls in
            let listener = try await tls.listen(on: loopback)
            let client = try #require(try await tls.connect(to: Endpoint(host: "localhost", port: listener.localAddress.port)) as? TLSConnection)
            var accepted = listener.connections.makeAsyncIterator()
            let server = try #require(await accepted.next() as? TLSConnection)
            // The server's flight (its certificate chain) went out through that buffer.
            #expect(await outputBufferCapacity(server) == 0)
            #expect(await outputBufferCapacity(client) == 0)
            server.setHandler(EchoHandler(server))
            server.startReading()
            let echo = AsyncConnection(client)
            let message = testBytes(64, seed: 3)
            try await echo.write(message)
            #expect(try await echo.read(exactly: message.count) == message)
            // One record of 64 bytes: a buffer of its size, not of the flight's.
            let capacity = await outputBufferCapacity(server)
            #expect(capacity > 0 && capacity <= 256, "\(capacity)")
            echo.close()
            server.close()
            listener.close()
        }
    }
}
