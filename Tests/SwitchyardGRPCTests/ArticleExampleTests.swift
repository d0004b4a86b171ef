import GRPCCore
import Switchyard
import SwitchyardBSD
import SwitchyardBackends
import SwitchyardGRPC
import Testing

/// The Swift blocks of SwitchyardGRPC's article (SwitchyardGRPC.docc), compiled and run:
/// the code between each pair of doc-block markers is a block (DocumentationBlockTests
/// holds them to each other), with what it promises checked after it.
@Suite("SwitchyardGRPC's article's examples", .serialized, .timeLimit(.minutes(1)))
struct ArticleExampleTests {
    @Test("A server and a client on a backend")
    func serverAndClient() async throws {
        // doc-block begin
        let transport = try Backends.makeTransport(named: "bsd")
        let serverTransport = SwitchyardServerTransport(
            address: Endpoint(host: "127.0.0.1", port: 0), transport: transport)
        let reply = try await withGRPCServer(transport: serverTransport, services: [EchoService()]) { server in
            let port = try await serverTransport.listeningAddress.port
            return try await withGRPCClient(
                transport: .switchyard(target: Endpoint(host: "127.0.0.1", port: port), transport: transport)
            ) { client in
                // What a generated stub does: a unary RPC with a [UInt8] coder.
                try await client.unary(
                    request: ClientRequest(message: Array("hello".utf8)),
                    descriptor: MethodDescriptor(fullyQualifiedService: "echo.Echo", method: "Get"),
                    serializer: BytesCoder(), deserializer: BytesCoder(), options: .defaults
                ) { try $0.message }
            }
        }
        // doc-block end
        #expect(reply == Array("hello".utf8))
        // The server stopped with the block: its address is gone.
        await #expect(throws: RuntimeError.self) { try await serverTransport.listeningAddress }
        await transport.shutdownNow()
    }

    @Test("A retry policy for unavailable, in the client's config")
    func retryConfig() async throws {
        // doc-block begin
        let policy = RetryPolicy(
            maxAttempts: 3, initialBackoff: .milliseconds(100), maxBackoff: .seconds(1),
            backoffMultiplier: 2, retryableStatusCodes: [.unavailable])
        let config = SwitchyardClientTransport.Config.defaults {
            $0.serviceConfig = ServiceConfig(methodConfig: [
                MethodConfig(names: [MethodConfig.Name(service: "echo.Echo")], executionPolicy: .retry(policy))
            ])
        }
        // doc-block end
        let memory = try Backends.makeTransport(named: "memory")
        let transport = SwitchyardClientTransport(target: Endpoint(host: "127.0.0.1", port: 1), transport: memory, config: config)
        // The service's config applies to each of its methods.
        #expect(transport.config(forMethod: EchoService.flaky)?.executionPolicy?.retry == policy)
        #expect(transport.config(forMethod: MethodDescriptor(fullyQualifiedService: "other.Service", method: "Get")) == nil)
        await memory.shutdownNow()
    }

    @Test("A transport made with a stall timeout, for a client transport")
    func stallTimeoutTransport() async throws {
        // doc-block begin
        let transport = try Backends.makeTransport(
            named: "bsd", configuration: TransportConfiguration(stallTimeout: .seconds(5)))
        // doc-block end
        let bsd = try #require(transport as? BSDTransport)
        #expect(bsd.stallTimeout == .seconds(5))
        await transport.shutdownNow()
    }
}
