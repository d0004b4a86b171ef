import Switchyard
import SwitchyardTLS
import Testing

@Suite("TLS over a TLS connection", .serialized, .timeLimit(.minutes(1)))
struct TLSNestingTests {
    /// The outer connection hands the inner one its decrypted bytes borrowed, from the
    /// loop thread's decryption buffer, and the inner one decrypts from them in place
    /// while it decrypts into a buffer of its own: both layers' records must come out
    /// intact, in both directions, records of every size (the writes are not aligned to
    /// records, several records arrive in one read).
    @Test("1 MiB echoed through TLS inside TLS arrives intact", arguments: Backend.allCases)
    func tunnel(backend: Backend) async throws {
        try await withTLS(backend) { tls in
            let innerServer = try TLSContext(configuration: TestCertificates.server())
            let innerClient = try TLSContext(configuration: TestCertificates.client())
            let listener = try await tls.listen(on: loopback)
            listener.acceptConnections { outer in
                Task {
                    guard let inner = try? await TLSConnection.server(wrapping: outer, context: innerServer) else { return }
                    inner.setHandler(EchoHandler(inner))
                    inner.startReading()
                }
            }
            let outer = try await tls.connect(to: Endpoint(host: "localhost", port: listener.localAddress.port))
            let inner = try await TLSConnection.client(wrapping: outer, context: innerClient, serverName: "localhost")
            #expect(inner.backendName == "\(backend)+tls+tls")

            let bytes = testBytes(1 << 20, seed: 7)
            let client = AsyncConnection(inner)
            let writer = Task {
                var start = 0
                var size = 1
                while start < bytes.count {
                    let end = min(start + size, bytes.count)
                    try await client.write(Array(bytes[start..<end]))
                    start = end
                    size = size * 3 % 70_001 + 1
                }
                try await client.shutdownOutput()
            }
            let echoed = try await client.readToEnd()
            try await writer.value
            #expect(echoed.count == bytes.count)
            #expect(echoed == bytes)
            client.close()
            listener.close()
        }
    }
}
