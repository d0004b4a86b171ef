import Glibc
import Switchyard
import SwitchyardMemory
import Synchronization
import Testing

/// The in-memory backend on its own: integrity, errors, backpressure, shutdown, leaks.
/// Serialized: the tests share the process-wide in-memory address table.
@Suite(.serialized, .timeLimit(.minutes(1)))
struct MemoryTransportTests {
    @Test("echo through AsyncConnection returns every byte, 1 B to 1 MiB", arguments: [1, 100, 65_535, 65_537, 262_151, 1 << 20])
    func echo(size: Int) async throws {
        try await withTransports { client, server in
            let listener = try await server.listen(on: Endpoint(host: "127.0.0.1", port: 0))
            defer { listener.close() }
            let connection = try await client.connect(to: Endpoint(host: "127.0.0.1", port: listener.localAddress.port))
            let accepted = try #require(await firstConnection(of: listener))

            let echo = Task {
                let peer = AsyncConnection(accepted)
                while let chunk = try await peer.read() { try await peer.write(chunk) }
                try await peer.shutdownOutput()
                peer.close()
            }
            let payload = pattern(count: size)
            let async = AsyncConnection(connection)
            async let sent: Void = {
                try await async.write(payload)
                try await async.shutdownOutput()
            }()
            let received = try await async.readToEnd()
            try await sent
            try await echo.value
            #expect(received.count == payload.count)
            #expect(received == payload)
            async.close()
        }
    }

    @Test("AsyncConnection.read(upTo:) returns at most so many bytes and keeps the rest, in order, for the next read; below 1 is invalidArgument")
    func readUpTo() async throws {
        try await withTransports { client, server in
            let listener = try await server.listen(on: Endpoint(host: "127.0.0.1", port: 0))
            defer { listener.close() }
            let connection = AsyncConnection(try await client.connect(to: Endpoint(host: "127.0.0.1", port: listener.localAddress.port)))
            let accepted = AsyncConnection(try #require(await firstConnection(of: listener)))
            let payload = pattern(count: 1000)
            try await connection.write(payload)
            try await connection.shutdownOutput()

            var received: [UInt8] = []
            var chunks = 0
            while let chunk = try await accepted.read(upTo: 7) {
                #expect((1...7).contains(chunk.count), "a chunk of \(chunk.count) bytes")
                received += chunk
                chunks += 1
            }
            #expect(received == payload)
            #expect(chunks >= 1000 / 7)
            await #expect(throws: TransportError.self) { _ = try await accepted.read(upTo: 0) }
            connection.close()
            accepted.close()
        }
    }

    @Test("addresses are real: ports above zero, no wildcard, each end mirrors the other, IPv6 too", arguments: ["127.0.0.1", "::1", "0.0.0.0"])
    func addresses(host: String) async throws {
        try await withTransports { client, server in
            let listener = try await server.listen(on: Endpoint(host: host, port: 0))
            defer { listener.close() }
            #expect(listener.localAddress.port >= 49152)
            let target = host == "0.0.0.0" ? "127.0.0.1" : host
            let first = try await client.connect(to: Endpoint(host: target, port: listener.localAddress.port))
            let second = try await client.connect(to: Endpoint(host: target, port: listener.localAddress.port))
            let firstServer = try #require(await firstConnection(of: listener))
            for connection in [first, second, firstServer] {
                #expect(connection.localAddress.port > 0)
                #expect(connection.localAddress.host == target)
                #expect(connection.remoteAddress.host == target)
                #expect(connection.backendName == "memory")
            }
            #expect(first.localAddress.port != second.localAddress.port)
            #expect(first.remoteAddress == Endpoint(host: target, port: listener.localAddress.port))
            #expect(firstServer.remoteAddress == first.localAddress)
            #expect(firstServer.localAddress == first.remoteAddress)

            await #expect(throws: TransportError.self) {
                _ = try await server.listen(on: listener.localAddress)
            }
            do {
                _ = try await server.listen(on: listener.localAddress)
            } catch let error as TransportError {
                #expect(error.code == .unavailable && error.reason == .addressInUse)
            }
            for connection in [first, second, firstServer] { connection.close() }
        }
    }

    @Test("a connect to a port nobody listens on is refused at once")
    func refused() async throws {
        try await withTransports { client, server in
            let listener = try await server.listen(on: Endpoint(host: "127.0.0.1", port: 0))
            let endpoint = listener.localAddress
            listener.close()
            let error = try await connectError(client, to: endpoint)
            #expect(error.code == .unavailable)
            #expect(error.reason == .refused)
        }
    }

    @Test("a path endpoint is refused in connect and listen with invalidArgument (invalid address)")
    func pathEndpointIsRefused() async throws {
        try await withTransports { client, server in
            let path = Endpoint(unixPath: "/tmp/switchyard-memory.sock")
            let connectError = try await connectError(client, to: path)
            #expect(connectError.code == .invalidArgument && connectError.reason == .invalidAddress)
            #expect(connectError.message.contains("unix:/tmp/switchyard-memory.sock"))
            await #expect {
                _ = try await server.listen(on: path)
            } throws: { error in
                (error as? TransportError)?.reason == .invalidAddress
            }
        }
    }

    @Test("names other than localhost fail at once with name resolution; localhost works")
    func nameResolution() async throws {
        try await withTransports { client, server in
            for host in ["nowhere.invalid", "example.com"] {
                let start = ContinuousClock.now
                let error = try await connectError(client, to: Endpoint(host: host, port: 80))
                #expect(error.code == .unavailable)
                #expect(error.reason == .nameResolution)
                #expect(ContinuousClock.now - start < .seconds(1))
            }
            let listener = try await server.listen(on: Endpoint(host: "localhost", port: 0))
            defer { listener.close() }
            #expect(listener.localAddress.host == "127.0.0.1")
            let connection = try await client.connect(to: Endpoint(host: "localhost", port: listener.localAddress.port))
            #expect(connection.remoteAddress.host == "127.0.0.1")
            connection.close()
        }
    }

    @Test("a reader that never reads holds at most the window, and the writer's completions stop")
    func backpressure() async throws {
        try await withTransports { client, server in
            let listener = try await server.listen(on: Endpoint(host: "127.0.0.1", port: 0))
            defer { listener.close() }
            let connection = try await client.connect(to: listener.localAddress)
            let accepted = try #require(await firstConnection(of: listener))

            let chunk = 64 * 1024
            let count = 40
            let completed = Atomic<Int>(0)
            let payload = pattern(count: chunk * count)
            for index in 0..<count {
                connection.write(Array(payload[index * chunk..<(index + 1) * chunk])) { error in
                    if error == nil { completed.add(chunk, ordering: .relaxed) }
                }
            }
            // Let everything that can move, move; then it must stay still.
            try await Task.sleep(for: .milliseconds(200))
            let settled = completed.load(ordering: .relaxed)
            try await Task.sleep(for: .milliseconds(200))
            #expect(completed.load(ordering: .relaxed) == settled)
            #expect(settled > 0)
            #expect(settled <= 256 * 1024)
            #expect(connection.pendingWriteBytes == payload.count - settled)

            // Reading lets every write through, byte-exact.
            let reader = AsyncConnection(accepted)
            let received = try await reader.read(exactly: payload.count)
            #expect(received == payload)
            for _ in 0..<500 where completed.load(ordering: .relaxed) < payload.count {
                try await Task.sleep(for: .milliseconds(2))
            }
            #expect(completed.load(ordering: .relaxed) == payload.count)
            #expect(connection.pendingWriteBytes == 0)
            connection.close()
            reader.close()
        }
    }

    @Test("shutdownNow ends open connections with cancelled/shutdown; the peer on another transport sees end of stream")
    func shutdownNowEndsConnections() async throws {
        let client = try MemoryTransport(configuration: .init(eventLoopCount: 2))
        let server = try MemoryTransport(configuration: .init(eventLoopCount: 2))
        let listener = try await server.listen(on: Endpoint(host: "127.0.0.1", port: 0))
        let connection = try await client.connect(to: listener.localAddress)
        let accepted = try #require(await firstConnection(of: listener))

        // A write that cannot complete (the server end does not read) and a pending read.
        let clientEnd = AsyncConnection(connection)
        let bigWrite = Task { try await clientEnd.write(pattern(count: 1 << 20)) }
        let pendingRead = Task { try await clientEnd.read() }
        let serverEnd = AsyncConnection(accepted)
        try await Task.sleep(for: .milliseconds(50))

        await client.shutdownNow()
        for task in [Task { _ = try await bigWrite.value }, Task { _ = try await pendingRead.value }] {
            do {
                try await task.value
                Issue.record("expected cancelled/shutdown")
            } catch let error as TransportError {
                #expect(error.code == .cancelled)
                #expect(error.reason == .shutdown)
            }
        }
        // The server end reads what got through, then end of stream.
        let rest = try await serverEnd.readToEnd()
        #expect(rest.count <= 256 * 1024)

        let error = try await connectError(client, to: listener.localAddress)
        #expect(error.code == .cancelled && error.reason == .shutdown)
        await client.shutdownNow()  // idempotent

        await server.shutdown(gracePeriod: .milliseconds(100))
        let late = try await connectError(client, to: listener.localAddress)
        #expect(late.code == .cancelled)
        do {
            _ = try await server.listen(on: Endpoint(host: "127.0.0.1", port: 0))
            Issue.record("listen after shutdown succeeded")
        } catch let error as TransportError {
            #expect(error.code == .cancelled && error.reason == .shutdown)
        }
    }

    @Test("reset reaches the peer as unavailable/reset; close reaches it as end of stream")
    func resetAndClose() async throws {
        try await withTransports { client, server in
            let listener = try await server.listen(on: Endpoint(host: "127.0.0.1", port: 0))
            defer { listener.close() }
            let a = try await client.connect(to: listener.localAddress)
            let aServer = try #require(await firstConnection(of: listener))
            let b = try await client.connect(to: listener.localAddress)
            var iterator = listener.connections.makeAsyncIterator()
            let bServer = try #require(await iterator.next())

            let aEnd = AsyncConnection(aServer)
            a.write([1, 2, 3], completion: nil)
            a.reset()
            do {
                _ = try await aEnd.readToEnd()
                Issue.record("expected a reset")
            } catch let error as TransportError {
                #expect(error.code == .unavailable && error.reason == .reset)
            }

            let bEnd = AsyncConnection(bServer)
            b.write([4, 5, 6], completion: nil)
            b.close()
            b.close()
            #expect(try await bEnd.readToEnd() == [4, 5, 6])
            do {
                try await AsyncConnection(b).write([7])
                Issue.record("a write after close succeeded")
            } catch let error as TransportError {
                #expect(error.code == .cancelled && error.reason == .closed)
            }
            aEnd.close()
            bEnd.close()
        }
    }

    @Test("both ends on one transport and one loop echo, and the writer hears connectionDidDrainWrites")
    func oneLoop() async throws {
        let transport = try MemoryTransport(configuration: .init(eventLoopCount: 1))
        let listener = try await transport.listen(on: Endpoint(host: "::1", port: 0))
        let connection = try await transport.connect(to: listener.localAddress)
        let accepted = try #require(await firstConnection(of: listener))
        #expect(connection.eventLoop === accepted.eventLoop)

        let drains = Atomic<Int>(0)
        let closes = Mutex<[TransportError?]>([])
        final class Watcher: ConnectionHandler {
            let drains: @Sendable () -> Void
            let closed: @Sendable (TransportError?) -> Void
            init(drains: @escaping @Sendable () -> Void, closed: @escaping @Sendable (TransportError?) -> Void) {
                self.drains = drains
                self.closed = closed
            }
            func connectionDidRead(_ bytes: UnsafeRawBufferPointer) {}
            func connectionDidReadEnd() {}
            func connectionDidDrainWrites() { drains() }
            func connectionDidClose(error: TransportError?) { closed(error) }
        }
        connection.setHandler(Watcher(drains: { drains.add(1, ordering: .relaxed) }, closed: { error in closes.withLock { $0.append(error) } }))
        let payload = pattern(count: 700_000)
        let done = Atomic<Int>(0)
        connection.write(payload) { error in if error == nil { done.add(1, ordering: .relaxed) } }
        let reader = AsyncConnection(accepted)
        #expect(try await reader.read(exactly: payload.count) == payload)
        for _ in 0..<500 where drains.load(ordering: .relaxed) == 0 { try await Task.sleep(for: .milliseconds(2)) }
        #expect(done.load(ordering: .relaxed) == 1)
        #expect(drains.load(ordering: .relaxed) == 1)

        // A graceful shutdown returns early once the last connection closes.
        let started = ContinuousClock.now
        let shutdown = Task { await transport.shutdown(gracePeriod: .seconds(30)) }
        try await Task.sleep(for: .milliseconds(50))
        connection.close()
        reader.close()
        await shutdown.value
        #expect(ContinuousClock.now - started < .seconds(5))
        #expect(closes.withLock { $0 } == [nil])
        #expect(listener.connections.queuedCount == 0)
    }

    @Test("a transport dropped without a shutdown ends its connections; later calls report on the caller's thread")
    func droppedTransport() async throws {
        var transport: MemoryTransport? = try MemoryTransport(configuration: .init(eventLoopCount: 1))
        let listener = try await transport!.listen(on: Endpoint(host: "127.0.0.1", port: 0))
        let connection = try await transport!.connect(to: listener.localAddress)
        let accepted = try #require(await firstConnection(of: listener))
        let reader = AsyncConnection(connection)
        transport = nil  // ends both ends with cancelled/shutdown and stops the loop

        do {
            _ = try await reader.read()
            Issue.record("a read after the transport was dropped succeeded")
        } catch let error as TransportError {
            #expect(error.code == .cancelled && error.reason == .shutdown)
        }
        // The loop has stopped: the write's completion and a late handler's end run here.
        let outcome = Mutex<TransportError?>(nil)
        accepted.write([1]) { error in outcome.withLock { $0 = error } }
        #expect(outcome.withLock { $0 }?.reason == .shutdown)
        final class LateHandler: ConnectionHandler {
            let closed: @Sendable (TransportError?) -> Void
            init(closed: @escaping @Sendable (TransportError?) -> Void) { self.closed = closed }
            func connectionDidRead(_ bytes: UnsafeRawBufferPointer) {}
            func connectionDidReadEnd() {}
            func connectionDidClose(error: TransportError?) { closed(error) }
        }
        let ends = Mutex<[TransportError?]>([])
        accepted.setHandler(LateHandler { error in ends.withLock { $0.append(error) } })
        accepted.setHandler(LateHandler { error in ends.withLock { $0.append(error) } })
        #expect(ends.withLock { $0.map { $0?.reason } } == [.shutdown])
        listener.close()
    }

    @Test("transports open no descriptor that outlives their shutdown")
    func noDescriptorLeak() async throws {
        let before = openDescriptors()
        for _ in 0..<3 {
            try await withTransports { client, server in
                let listener = try await server.listen(on: Endpoint(host: "::1", port: 0))
                var connections: [any Connection] = []
                for _ in 0..<20 { connections.append(try await client.connect(to: listener.localAddress)) }
                let first = AsyncConnection(connections[0])
                try await first.write([42])
                listener.close()
            }
        }
        #expect(openDescriptors() == before)
    }
}

// MARK: - helpers

/// Runs `body` with a client and a server transport and shuts both down afterwards.
private func withTransports(
    _ body: (MemoryTransport, MemoryTransport) async throws -> Void
) async throws {
    let client = try MemoryTransport(configuration: .init(eventLoopCount: 2))
    let server = try MemoryTransport(configuration: .init(eventLoopCount: 2))
    do {
        try await body(client, server)
    } catch {
        await client.shutdownNow()
        await server.shutdownNow()
        throw error
    }
    await client.shutdownNow()
    await server.shutdownNow()
}

private func firstConnection(of listener: any Listener) async -> (any Connection)? {
    var iterator = listener.connections.makeAsyncIterator()
    return await iterator.next()
}

private func connectError(_ transport: MemoryTransport, to endpoint: Endpoint) async throws -> TransportError {
    do {
        let connection = try await transport.connect(to: endpoint)
        connection.close()
        throw ExpectedFailure(what: "connect to \(endpoint) succeeded")
    } catch let error as TransportError {
        return error
    }
}

private struct ExpectedFailure: Error { var what: String }

/// Deterministic bytes that are never all one value.
private func pattern(count: Int) -> [UInt8] {
    var state: UInt64 = 0x9E37_79B9_7F4A_7C15
    return (0..<count).map { _ in
        state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
        return UInt8(truncatingIfNeeded: state >> 33)
    }
}

/// How many descriptors the process has open.
private func openDescriptors() -> Int {
    guard let directory = opendir("/proc/self/fd") else { return -1 }
    defer { closedir(directory) }
    var count = 0
    while readdir(directory) != nil { count += 1 }
    return count
}
