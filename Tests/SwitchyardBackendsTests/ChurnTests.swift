import Glibc
import Switchyard
import SwitchyardBackends
import SwitchyardUV
import Synchronization
import SwitchyardPosix
import Testing

/// Connection churn on each backend (the smaller sibling of `Benchmarks/churn`): many
/// connections opened, echoed once and closed, in waves; after every wave the process has
/// no descriptor that it did not have before the first one, and a libuv transport has no
/// more handles open than at the start. No timing is asserted: after a wave the test
/// waits (boundedly) for the closes to settle, then compares.
@Suite("Connection churn", .serialized, .timeLimit(.minutes(5)))
struct ChurnTests {
    static let connections = 2_000
    static let waves = 4
    static let concurrency = 50

    @Test("2,000 connections in 4 waves: after each wave the descriptors (and libuv handles) are back at the baseline", arguments: ["bsd", "libuv", "memory", "simulation"])
    func churn(backend: String) async throws {
        let server = try Backends.makeTransport(named: backend, configuration: TransportConfiguration(eventLoopCount: 2))
        let client = try Backends.makeTransport(named: backend, configuration: TransportConfiguration(eventLoopCount: 2))
        let live = ChurnEchoServer.Live()
        let listener = try await server.listen(on: Endpoint(host: "127.0.0.1", port: 0))
        listener.acceptConnections { ChurnEchoServer.serve($0, live: live) }
        let endpoint = Endpoint(host: "127.0.0.1", port: listener.localAddress.port)

        // A small wave first, so that what a transport sets up once per loop, lazily (libuv's
        // reserved /dev/null descriptor, opened at a loop's first accept), is in the
        // baseline, not counted as a leak.
        try await ChurnClient.wave(client, endpoint, count: 20, concurrency: 10, first: 0)
        // And a sleep: Dispatch opens a timerfd the first time a task sleeps (at a priority).
        try await Task.sleep(for: .milliseconds(1))
        try await settle(live)
        let baseline = DescriptorSnapshot.take()
        let baseHandles = await handleCounts(client, server)

        let perWave = Self.connections / Self.waves
        for wave in 1...Self.waves {
            try await ChurnClient.wave(client, endpoint, count: perWave, concurrency: Self.concurrency, first: wave * perWave)
            try await settle(live)
            // Closed descriptors leave /proc/self/fd at once; a close hopping to a loop
            // may still be on its way: wait for it, boundedly, then compare.
            var opened = DescriptorSnapshot.take().opened(since: baseline)
            for _ in 0..<100 where !opened.isEmpty {
                try await Task.sleep(for: .milliseconds(50))
                opened = DescriptorSnapshot.take().opened(since: baseline)
            }
            #expect(opened.isEmpty, "\(backend), after wave \(wave) (\(wave * perWave) connections): \(opened.count) descriptors more than at the start: \(opened.prefix(10).map { "\($0.fd) -> \($0.target)" })")
            var handles = await handleCounts(client, server)
            for _ in 0..<100 where handles != baseHandles {
                try await Task.sleep(for: .milliseconds(50))
                handles = await handleCounts(client, server)
            }
            #expect(handles == baseHandles, "\(backend), after wave \(wave): libuv handles open per loop (client, server) \(handles), at the start \(baseHandles)")
        }
        listener.close()
        await client.shutdown(gracePeriod: .seconds(1))
        await server.shutdown(gracePeriod: .seconds(1))
        #expect(live.count == 0)
    }

    /// Waits until the server has seen every accepted connection close (at most 10 s).
    private func settle(_ live: ChurnEchoServer.Live) async throws {
        for _ in 0..<200 where live.count > 0 {
            try await Task.sleep(for: .milliseconds(50))
        }
        #expect(live.count == 0, "the server still has \(live.count) connections open 10 s after the wave")
    }

    /// The libuv handles open on each loop of the client's and the server's transport
    /// (empty for the other backends, which have no handles).
    private func handleCounts(_ client: any Transport, _ server: any Transport) async -> [[Int?]] {
        var counts: [[Int?]] = []
        for transport in [client, server] {
            if let uv = transport as? UVTransport { counts.append(await uv.openHandleCounts()) }
        }
        return counts
    }
}

/// The server's side: echoes what it reads; at the client's end of stream, shuts its own
/// output down and closes (so the server holds the TIME_WAIT, not the client's ports).
enum ChurnEchoServer {
    /// Connections accepted and not yet closed.
    final class Live: Sendable {
        private let value = Atomic<Int>(0)
        var count: Int { value.load(ordering: .acquiring) }
        func opened() { value.add(1, ordering: .relaxed) }
        func closed() { value.subtract(1, ordering: .releasing) }
    }

    static func serve(_ connection: any Connection, live: Live) {
        live.opened()
        connection.setHandler(Handler(connection, live: live))
        connection.startReading()
    }

    /// `@unchecked Sendable`: its events run on the connection's loop, one at a time;
    /// `connection` is set at init and cleared only there.
    final class Handler: ConnectionHandler, @unchecked Sendable {
        private var connection: (any Connection)?
        private let live: Live

        init(_ connection: any Connection, live: Live) {
            self.connection = connection
            self.live = live
        }

        func connectionDidRead(_ bytes: UnsafeRawBufferPointer) {
            connection?.write(borrowing: bytes, completion: nil)
        }

        func connectionDidReadEnd() {
            guard let connection else { return }
            connection.shutdownOutput { _ in connection.close() }
        }

        func connectionDidClose(error: TransportError?) {
            guard connection != nil else { return }
            connection = nil
            live.closed()
        }
    }
}

/// The client's side of one churned connection, and a wave of them.
enum ChurnClient {
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// Connects, sends 64 bytes, checks their echo, shuts its output down, expects the
    /// server's end of stream with nothing more, and closes.
    static func roundTrip(_ transport: any Transport, _ endpoint: Endpoint, number: Int) async throws {
        let connection = AsyncConnection(try await transport.connect(to: endpoint))
        defer { connection.close() }
        let message = (0..<64).map { UInt8(truncatingIfNeeded: number &* 31 &+ $0) }
        connection.connection.write(message, completion: nil)
        let echo = try await connection.read(exactly: message.count)
        guard echo == message else { throw Failure(description: "connection \(number): the echo differs from what was sent") }
        try await connection.shutdownOutput()
        let rest = try await connection.readToEnd(limit: 1)
        guard rest.isEmpty else { throw Failure(description: "connection \(number): \(rest.count) bytes after the echo") }
    }

    /// `count` round trips on as many connections, `concurrency` at a time.
    static func wave(_ transport: any Transport, _ endpoint: Endpoint, count: Int, concurrency: Int, first: Int) async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            var started = 0
            while started < min(concurrency, count) {
                let number = first + started
                group.addTask { try await roundTrip(transport, endpoint, number: number) }
                started += 1
            }
            while try await group.next() != nil {
                if started < count {
                    let number = first + started
                    group.addTask { try await roundTrip(transport, endpoint, number: number) }
                    started += 1
                }
            }
        }
    }
}

