import CoreMetrics
import Foundation
import InMemoryLogging
import Logging
import MetricsTestKit
import Switchyard
import SwitchyardBackends
import SwitchyardTestSupport
import Testing

/// A backend loaded from a library cannot take a Logger across the C interface: the host
/// logs and counts what it sees there (connects, closes by reason). With the bsd backend
/// exported as a library (`libSwitchyardBSDLoadedFixture.so`, "bsd-loaded").
@Suite("A loaded backend's logs and metrics, on the host's side", .timeLimit(.minutes(1)))
struct LoadedBackendLoggingTests {
    @Test("A loaded backend's connect and a peer's reset are logged and counted by the host")
    func connectAndReset() async throws {
        let backend = try Backends.loadLibrary(at: try Self.library(), into: BackendRegistry())
        let metrics = TestMetrics()
        let handler = InMemoryLogHandler()
        var logger = Logger(label: "test", factory: { _ in handler })
        logger.logLevel = .debug
        let transport = try withMetricsFactory(metrics) {
            try backend.make(TransportConfiguration(eventLoopCount: 1, logger: logger))
        }
        let listener = try await transport.listen(on: Endpoint(host: "127.0.0.1", port: 0))
        let pair = try await ConnectedPair.connect(transport, to: Accepted(listener), echo: false)
        pair.server.reset()
        #expect(try await pair.clientSide.end()?.reason == .reset)
        listener.close()
        await transport.shutdown(gracePeriod: .seconds(1))

        let name = backend.name
        let connected = try #require(handler.entries.first { $0.message == "connected" })
        #expect(connected.level == .debug)
        #expect(connected.metadata["switchyard.backend"] == .string(name))
        let reset = try #require(handler.entries.first { $0.message == "connection reset by peer" })
        #expect(reset.level == .warning)
        #expect(reset.metadata["switchyard.connection_id"] == connected.metadata["switchyard.connection_id"])
        #expect(reset.metadata["switchyard.bytes_received"] == nil, "the host does not see the bytes")
        #expect(try metrics.expectCounter("switchyard_connections_closed_total", [("backend", name), ("reason", "reset")]).totalValue == 1)
        #expect(try metrics.expectTimer("switchyard_connect_duration", [("backend", name)]).values.count == 1)
    }

    /// The fixture library, next to the test binary.
    static func library() throws -> String {
        try FixtureLibrary.bsdLoaded(repository: FileManager.default.currentDirectoryPath)
    }

}
