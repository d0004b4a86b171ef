import InMemoryLogging
import Logging
import Switchyard
import SwitchyardBackends
import Synchronization
import Testing

/// A transport asks its logger's level at every line, never once for all: a handler may
/// change its level while the transport runs (swift-log allows a global override, as
/// `LogHandler`'s documentation shows), and the transport's lines follow. Over loopback.
@Suite("Transport logs follow a level that changes", .timeLimit(.minutes(1)))
struct LogLevelChangeTests {
    @Test("Lines below the level at first are skipped, and logged once the handler's level drops to debug", arguments: ["bsd", "libuv"])
    func linesFollowTheLevel(backend: String) async throws {
        let records = InMemoryLogHandler()
        let level = SharedLevel(.info)
        let logger = Logger(label: "test", factory: { _ in OverridableLevelLogHandler(records: records, level: level) })
        let transport = try Backends.makeTransport(
            named: backend, configuration: TransportConfiguration(eventLoopCount: 1, logger: logger))
        let listener = try await transport.listen(on: Endpoint(host: "127.0.0.1", port: 0))
        let accepted = Accepted(listener)

        try await Self.connectAndClose(transport, accepted)
        #expect(records.entries.isEmpty, "\(records.entries.map(\.message))")

        level.set(.debug)
        try await Self.connectAndClose(transport, accepted)
        let messages = records.entries.map(\.message.description)
        #expect(messages.filter { $0 == "connected" }.count == 1)
        #expect(messages.filter { $0 == "accepted" }.count == 1)
        #expect(messages.filter { $0 == "connection closed" }.count == 2)

        listener.close()
        await transport.shutdown(gracePeriod: .seconds(1))
    }

    /// One connection, a byte each way, closed by the client; returns once both ends ended.
    private static func connectAndClose(_ transport: any Transport, _ accepted: Accepted) async throws {
        let pair = try await ConnectedPair.connect(transport, to: accepted, echo: true)
        pair.client.write([1], completion: nil)
        try await pair.clientSide.received(1)
        pair.client.close()
        _ = try await pair.serverSide.end()
        _ = try await pair.clientSide.end()
    }
}

/// A level every copy of a handler shares, as a global override would be.
private final class SharedLevel: Sendable {
    private let value: Mutex<Logger.Level>
    init(_ level: Logger.Level) { value = Mutex(level) }
    var level: Logger.Level { value.withLock { $0 } }
    func set(_ level: Logger.Level) { value.withLock { $0 = level } }
}

/// Records into `records`, at the shared level of the moment.
private struct OverridableLevelLogHandler: LogHandler {
    var records: InMemoryLogHandler
    let shared: SharedLevel

    init(records: InMemoryLogHandler, level: SharedLevel) {
        self.records = records
        self.records.logLevel = .trace
        self.shared = level
    }

    var logLevel: Logger.Level {
        get { shared.level }
        set { shared.set(newValue) }
    }
    var metadata: Logger.Metadata {
        get { records.metadata }
        set { records.metadata = newValue }
    }
    var metadataProvider: Logger.MetadataProvider? {
        get { records.metadataProvider }
        set { records.metadataProvider = newValue }
    }
    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { records[metadataKey: key] }
        set { records[metadataKey: key] = newValue }
    }
    func log(event: LogEvent) { records.log(event: event) }
}
