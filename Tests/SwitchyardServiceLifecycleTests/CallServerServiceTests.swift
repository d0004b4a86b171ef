import ServiceLifecycle
import ServiceLifecycleTestKit
import Switchyard
import SwitchyardCalls
import SwitchyardMemory
import SwitchyardServiceLifecycle
import SwitchyardTestSupport
import Synchronization
import Testing

/// ``CallServer`` as a swift-service-lifecycle `Service`:
/// cancellation ends everything at once and `run()` returns only after the call tasks;
/// graceful shutdown refuses new connects at once and lets open calls finish.
@Suite("CallServer as a Service", .timeLimit(.minutes(1)))
struct CallServerServiceTests {
    @Test("Cancelling run() cancels a handler blocked in next(); run() returns after it, the client's call ends unavailable")
    func cancellationEndsBlockedHandler() async throws {
        let client = try MemoryTransport(configuration: .init(eventLoopCount: 1))
        let transport = try MemoryTransport(configuration: .init(eventLoopCount: 1))
        let events = EventLog()
        let server = try await CallServer.start(transport: transport, on: Endpoint(host: "127.0.0.1", port: 0)) { call in
            events.add("started")
            do {
                _ = try await call.next()  // the client sends nothing
                events.add("next returned")
            } catch let error as TransportError {
                events.add("next threw \(error.code)")
            }
            // A wait the cancellation cannot cut: run() must still wait for it.
            await Task.detached { try? await Task.sleep(for: .milliseconds(100)) }.value
            events.add("returned")
            return .ok
        }
        let run = Task {
            try await server.run()
            events.add("run returned")
        }
        let channel = CallChannel(target: server.localAddress, transport: client)
        let status = Task { try await channel.withCall { call in await call.status() } }
        try await events.wait(for: "started")

        run.cancel()
        try await run.value
        #expect(events.all == ["started", "next threw cancelled", "returned", "run returned"])
        #expect(server.openCalls == 0)
        let ended = try await status.value
        #expect(ended.error?.code == .unavailable, "\(ended)")
        // The listener is closed: a new connect is refused.
        await #expect(throws: TransportError.self) { _ = try await client.connect(to: server.localAddress) }
        await client.shutdownNow()
        await transport.shutdownNow()
    }

    @Test("Graceful shutdown refuses a new connect at once and lets an open call finish; run() returns after it")
    func gracefulShutdownLetsOpenCallFinish() async throws {
        let client = try MemoryTransport(configuration: .init(eventLoopCount: 1))
        let transport = try MemoryTransport(configuration: .init(eventLoopCount: 1))
        let events = EventLog()
        let server = try await CallServer.start(transport: transport, on: Endpoint(host: "127.0.0.1", port: 0)) { call in
            for try await message in call.messages { try await call.write(message) }
            events.add("handler returned")
            return .ok
        }
        try await testGracefulShutdown { trigger in
            let run = Task {
                try await server.run()
                events.add("run returned")
            }
            let channel = CallChannel(target: server.localAddress, transport: client)
            let (go, goOn) = AsyncStream<Void>.makeStream()
            let open = Task {
                try await channel.withCall { call in
                    try await call.write([1])
                    events.add("echoed \(try await call.next() ?? [])")
                    var waiting = go.makeAsyncIterator()
                    _ = await waiting.next()
                    try await call.write([2, 3])
                    events.add("echoed \(try await call.next() ?? [])")
                    try await call.finishSending()
                    while try await call.next() != nil {}
                    return await call.status()
                }
            }
            try await events.wait(for: "echoed [1]")

            trigger.triggerGracefulShutdown()
            let shutdown = ContinuousClock.now
            // Refused at once (the listener closes as the shutdown begins).
            var refused: TransportError?
            while refused == nil, ContinuousClock.now - shutdown < .seconds(2) {
                do {
                    let connection = try await client.connect(to: server.localAddress)
                    connection.close()
                    try await Task.sleep(for: .milliseconds(1))
                } catch let error as TransportError {
                    refused = error
                }
            }
            #expect(refused?.code == .unavailable, "\(String(describing: refused))")
            #expect(refused?.reason == .refused, "\(String(describing: refused))")
            #expect(ContinuousClock.now - shutdown < .milliseconds(100))

            try await Task.sleep(for: .milliseconds(50))
            #expect(!events.all.contains("run returned"), "run() returned with a call open")
            goOn.yield()
            #expect(try await open.value == .ok)
            try await run.value
        }
        #expect(events.all == ["echoed [1]", "echoed [2, 3]", "handler returned", "run returned"])
        await client.shutdownNow()
        await transport.shutdownNow()
    }
}

