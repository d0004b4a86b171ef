import GRPCCore
import Switchyard
import SwitchyardGRPC
import Testing

@Suite("Server and client transports under a Lifecycle", .serialized, .timeLimit(.minutes(1)))
struct LifecycleTests {
    @Test("A suspend with policy close ends the open RPC unavailable and the handler sees it; after the resume RPCs work", arguments: [Backend.bsd, Backend.libuv])
    func suspendClose(backend: Backend) async throws {
        let serverTransport = try backend.transport()
        let clientTransport = try backend.transport()
        let lifecycle = Lifecycle(gracePeriod: .milliseconds(10))
        let probe = Probe()
        let transport = SwitchyardServerTransport(
            address: Endpoint(host: "127.0.0.1", port: 0), transport: serverTransport, lifecycle: lifecycle)
        let server = GRPCServer(transport: transport, services: [EchoService(probe: probe)])
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await server.serve() }
            let target = Endpoint(host: "127.0.0.1", port: try await transport.listeningAddress.port)
            try await withGRPCClient(transport: .switchyard(target: target, transport: clientTransport)) { client in
                let open = Task {
                    try await client.unary(
                        request: ClientRequest(message: [1]), descriptor: EchoService.wait, serializer: BytesCoder(),
                        deserializer: BytesCoder(), options: .defaults
                    ) { try $0.message }
                }
                #expect(await probe.wait { $0.started == 1 })
                await lifecycle.suspend()
                let result = await open.result
                guard case .failure(let error as RPCError) = result else {
                    Issue.record("the RPC did not end with an RPCError: \(result)")
                    return
                }
                #expect(error.code == .unavailable, "\(error)")
                #expect(await probe.wait { $0.cancelled == 1 }, "the server's handler did not learn that its RPC ended")
                try await lifecycle.resume()
                var options = CallOptions.defaults
                options.waitForReady = true
                options.timeout = .seconds(5)
                let reply = try await client.get([9], options: options).message
                #expect(reply == [9])
            }
            server.beginGracefulShutdown()
            try await group.waitForAll()
        }
        await clientTransport.shutdownNow()
        await serverTransport.shutdownNow()
    }

    @Test(
        "A client transport under a lifecycle: a suspend ends its open RPC unavailable, new RPCs fail at once until the resume, then work",
        arguments: [Backend.bsd, Backend.libuv])
    func clientSuspend(backend: Backend) async throws {
        let serverTransport = try backend.transport()
        let clientTransport = try backend.transport()
        let lifecycle = Lifecycle(gracePeriod: .milliseconds(10))
        let probe = Probe()
        let transport = SwitchyardServerTransport(address: Endpoint(host: "127.0.0.1", port: 0), transport: serverTransport)
        let server = GRPCServer(transport: transport, services: [EchoService(probe: probe)])
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await server.serve() }
            let target = Endpoint(host: "127.0.0.1", port: try await transport.listeningAddress.port)
            try await withGRPCClient(transport: .switchyard(target: target, transport: clientTransport, lifecycle: lifecycle)) { client in
                let open = Task {
                    try await client.unary(
                        request: ClientRequest(message: [1]), descriptor: EchoService.wait, serializer: BytesCoder(),
                        deserializer: BytesCoder(), options: .defaults
                    ) { try $0.message }
                }
                #expect(await probe.wait { $0.started == 1 })
                await lifecycle.suspend()
                let result = await open.result
                guard case .failure(let error as RPCError) = result else {
                    Issue.record("the RPC did not end with an RPCError: \(result)")
                    return
                }
                #expect(error.code == .unavailable, "\(error)")
                #expect(error.message.contains("suspended"), "\(error)")
                #expect(await probe.wait { $0.cancelled == 1 }, "the server's handler did not learn that its RPC ended")

                // While suspended a new RPC fails at once, wait-for-ready or not, and reaches no server.
                var waiting = CallOptions.defaults
                waiting.waitForReady = true
                waiting.timeout = .seconds(10)
                let refusedAt = ContinuousClock.now
                await #expect(throws: RPCError.self) { _ = try await client.get([2], options: waiting).message }
                #expect(ContinuousClock.now - refusedAt < .seconds(2), "a suspended client's RPC waited")
                #expect(probe.started == 1, "an RPC started while the client was suspended reached the server")

                try await lifecycle.resume()
                let reply = try await client.get([9], options: waiting).message
                #expect(reply == [9])
            }
            server.beginGracefulShutdown()
            try await group.waitForAll()
        }
        await clientTransport.shutdownNow()
        await serverTransport.shutdownNow()
    }
}
