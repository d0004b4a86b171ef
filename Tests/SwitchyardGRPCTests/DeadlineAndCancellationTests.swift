import GRPCCore
import Switchyard
import SwitchyardGRPC
import Testing

@Suite("Deadlines, cancellation and graceful shutdown over SwitchyardGRPC", .serialized, .timeLimit(.minutes(2)))
struct DeadlineAndCancellationTests {
    @Test("An RPC past its CallOptions.timeout ends deadlineExceeded, and the server's handler is cancelled", arguments: Backend.allCases)
    func deadline(backend: Backend) async throws {
        try await withEcho(server: try backend.transport(), client: try backend.transport()) { client, probe, _ in
            var options = CallOptions.defaults
            options.timeout = .milliseconds(200)
            let started = ContinuousClock.now
            let error = await #expect(throws: RPCError.self) {
                try await client.unary(
                    request: ClientRequest(message: [1]), descriptor: EchoService.wait, serializer: BytesCoder(),
                    deserializer: BytesCoder(), options: options
                ) { try $0.message }
            }
            let elapsed = ContinuousClock.now - started
            #expect(error?.code == .deadlineExceeded, "\(String(describing: error))")
            #expect(elapsed < .seconds(2), "the RPC ended \(elapsed) after it started")
            #expect(await probe.wait { $0.cancelled == 1 }, "the server's handler did not see the cancellation")
        }
    }

    @Test("Cancelling the caller's task cancels the RPC, and the server's handler sees it", arguments: Backend.allCases)
    func cancellation(backend: Backend) async throws {
        try await withEcho(server: try backend.transport(), client: try backend.transport()) { client, probe, _ in
            let task = Task {
                try await client.unary(
                    request: ClientRequest(message: [1]), descriptor: EchoService.wait, serializer: BytesCoder(),
                    deserializer: BytesCoder(), options: .defaults
                ) { try $0.message }
            }
            #expect(await probe.wait { $0.started == 1 })
            task.cancel()
            let result = await task.result
            #expect(throws: (any Error).self) { try result.get() }
            if case .failure(let error as RPCError) = result { #expect(error.code == .cancelled, "\(error)") }
            #expect(await probe.wait { $0.cancelled == 1 }, "the server's handler did not see the cancellation")
            // The connection goes on.
            let after = try await client.get([2]).message
            #expect(after == [2])
        }
    }

    @Test("The server's graceful shutdown lets the RPC in flight finish and refuses new ones", arguments: Backend.allCases)
    func gracefulShutdown(backend: Backend) async throws {
        let serverTransport = try backend.transport()
        let clientTransport = try backend.transport()
        let probe = Probe()
        let transport = SwitchyardServerTransport(address: Endpoint(host: "127.0.0.1", port: 0), transport: serverTransport)
        let server = GRPCServer(transport: transport, services: [EchoService(probe: probe)])
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await server.serve() }
            let port = try await transport.listeningAddress.port
            #expect(port != 0)
            let target = Endpoint(host: "127.0.0.1", port: port)
            try await withGRPCClient(transport: .switchyard(target: target, transport: clientTransport)) { client in
                let inFlight = Task {
                    try await client.serverStreaming(
                        request: ClientRequest(message: [5], metadata: ["count": "1", "hold": ""]), descriptor: EchoService.expand,
                        serializer: BytesCoder(), deserializer: BytesCoder(), options: .defaults
                    ) { response in
                        var count = 0
                        for try await _ in response.messages { count += 1 }
                        return count
                    }
                }
                #expect(await probe.wait { $0.started == 1 })
                server.beginGracefulShutdown()
                // A new client's RPC is refused: the listener closed.
                try await withGRPCClient(transport: .switchyard(target: target, transport: clientTransport)) { late in
                    let error = await #expect(throws: RPCError.self) { try await late.get([1]).message }
                    #expect(error?.code == .unavailable, "\(String(describing: error))")
                }
                // The RPC in flight goes on to its end.
                try await Task.sleep(for: .milliseconds(100))
                probe.release()
                let received = try await inFlight.value
                #expect(received == 1)
                #expect(probe.cancelled == 0)
            }
            try await group.waitForAll()
        }
        await clientTransport.shutdownNow()
        await serverTransport.shutdownNow()
    }

    @Test("The client transport's graceful shutdown refuses new streams and connect() returns once the open one ended", arguments: [Backend.bsd])
    func clientShutdown(backend: Backend) async throws {
        try await withEcho(server: try backend.transport(), client: try backend.transport()) { _, probe, server in
            let clientTransport = try backend.transport()
            let target = Endpoint(host: "127.0.0.1", port: try await server.listeningAddress.port)
            let transport = SwitchyardClientTransport(target: target, transport: clientTransport)
            let connected = Task { try await transport.connect() }
            let inFlight = Task {
                try await transport.withStream(descriptor: EchoService.wait, options: .defaults) { stream, _ in
                    try await stream.outbound.write(.metadata([:]))
                    try await stream.outbound.write(.message([1]))
                    await stream.outbound.finish()
                    var parts: [RPCResponsePart<[UInt8]>] = []
                    for try await part in stream.inbound { parts.append(part) }
                    return parts
                }
            }
            #expect(await probe.wait { $0.started == 1 })
            transport.beginGracefulShutdown()
            let refusal = await #expect(throws: RPCError.self) {
                try await transport.withStream(descriptor: EchoService.get, options: .defaults) { _, _ in }
            }
            #expect(refusal?.code == .failedPrecondition)
            try await Task.sleep(for: .milliseconds(50))
            #expect(!connected.isCancelled)
            probe.release()
            let parts = try await inFlight.value
            #expect(parts.count == 3, "\(parts)")  // metadata, the message, the status
            if case .status(let status, _)? = parts.last { #expect(status.code == .ok) } else { Issue.record("no status: \(parts)") }
            try await connected.value
            #expect(transport.channel.connectivityState == .shutdown)
            await clientTransport.shutdownNow()
        }
    }
}
