import GRPCCore
import Switchyard
import SwitchyardGRPC
import Synchronization
import Testing

/// The client transport following a `ManualConnectivityMonitor`: a change of category
/// (Wi-Fi to cellular) closes the channel's connection under the RPCs.
@Suite("A connectivity change under GRPCCore's RPCs", .serialized, .timeLimit(.minutes(2)))
struct ConnectivityTests {
    static let wifi = ConnectivityPath(category: .wifi, interface: "wlan0", addresses: ["127.0.0.1"])
    static let cellular = ConnectivityPath(category: .cellular, interface: "wwan0", addresses: ["127.0.0.1"])

    @Test("A category change ends an open server-streaming RPC unavailable, saying so; the next RPC succeeds", arguments: Backend.allCases)
    func categoryChange(backend: Backend) async throws {
        let monitor = ManualConnectivityMonitor(initial: Self.wifi)
        try await withEcho(server: try backend.transport(), client: try backend.transport(), monitor: monitor) { client, probe, _ in
            let received = ReceivedCount()
            let open = Task {
                try await client.serverStreaming(
                    request: ClientRequest(message: [1], metadata: ["count": "1", "hold": ""]), descriptor: EchoService.expand,
                    serializer: BytesCoder(), deserializer: BytesCoder(), options: .defaults
                ) { response in
                    for try await _ in response.messages { received.add() }
                }
            }
            #expect(await probe.wait { _ in received.count == 1 })
            monitor.report(Self.cellular)
            let result = await open.result
            guard case .failure(let error as RPCError) = result else {
                Issue.record("the RPC did not end with an RPCError: \(result)")
                return
            }
            #expect(error.code == .unavailable, "\(error)")
            #expect(error.message.hasPrefix("connectivity changed: "), "\(error)")
            #expect(await probe.wait { $0.cancelled == 1 }, "the server's handler did not learn that its RPC ended")

            let next = try await client.get([3]).message
            #expect(next == [3])
        }
    }

    @Test("A retry policy for unavailable makes a unary RPC that the change ended succeed", arguments: Backend.allCases)
    func retryAfterChange(backend: Backend) async throws {
        let monitor = ManualConnectivityMonitor(initial: Self.wifi)
        let retry = RetryPolicy(
            maxAttempts: 3, initialBackoff: .milliseconds(10), maxBackoff: .milliseconds(50), backoffMultiplier: 2,
            retryableStatusCodes: [.unavailable])
        let config = SwitchyardClientTransport.Config.defaults {
            $0.serviceConfig = ServiceConfig(methodConfig: [
                MethodConfig(names: [MethodConfig.Name(service: EchoService.service, method: "Flaky")], executionPolicy: .retry(retry))
            ])
        }
        try await withEcho(server: try backend.transport(), client: try backend.transport(), monitor: monitor, clientConfig: config) {
            client, probe, _ in
            let flaky = Task {
                try await client.unary(
                    request: ClientRequest(message: [1]), descriptor: EchoService.flaky, serializer: BytesCoder(),
                    deserializer: BytesCoder(), options: .defaults
                ) { try $0.message }
            }
            #expect(await probe.wait { $0.started == 1 })
            monitor.report(Self.cellular)
            let reply = try await flaky.value
            #expect(String(decoding: reply, as: UTF8.self) == "attempt 2")
            #expect(probe.started == 2)
        }
    }

    @Test("Without a retry policy the same RPC fails unavailable", arguments: [Backend.bsd])
    func noRetry(backend: Backend) async throws {
        let monitor = ManualConnectivityMonitor(initial: Self.wifi)
        try await withEcho(server: try backend.transport(), client: try backend.transport(), monitor: monitor) { client, probe, _ in
            let flaky = Task {
                try await client.unary(
                    request: ClientRequest(message: [1]), descriptor: EchoService.flaky, serializer: BytesCoder(),
                    deserializer: BytesCoder(), options: .defaults
                ) { try $0.message }
            }
            #expect(await probe.wait { $0.started == 1 })
            monitor.report(Self.cellular)
            let result = await flaky.result
            guard case .failure(let error as RPCError) = result else {
                Issue.record("the RPC did not end with an RPCError: \(result)")
                return
            }
            #expect(error.code == .unavailable, "\(error)")
            #expect(probe.started == 1)
        }
    }
}

/// Messages a response handler counted.
final class ReceivedCount: Sendable {
    private let value = Atomic<Int>(0)
    var count: Int { value.load(ordering: .relaxed) }
    func add() { value.add(1, ordering: .relaxed) }
}
