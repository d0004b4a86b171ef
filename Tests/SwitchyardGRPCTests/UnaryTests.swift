import GRPCCore
import Switchyard
import SwitchyardGRPC
import Testing

@Suite("GRPCCore's client and server over SwitchyardGRPC", .serialized, .timeLimit(.minutes(2)))
struct UnaryTests {
    @Test("A unary RPC gets its reply", arguments: Backend.allCases)
    func unary(backend: Backend) async throws {
        try await withEcho(server: try backend.transport(), client: try backend.transport()) { client, probe, _ in
            let response = try await client.get(Array("hello".utf8))
            #expect(try response.message == Array("hello".utf8))
            #expect(probe.started == 1)
        }
    }
}
