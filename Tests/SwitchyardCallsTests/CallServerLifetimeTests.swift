import Switchyard
import SwitchyardCalls
import SwitchyardMemory
import SwitchyardTestSupport
import Synchronization
import Testing

/// A ``CallServer``'s lifetime: the tasks that run `serve` belong to
/// the server, `closeNow()` cancels them, and `serve()` returns only once they returned.
/// Over the in-memory backend; the same with a ServiceGroup is in
/// SwitchyardServiceLifecycleTests.
@Suite("A CallServer's call tasks end with it", .timeLimit(.minutes(1)))
struct CallServerLifetimeTests {
    @Test("closeNow() cancels a call's task that waits on something else than its call, and serve() returns once it did")
    func closeNowCancelsTasks() async throws {
        let client = try MemoryTransport(configuration: .init(eventLoopCount: 1))
        let transport = try MemoryTransport(configuration: .init(eventLoopCount: 1))
        let events = EventLog()
        let server = try await CallServer.start(transport: transport, on: Endpoint(host: "127.0.0.1", port: 0)) { call in
            events.add("started")
            do {
                // Not a read of the call: only the task's cancellation ends this early.
                try await Task.sleep(for: .seconds(30))
                events.add("slept")
            } catch {
                events.add("cancelled")
            }
            // Still awaited by serve(), though cancelled: a wait the cancellation cannot cut.
            await Task.detached { try? await Task.sleep(for: .milliseconds(100)) }.value
            events.add("returned")
            return .ok
        }
        let serving = Task {
            await server.serve()
            events.add("served")
        }
        let channel = CallChannel(target: server.localAddress, transport: client)
        let status = Task { try await channel.withCall { call in await call.status() } }
        try await events.wait(for: "started")

        let closed = ContinuousClock.now
        server.closeNow()
        await serving.value
        #expect(ContinuousClock.now - closed < .seconds(5), "serve() waited for the 30 s sleep")
        #expect(events.all == ["started", "cancelled", "returned", "served"])
        #expect(server.openCalls == 0)
        #expect(try await status.value.error?.code == .unavailable)
        await client.shutdownNow()
        await transport.shutdownNow()
    }

    @Test("After close(), serve() returns once the open call ended, and a new connect is refused at once")
    func closeLetsOpenCallsFinish() async throws {
        let client = try MemoryTransport(configuration: .init(eventLoopCount: 1))
        let transport = try MemoryTransport(configuration: .init(eventLoopCount: 1))
        let events = EventLog()
        let server = try await CallServer.start(transport: transport, on: Endpoint(host: "127.0.0.1", port: 0)) { call in
            for try await message in call.messages { try await call.write(message) }
            events.add("handler returned")
            return .ok
        }
        let serving = Task {
            await server.serve()
            events.add("served")
        }
        let channel = CallChannel(target: server.localAddress, transport: client)
        let (go, goOn) = AsyncStream<Void>.makeStream()
        let open = Task {
            try await channel.withCall { call in
                try await call.write([1])
                let first = try await call.next()
                events.add("echoed \(first ?? [])")
                var waiting = go.makeAsyncIterator()
                _ = await waiting.next()
                try await call.write([2, 3])
                let second = try await call.next()
                events.add("echoed \(second ?? [])")
                try await call.finishSending()
                while try await call.next() != nil {}
                return await call.status()
            }
        }
        try await events.wait(for: "echoed [1]")

        server.close()
        await #expect(throws: TransportError.self) { _ = try await client.connect(to: server.localAddress) }
        try await Task.sleep(for: .milliseconds(50))
        #expect(!events.all.contains("served"), "serve() returned with a call open")
        goOn.yield()
        #expect(try await open.value == .ok)
        await serving.value
        #expect(events.all == ["echoed [1]", "echoed [2, 3]", "handler returned", "served"])
        await client.shutdownNow()
        await transport.shutdownNow()
    }
}

