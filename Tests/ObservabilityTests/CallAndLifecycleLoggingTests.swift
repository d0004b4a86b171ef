import CoreMetrics
import InMemoryLogging
import Logging
import MetricsTestKit
import Switchyard
import SwitchyardMemory
import Synchronization
import Testing

/// The end of every call is logged (debug) and counted by status on both sides; a
/// lifecycle logs its suspend and resume. Over the in-memory backend.
@Suite("Call and lifecycle logs and metrics", .timeLimit(.minutes(1)))
struct CallAndLifecycleLoggingTests {
    @Test("A call's end is logged at debug and counted by role and status on both sides")
    func callsByStatus() async throws {
        let metrics = TestMetrics()
        let handler = InMemoryLogHandler()
        var logger = Logger(label: "test", factory: { _ in handler })
        logger.logLevel = .debug
        let options = CallConfiguration(logger: logger)
        let transport = try MemoryTransport()
        let (server, channel) = try await withMetricsFactory(metrics) {
            let server = try await CallServer.start(transport: transport, on: Endpoint(host: "127.0.0.1", port: 0), options: options) { call in
                for try await message in call.messages { try await call.write(message) }
                return .ok
            }
            let channel = CallChannel(target: server.localAddress, transport: transport)
            return (server, channel)
        }
        let status = try await channel.withCall(options: options) { call in
            try await call.write([1, 2, 3])
            _ = try await call.next()
            try await call.finishSending()
            return await call.status()
        }
        #expect(status.isOK)
        // A call the server refuses to finish in time: cancelled by the client.
        _ = try? await channel.withCall(options: options) { call in
            call.cancel()
            return await call.status()
        }
        try await Task.sleep(for: .milliseconds(200))
        server.close()
        channel.close()
        await transport.shutdown(gracePeriod: .seconds(1))

        #expect(try metrics.expectCounter("switchyard_calls_total", [("role", "client"), ("status", "ok")]).totalValue == 1)
        #expect(try metrics.expectCounter("switchyard_calls_total", [("role", "server"), ("status", "ok")]).totalValue == 1)
        #expect(try metrics.expectCounter("switchyard_calls_total", [("role", "client"), ("status", "cancelled")]).totalValue == 1)
        let ends = handler.entries.filter { $0.message == "call ended" }
        #expect(ends.count >= 3)
        #expect(ends.allSatisfy { $0.level == .debug })
        #expect(ends.contains { $0.metadata["switchyard.call.role"] == "client" && $0.metadata["switchyard.call.status"] == "cancelled" && $0.metadata["switchyard.reason"] != nil })
    }

    @Test("A lifecycle logs its suspend and resume at info and notice")
    func suspendAndResume() async throws {
        let handler = InMemoryLogHandler()
        var logger = Logger(label: "test", factory: { _ in handler })
        logger.logLevel = .debug
        let lifecycle = Lifecycle(gracePeriod: .milliseconds(100), logger: logger)
        await lifecycle.suspend()
        try await lifecycle.resume()
        let lines = handler.entries.map { "\($0.level) \($0.message)" }
        #expect(lines == ["info suspending", "notice suspended", "info resuming", "notice resumed"])
    }

    @Test("A manual monitor logs and counts its changes as the netlink monitor does, in the order observers hear them")
    func manualMonitorChanges() async throws {
        let metrics = TestMetrics()
        let handler = InMemoryLogHandler()
        var logger = Logger(label: "test", factory: { _ in handler })
        logger.logLevel = .debug
        let monitor = withMetricsFactory(metrics) {
            ManualConnectivityMonitor(initial: ConnectivityPath(category: .wifi, interface: "wlan0", addresses: ["10.0.0.2"]), logger: logger)
        }
        let heard = Recorded()
        let observation = monitor.observe { path in
            // The change's log line is written before an observer hears it.
            heard.append("\(path.category) after \(handler.entries.count) line(s)")
        }
        defer { observation.cancel() }
        monitor.report(ConnectivityPath(category: .wifi, interface: "wlan1", addresses: ["10.0.1.2"]))
        monitor.report(ConnectivityPath(category: .wifi, interface: "wlan1", addresses: ["10.0.1.2"]))  // the same: nothing
        monitor.report(ConnectivityPath(category: .cellular, interface: "wwan0", addresses: ["10.64.0.2"]))

        let lines = handler.entries.map { "\($0.level) \($0.message) \($0.metadata["switchyard.connectivity.from"] ?? "-")→\($0.metadata["switchyard.connectivity.to"] ?? "-") \($0.metadata["switchyard.connectivity.interface"] ?? "-")" }
        #expect(lines == ["info network path changed wifi→wifi wlan1", "notice connectivity changed wifi→cellular wwan0"])
        #expect(heard.values == ["wifi after 1 line(s)", "cellular after 2 line(s)"])
        #expect(try metrics.expectCounter("switchyard_connectivity_changes_total", [("monitor", "manual"), ("category", "wifi"), ("kind", "path")]).totalValue == 1)
        #expect(try metrics.expectCounter("switchyard_connectivity_changes_total", [("monitor", "manual"), ("category", "cellular"), ("kind", "category")]).totalValue == 1)
    }
}

/// Strings an observer recorded, from any thread.
private final class Recorded: Sendable {
    private let state = Mutex<[String]>([])
    var values: [String] { state.withLock { $0 } }
    func append(_ value: String) { state.withLock { $0.append(value) } }
}
