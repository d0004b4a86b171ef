import CoreMetrics
import InMemoryLogging
import Logging
import MetricsTestKit
import Switchyard
import SwitchyardBackendKit
import SwitchyardBackends
import Synchronization
import Testing

/// What a transport logs and counts, through a logger in its configuration and the metrics
/// factory of the task that made it (`withMetricsFactory`, so nothing is bootstrapped for
/// the whole test process). Over loopback (and memory).
@Suite("Transport logs and metrics", .timeLimit(.minutes(1)))
struct TransportObservabilityTests {
    /// A transport whose logger keeps every line at debug and above, with its metrics in
    /// `metrics`.
    static func make(_ backend: String, metrics: TestMetrics, stallTimeout: Duration? = nil) throws -> (any Transport, InMemoryLogHandler) {
        let handler = InMemoryLogHandler()
        var logger = Logger(label: "test", factory: { _ in handler })
        logger.logLevel = .debug
        let configuration = TransportConfiguration(eventLoopCount: 1, stallTimeout: stallTimeout, logger: logger)
        let transport = try withMetricsFactory(metrics) {
            try Backends.makeTransport(named: backend, configuration: configuration)
        }
        return (transport, handler)
    }

    static func endpoint(_ backend: String) -> Endpoint {
        Endpoint(host: "127.0.0.1", port: 0)
    }

    @Test("A peer's reset is logged as a warning and counted as closed with reason reset", arguments: ["bsd", "libuv"])
    func resetIsLoggedAndCounted(backend: String) async throws {
        let metrics = TestMetrics()
        let (transport, log) = try Self.make(backend, metrics: metrics)
        let listener = try await transport.listen(on: Self.endpoint(backend))
        let pair = try await ConnectedPair.connect(transport, to: Accepted(listener), echo: false)
        let client = pair.client
        pair.server.reset()
        let error = try await pair.clientSide.end()
        #expect(error?.reason == .reset)
        listener.close()
        await transport.shutdown(gracePeriod: .seconds(1))

        let closed = try metrics.expectCounter("switchyard_connections_closed_total", [("backend", backend), ("reason", "reset")])
        #expect(closed.totalValue == 1)
        // The server's own end was a local reset.
        let local = try metrics.expectCounter("switchyard_connections_closed_total", [("backend", backend), ("reason", "local")])
        #expect(local.totalValue == 1)

        let warnings = log.entries.filter { $0.level == .warning }
        #expect(warnings.map(\.message.description) == ["connection reset by peer"])
        let warning = try #require(warnings.first)
        #expect(warning.metadata["switchyard.backend"] == .string(backend))
        #expect(warning.metadata["switchyard.reason"] == "reset")
        #expect(warning.metadata["switchyard.peer"] == "\(client.remoteAddress)")
        #expect(warning.metadata["switchyard.local"] == "\(client.localAddress)")
        #expect(warning.metadata["switchyard.connection_id"] != nil)
        // The same connection id on its connect line.
        let connected = try #require(log.entries.first { $0.message == "connected" })
        #expect(connected.metadata["switchyard.connection_id"] == warning.metadata["switchyard.connection_id"])
    }

    @Test("A plain echo run logs nothing at info or above, and counts its opens, closes and bytes", arguments: ["bsd", "libuv", "memory", "simulation"])
    func plainEchoIsQuiet(backend: String) async throws {
        let metrics = TestMetrics()
        let (transport, log) = try Self.make(backend, metrics: metrics)
        let listener = try await transport.listen(on: Self.endpoint(backend))
        let pair = try await ConnectedPair.connect(transport, to: Accepted(listener), echo: true)
        let message = Array(repeating: UInt8(42), count: 10_000)
        pair.client.write(message, completion: nil)
        try await pair.clientSide.received(message.count)
        pair.client.close()
        _ = try await pair.serverSide.end()
        _ = try await pair.clientSide.end()
        listener.close()
        await transport.shutdown(gracePeriod: .seconds(1))

        #expect(log.entries.filter { $0.level >= .info }.isEmpty, "\(log.entries.filter { $0.level >= .info })")
        let messages = log.entries.map(\.message.description)
        #expect(messages.filter { $0 == "connected" }.count == 1)
        #expect(messages.filter { $0 == "accepted" }.count == 1)
        #expect(messages.filter { $0 == "connection closed" }.count == 2)

        let b = ("backend", backend)
        #expect(try metrics.expectCounter("switchyard_connections_opened_total", [b, ("direction", "outbound")]).totalValue == 1)
        #expect(try metrics.expectCounter("switchyard_connections_opened_total", [b, ("direction", "inbound")]).totalValue == 1)
        // Both ends closed: the client locally, the server at the client's end of stream
        // (its handler closes it: a local close too).
        #expect(try metrics.expectCounter("switchyard_connections_closed_total", [b, ("reason", "local")]).totalValue == 2)
        // Each end sent and received the message once.
        #expect(try metrics.expectCounter("switchyard_bytes_sent_total", [b]).totalValue == 2 * Int64(message.count))
        #expect(try metrics.expectCounter("switchyard_bytes_received_total", [b]).totalValue == 2 * Int64(message.count))
        #expect(try metrics.expectMeter("switchyard_open_connections", [b]).lastValue == 0)
        #expect(try metrics.expectTimer("switchyard_connect_duration", [b]).values.count == 1)
    }

    @Test("A refused connect is logged at debug and counted as a connect failure with its reason", arguments: ["bsd", "libuv"])
    func refusedConnect(backend: String) async throws {
        let metrics = TestMetrics()
        let (transport, log) = try Self.make(backend, metrics: metrics)
        // A port nobody listens on: listen, read the port, close.
        let listener = try await transport.listen(on: Self.endpoint(backend))
        let endpoint = listener.localAddress
        listener.close()
        await #expect(throws: TransportError.self) { try await transport.connect(to: endpoint) }
        await transport.shutdown(gracePeriod: .seconds(1))
        #expect(try metrics.expectCounter("switchyard_connect_failures_total", [("backend", backend), ("reason", "refused")]).totalValue == 1)
        let line = try #require(log.entries.first { $0.message == "connect failed" })
        #expect(line.level == .debug)
        #expect(line.metadata["switchyard.reason"] == "refused")
        #expect(line.metadata["switchyard.peer"] == "\(endpoint)")
    }

    @Test("While a metrics backend records, the bytes queued behind a peer that does not read are sampled as buffered bytes", arguments: ["bsd", "libuv"])
    func bufferedBytesAreSampled(backend: String) async throws {
        let metrics = TestMetrics()
        let (transport, _) = try Self.make(backend, metrics: metrics)
        let listener = try await transport.listen(on: Self.endpoint(backend))
        let accepted = Accepted(listener)
        let client = try await transport.connect(to: listener.localAddress)
        client.setHandler(Recorder())
        let server = try await accepted.next()
        server.setHandler(Recorder())  // never reads: the kernel's buffers fill, the rest queues
        client.write(Array(repeating: 1, count: 32 << 20), completion: nil)
        let gauge = try metrics.expectGauge("switchyard_buffered_bytes", [("backend", backend)])
        let deadline = ContinuousClock.now + .seconds(5)
        while (gauge.lastValue ?? 0) == 0, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(100))
        }
        let sampled = gauge.lastValue ?? 0
        #expect(sampled > 0 && sampled <= Double(32 << 20), "sampled \(sampled)")
        client.close()
        server.close()
        listener.close()
        await transport.shutdown(gracePeriod: .seconds(1))
    }

    @Test("A transport's configuration compares and hashes equal whatever its logger")
    func configurationEqualityIgnoresTheLogger() {
        var logger = Logger(label: "other", factory: { _ in InMemoryLogHandler() })
        logger.logLevel = .trace
        let plain = TransportConfiguration(stallTimeout: .seconds(3))
        let logged = TransportConfiguration(stallTimeout: .seconds(3), logger: logger)
        #expect(plain == logged)
        #expect(plain.hashValue == logged.hashValue)
        #expect(plain != TransportConfiguration(stallTimeout: .seconds(4), logger: logger))
    }
}
