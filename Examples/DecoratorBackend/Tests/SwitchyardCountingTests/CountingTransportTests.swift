import Switchyard
import SwitchyardCounting
import Testing

/// The decorator's own rules, beyond the kit: its listeners end with the transport, it
/// counts what it writes and reads, and `lossy` loses what it says it loses.
@Suite("Counting decorators", .serialized)
struct CountingTransportTests {
    @Test("A listener's connections sequence ends when the transport shuts down", arguments: [Shutdown.graceful, .now])
    func connectionsEndAtShutdown(_ shutdown: Shutdown) async throws {
        let transport = try CountedTransport()
        let listener = try await transport.listen(on: Endpoint(host: "127.0.0.1", port: 0))
        let iterating = Task {
            var accepted = 0
            for await connection in listener.connections {
                accepted += 1
                connection.close()
            }
            return accepted
        }
        // One connection first, so that the sequence is known to be iterated and fed.
        let client = try await transport.connect(to: listener.localAddress)
        client.close()
        switch shutdown {
        case .graceful: await transport.shutdown(gracePeriod: .seconds(1))
        case .now: await transport.shutdownNow()
        }
        let accepted = await value(of: iterating, within: .seconds(5))
        #expect(accepted != nil, "the listener's connections did not end after \(shutdown): its iterator still waits")
        #expect((accepted ?? 0) <= 1)
    }

    @Test("A listen after the shutdown fails with cancelled (shutdown)")
    func listenAfterShutdown() async throws {
        let transport = try CountedTransport()
        await transport.shutdownNow()
        let error = await #expect(throws: TransportError.self) {
            try await transport.listen(on: Endpoint(host: "127.0.0.1", port: 0))
        }
        #expect(error?.code == .cancelled && error?.reason == .shutdown, "\(String(describing: error))")
    }

    @Test("counted delivers every byte and counts what its connections write and read")
    func countedCounts() async throws {
        let (received, totals) = try await exchange(over: CountedTransport(), writes: [Array(1...100), [7, 8, 9]])
        #expect(received == Array(1...100) + [7, 8, 9])
        #expect(totals == ByteTotals(written: 103, read: 103))
    }

    @Test("lossy loses the last byte of every write, and each write still succeeds")
    func lossyLoses() async throws {
        let (received, totals) = try await exchange(over: LossyTransport(), writes: [[1, 2, 3], [4, 5, 6], [7]])
        #expect(received == [1, 2, 4, 5])
        #expect(totals == ByteTotals(written: 4, read: 4))
    }

    @Test("Each backend is registered under its own name on the tcp network")
    func registration() {
        #expect(CountedTransport.backend.name == "counted")
        #expect(LossyTransport.backend.name == "lossy")
        #expect(CountedTransport.backend.network == "tcp")
        #expect(LossyTransport.backend.network == "tcp")
    }

    enum Shutdown: CustomStringConvertible, Sendable {
        case graceful, now
        var description: String { self == .graceful ? "shutdown(gracePeriod:)" : "shutdownNow()" }
    }
}

/// Connects a client to a listener of `transport`, writes `writes` (each awaited: a
/// write that throws fails the test), shuts the client's output down and returns what
/// the server read to the end, with the transport's totals.
private func exchange<Hook: WriteHook>(over transport: CountingTransport<Hook>, writes: [[UInt8]]) async throws -> ([UInt8], ByteTotals) {
    let listener = try await transport.listen(on: Endpoint(host: "127.0.0.1", port: 0))
    let client = AsyncConnection(try await transport.connect(to: listener.localAddress))
    var connections = listener.connections.makeAsyncIterator()
    let server = AsyncConnection(try #require(await connections.next()))
    for bytes in writes { try await client.write(bytes) }
    try await client.shutdownOutput()
    let received = try await server.readToEnd()
    client.close()
    server.close()
    listener.close()
    let counted = transport.totals
    await transport.shutdown(gracePeriod: .seconds(1))
    return (received, counted)
}

/// The task's value, or nil if it has none within `limit` (the task is then cancelled,
/// which ends an `AcceptedConnections` iteration, so that the test does not hang).
private func value<Value: Sendable>(of task: Task<Value, Never>, within limit: Duration) async -> Value? {
    await withTaskGroup(of: Value?.self) { group in
        group.addTask { await task.value }
        group.addTask {
            try? await Task.sleep(for: limit)
            return nil
        }
        let first = await group.next() ?? nil
        task.cancel()
        group.cancelAll()
        return first
    }
}
