import GRPCCore
import Switchyard
import SwitchyardGRPC
import SwitchyardTLS
import Testing

@Suite("GRPCCore's RPCs over a TLSTransport", .serialized, .timeLimit(.minutes(2)))
struct TLSTests {
    @Test("Unary and bidirectional RPCs over TLS with the test certificates", arguments: [Backend.bsd, Backend.libuv])
    func overTLS(backend: Backend) async throws {
        let server = try TLSTransport(wrapping: try backend.transport(), server: TestCertificates.server())
        let client = try TLSTransport(wrapping: try backend.transport(), client: TestCertificates.client())
        try await withEcho(server: server, client: client) { client, probe, _ in
            let reply = try await client.get(Array("secret".utf8)).message
            #expect(reply == Array("secret".utf8))
            let echoed = try await client.bidirectionalStreaming(
                request: StreamingClientRequest(of: [UInt8].self) { writer in
                    for index in 0..<5 { try await writer.write(bytes(100_000, seed: UInt8(index))) }
                },
                descriptor: EchoService.update, serializer: BytesCoder(), deserializer: BytesCoder(), options: .defaults
            ) { response in
                var messages: [[UInt8]] = []
                for try await message in response.messages { messages.append(message) }
                return messages
            }
            #expect(echoed == (0..<5).map { bytes(100_000, seed: UInt8($0)) })
            #expect(probe.started == 2)
        }
    }

    @Test("A client that does not trust the server's certificate fails unavailable, saying why", arguments: [Backend.bsd])
    func untrusted(backend: Backend) async throws {
        let server = try TLSTransport(wrapping: try backend.transport(), server: TestCertificates.server())
        let client = try TLSTransport(
            wrapping: try backend.transport(), client: .client(trustRoots: .pemFile(TestCertificates.path("other-ca.pem"))))
        try await withEcho(server: server, client: client) { client, _, _ in
            let error = await #expect(throws: RPCError.self) { try await client.get([1]).message }
            #expect(error?.code == .unavailable, "\(String(describing: error))")
            #expect(error?.message.hasPrefix("certificate: ") == true, "\(String(describing: error))")
        }
    }
}
