import Switchyard
import Synchronization
import SwitchyardUV
import Testing

/// The libuv backend on its own: echo, connect errors, shutdown, leaks, resets.
///
/// Serialized: the descriptor-leak test counts the process's descriptors.
@Suite("libuv backend", .serialized)
struct UVTransportTests {
    private static let loopback = Endpoint(host: "127.0.0.1", port: 0)

    /// An echo server on `listener` over the async face: each connection echoes until
    /// end of stream, then shuts its output down and closes.
    private static func serveEcho(_ listener: any Listener) -> Task<Void, Never> {
        Task {
            await withTaskGroup(of: Void.self) { group in
                for await connection in listener.connections {
                    group.addTask {
                        let echo = AsyncConnection(connection)
                        do {
                            while let chunk = try await echo.read() { try await echo.write(chunk) }
                            try await echo.shutdownOutput()
                        } catch {}
                        echo.close()
                    }
                }
            }
        }
    }

    @Test("A stall timeout with the kernel's stall detection off is refused with invalidArgument (invalid option): libuv has no monitor of its own")
    func refusesStallTimeoutWithoutKernelDetection() throws {
        var configuration = TransportConfiguration(eventLoopCount: 1, stallTimeout: .seconds(2))
        configuration.kernelStallDetection = false
        #expect {
            _ = try UVTransport(configuration: configuration)
        } throws: { error in
            (error as? TransportError)?.code == .invalidArgument && (error as? TransportError)?.reason == .invalidOption
        }
    }

    @Test("A path endpoint is refused in connect and listen with invalidArgument (invalid address)")
    func pathEndpointIsRefused() async throws {
        let transport = try UVTransport(configuration: TransportConfiguration(eventLoopCount: 1))
        let path = Endpoint(unixPath: "/tmp/switchyard-libuv.sock")
        for operation in ["connect", "listen"] {
            await #expect {
                if operation == "connect" { _ = try await transport.connect(to: path) } else { _ = try await transport.listen(on: path) }
            } throws: { error in
                guard let error = error as? TransportError else { return false }
                return error.code == .invalidArgument && error.reason == .invalidAddress && error.message.contains("unix:/tmp/switchyard-libuv.sock")
            }
        }
        await transport.shutdownNow()
    }

    @Test("Bytes echo intact through the async face, from 1 byte to 16 MiB")
    func echo() async throws {
        let transport = try UVTransport(configuration: TransportConfiguration(eventLoopCount: 2))
        #expect(transport.name == "libuv")
        #expect(transport.eventLoopCount == 2)
        let listener = try await transport.listen(on: Self.loopback)
        #expect(listener.localAddress.port > 0)
        #expect(listener.backendName == "libuv")
        let server = Self.serveEcho(listener)
        for (index, size) in [1, 100, 4096, 65_537, 1 << 20, 16 << 20].enumerated() {
            let connection = try await transport.connect(to: listener.localAddress)
            #expect(connection.backendName == "libuv")
            #expect(connection.remoteAddress == listener.localAddress)
            #expect(connection.localAddress.host == "127.0.0.1" && connection.localAddress.port > 0)
            let client = AsyncConnection(connection)
            let payload = pattern(count: size, seed: UInt64(index + 1))
            let writer = Task {
                // Half in one write, the rest in 64 KiB pieces, then end of stream.
                let half = size / 2
                try await client.write(Array(payload[..<half]))
                var offset = half
                while offset < size {
                    let end = min(size, offset + 65_536)
                    try await client.write(Array(payload[offset..<end]))
                    offset = end
                }
                try await client.shutdownOutput()
            }
            let echoed = try await client.readToEnd()
            try await writer.value
            #expect(echoed.count == size)
            #expect(echoed == payload, "the echo of \(size) bytes differs")
            client.close()
        }
        listener.close()
        await server.value
        await transport.shutdownNow()
        #expect(transport.loopCloseResults == [0, 0])
    }

    @Test("Connecting to a port nobody listens on fails at once with unavailable (refused)")
    func refused() async throws {
        let transport = try UVTransport(configuration: TransportConfiguration(eventLoopCount: 1))
        let listener = try await transport.listen(on: Self.loopback)
        let port = listener.localAddress.port
        listener.close()
        let started = ContinuousClock.now
        let error = await transportError { _ = try await transport.connect(to: Endpoint(host: "127.0.0.1", port: port)) }
        #expect(ContinuousClock.now - started < .seconds(1))
        #expect(error?.code == .unavailable)
        #expect(error?.reason == .refused)
        #expect(error?.native?.domain == .libuv)
        #expect(error?.native?.name == "UV_ECONNREFUSED")
        await transport.shutdownNow()
        #expect(transport.loopCloseResults == [0])
    }

    @Test("A name under .invalid fails at once with unavailable (name resolution), without a query")
    func nameResolution() async throws {
        let transport = try UVTransport(configuration: TransportConfiguration(eventLoopCount: 1))
        for host in ["no-such-host.invalid", "invalid", "A.B.INVALID"] {
            let started = ContinuousClock.now
            let error = await transportError { _ = try await transport.connect(to: Endpoint(host: host, port: 80)) }
            #expect(ContinuousClock.now - started < .milliseconds(500))
            #expect(error?.code == .unavailable, "\(host)")
            #expect(error?.reason == .nameResolution, "\(host)")
        }
        await transport.shutdownNow()
        #expect(transport.loopCloseResults == [0])
    }

    @Test("A host name is resolved with uv_getaddrinfo and connected to")
    func resolvesNames() async throws {
        let transport = try UVTransport(configuration: TransportConfiguration(eventLoopCount: 2))
        let listener = try await transport.listen(on: Endpoint(host: "localhost", port: 0))
        let server = Self.serveEcho(listener)
        let port = listener.localAddress.port
        let client = AsyncConnection(try await transport.connect(to: Endpoint(host: listener.localAddress.host, port: port)))
        let named = AsyncConnection(try await transport.connect(to: Endpoint(host: "localhost", port: port)))
        for connection in [client, named] {
            try await connection.write(Array("hello".utf8))
            try await connection.shutdownOutput()
            #expect(try await connection.readToEnd() == Array("hello".utf8))
            connection.close()
        }
        listener.close()
        await server.value
        await transport.shutdownNow()
        #expect(transport.loopCloseResults == [0, 0])
    }

    @Test("Shutdown with connections open ends each with cancelled (shutdown) and every uv_loop_close returns 0")
    func loopsCloseClean() async throws {
        // The server transport shuts down; its peers live in another transport, so that
        // no connection hears of its peer's end before its own.
        let clientTransport = try UVTransport(configuration: TransportConfiguration(eventLoopCount: 2))
        let transport = try UVTransport(configuration: TransportConfiguration(eventLoopCount: 3))
        let listener = try await transport.listen(on: Self.loopback)
        var clients: [any Connection] = []
        var servers: [any Connection] = []
        var iterator = listener.connections.makeAsyncIterator()
        for _ in 0..<6 {
            clients.append(try await clientTransport.connect(to: listener.localAddress))
            servers.append(try #require(await iterator.next()))
        }
        let handlers = servers.map { RecordingHandler(on: $0) }
        for connection in servers { connection.startReading() }
        // A write left pending on one connection (its peer does not read), a shutdown on another.
        let pending = Mutex<[TransportError?]>([])
        servers[0].write(pattern(count: 32 << 20, seed: 9)) { error in pending.withLock { $0.append(error) } }
        servers[1].shutdownOutput(completion: nil)
        await transport.shutdownNow()
        #expect(transport.loopCloseResults == [0, 0, 0])
        for (index, handler) in handlers.enumerated() {
            #expect(await eventually { handler.snapshot.closes.count == 1 }, "connection \(index) was not told it closed")
            let events = handler.snapshot
            #expect(events.closes.count == 1)
            #expect(events.closes.first??.code == .cancelled)
            #expect(events.closes.first??.reason == .shutdown)
            #expect(events.offLoop == 0)
        }
        #expect(pending.withLock { $0.count } == 1)
        #expect(pending.withLock { $0.first??.reason } == .shutdown)
        // Everything after shutdown fails with cancelled (shutdown).
        let connectError = await transportError { _ = try await transport.connect(to: listener.localAddress) }
        #expect(connectError?.code == .cancelled && connectError?.reason == .shutdown)
        let listenError = await transportError { _ = try await transport.listen(on: Self.loopback) }
        #expect(listenError?.code == .cancelled && listenError?.reason == .shutdown)
        // A write after the loops stopped still completes, with the connection's end.
        let late = await withCheckedContinuation { continuation in
            servers[2].write([1, 2, 3]) { continuation.resume(returning: $0) }
        }
        #expect(late?.reason == .shutdown)
        // A handler set after the end hears of it only if no handler did (the contract):
        // this connection's first handler heard it, so a replacement hears nothing.
        let lateHandler = RecordingHandler(on: servers[3])
        try await Task.sleep(for: .milliseconds(50))
        #expect(lateHandler.snapshot.closes.isEmpty)
        await transport.shutdownNow()
        await clientTransport.shutdownNow()
        #expect(clientTransport.loopCloseResults == [0, 0])
    }

    @Test("No descriptor is left open after a transport with connections shuts down")
    func noDescriptorLeak() async throws {
        // libuv opens a process-wide pipe once, on the first loop; make that happen first.
        await (try UVTransport(configuration: TransportConfiguration(eventLoopCount: 1))).shutdownNow()
        let before = openDescriptorCount()
        let transport = try UVTransport(configuration: TransportConfiguration(eventLoopCount: 2))
        let listener = try await transport.listen(on: Self.loopback)
        let server = Self.serveEcho(listener)
        var open: [AsyncConnection] = []
        for index in 0..<20 {
            let client = AsyncConnection(try await transport.connect(to: listener.localAddress))
            try await client.write(pattern(count: 1000, seed: UInt64(index)))
            _ = try await client.read(exactly: 1000)
            if index.isMultiple(of: 2) { client.close() } else { open.append(client) }
        }
        #expect(openDescriptorCount() > before)
        await transport.shutdownNow()
        server.cancel()
        #expect(await settledDescriptorCount(before) == before)
        #expect(transport.loopCloseResults == [0, 0])
        _ = open
    }

    @Test("A reset from the peer fails a reading connection with unavailable (reset)")
    func peerReset() async throws {
        let transport = try UVTransport(configuration: TransportConfiguration(eventLoopCount: 2))
        let listener = try await transport.listen(on: Self.loopback)
        let client = AsyncConnection(try await transport.connect(to: listener.localAddress))
        var iterator = listener.connections.makeAsyncIterator()
        let server = try #require(await iterator.next())
        let read = Task { try await client.read() }
        try await Task.sleep(for: .milliseconds(50))
        server.reset()
        let error = await transportError { _ = try await read.value }
        #expect(error?.code == .unavailable)
        #expect(error?.reason == .reset)
        #expect(error?.native?.domain == .libuv)
        #expect(error?.native?.name == "UV_ECONNRESET")
        // The terminal error sticks: a write fails with it too.
        let writeError = await transportError { try await client.write([1]) }
        #expect(writeError?.reason == .reset)
        client.close()
        listener.close()
        await transport.shutdownNow()
        #expect(transport.loopCloseResults == [0, 0])
    }

    @Test("Writes after shutdownOutput fail with failedPrecondition, after close with cancelled (closed)")
    func writesAfterEnd() async throws {
        let transport = try UVTransport(configuration: TransportConfiguration(eventLoopCount: 2))
        let listener = try await transport.listen(on: Self.loopback)
        let client = try await transport.connect(to: listener.localAddress)
        var iterator = listener.connections.makeAsyncIterator()
        let server = try #require(await iterator.next())
        let serverEvents = RecordingHandler(on: server)
        server.startReading()
        let clientEvents = RecordingHandler(on: client)
        func write(_ bytes: [UInt8]) async -> TransportError? {
            await withCheckedContinuation { continuation in client.write(bytes) { continuation.resume(returning: $0) } }
        }
        #expect(await write([1, 2, 3]) == nil)
        let shutdown = await withCheckedContinuation { continuation in client.shutdownOutput { continuation.resume(returning: $0) } }
        #expect(shutdown == nil)
        let afterShutdown = await write([4])
        #expect(afterShutdown?.code == .failedPrecondition && afterShutdown?.reason == .outputShutdown)
        #expect(await eventually { serverEvents.snapshot.readEnds == 1 })
        #expect(serverEvents.snapshot.bytes == [1, 2, 3])
        client.close()
        client.close()
        let afterClose = await write([5])
        #expect(afterClose?.code == .cancelled && afterClose?.reason == .closed)
        #expect(await eventually { clientEvents.snapshot.closes.count == 1 })
        try await Task.sleep(for: .milliseconds(50))
        #expect(clientEvents.snapshot.closes.count == 1)
        #expect(clientEvents.snapshot.closes.first! == nil)
        server.close()
        listener.close()
        await transport.shutdownNow()
        #expect(transport.loopCloseResults == [0, 0])
    }

    @Test("A closed listener refuses new connects as soon as close() returns")
    func listenerCloseIsImmediate() async throws {
        let transport = try UVTransport(configuration: TransportConfiguration(eventLoopCount: 2))
        for _ in 0..<20 {
            let listener = try await transport.listen(on: Self.loopback)
            listener.close()
            let error = await transportError { _ = try await transport.connect(to: listener.localAddress) }
            #expect(error?.reason == .refused)
        }
        await transport.shutdownNow()
        #expect(transport.loopCloseResults == [0, 0])
    }

    @Test("Accepted connections are spread over every loop")
    func acceptSpreadsOverLoops() async throws {
        let transport = try UVTransport(configuration: TransportConfiguration(eventLoopCount: 3))
        let listener = try await transport.listen(on: Self.loopback)
        var iterator = listener.connections.makeAsyncIterator()
        var loops: [ObjectIdentifier] = []
        var clients: [any Connection] = []
        for _ in 0..<6 {
            clients.append(try await transport.connect(to: listener.localAddress))
            let accepted = try #require(await iterator.next())
            loops.append(ObjectIdentifier(accepted.eventLoop))
            #expect(accepted.remoteAddress == clients.last!.localAddress)
            #expect(accepted.localAddress == listener.localAddress)
            // Each accepted connection works, whichever loop it landed on.
            let echo = AsyncConnection(accepted)
            let client = AsyncConnection(clients.last!)
            try await client.write([7, 8, 9])
            #expect(try await echo.read(exactly: 3) == [7, 8, 9])
        }
        #expect(Set(loops).count == 3)
        await transport.shutdownNow()
        #expect(transport.loopCloseResults == [0, 0, 0])
    }
}
