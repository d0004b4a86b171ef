import Foundation
import Logging
import Metrics
import MetricsTestKit
import Switchyard
import SwitchyardBackends
import SwitchyardNetlink
import Synchronization

/// A new user's program: it bootstraps swift-log with a
/// capturing handler and swift-metrics with `TestMetrics`, hands a logger to a transport
/// and to the netlink monitor, and makes four things happen for real: a connect, a reset
/// (the server aborts the connection: `SO_LINGER` 0, so the kernel sends a RST), a stall
/// (nft drops the port's packets while data is in flight, with a 2 s stall timeout) and
/// a connectivity change (the default route's link goes down, and up again). Then it
/// prints every log line and metric it captured as JSON lines, and exits 0.
///
/// Run it as root inside a network namespace of its own (ObservabilityTests makes one):
/// it changes that namespace's firewall and links.
///
///     observed-app BACKEND INTERFACE GATEWAY [kernel|monitor]
///
/// `INTERFACE` carries the namespace's default route, via `GATEWAY`. `monitor` turns the
/// kernel's stall detection off (``TransportConfiguration/kernelStallDetection``), so the
/// backend's own monitor (bsd's TCP_INFO sweep) must find the stall.
@main
struct ObservedApp {
    static func main() async {
        let arguments = CommandLine.arguments
        guard arguments.count == 4 || (arguments.count == 5 && ["kernel", "monitor"].contains(arguments[4])) else {
            FileHandle.standardError.write(Data("usage: observed-app BACKEND INTERFACE GATEWAY [kernel|monitor]\n".utf8))
            exit(2)
        }
        LoggingSystem.bootstrap { label in CapturingLogHandler(label: label) }
        let metrics = TestMetrics()
        MetricsSystem.bootstrap(metrics)
        do {
            try await run(
                backend: arguments[1], interface: arguments[2], gateway: arguments[3],
                kernelStallDetection: arguments.count == 4 || arguments[4] == "kernel")
        } catch {
            FileHandle.standardError.write(Data("observed-app failed: \(error)\n".utf8))
            printCaptured(metrics)
            exit(1)
        }
        printCaptured(metrics)
    }

    static func run(backend: String, interface: String, gateway: String, kernelStallDetection: Bool) async throws {
        var logger = Logger(label: "observed-app")
        logger.logLevel = .debug
        let transport = try Backends.makeTransport(
            named: backend,
            configuration: TransportConfiguration(
                eventLoopCount: 1, stallTimeout: .seconds(2), kernelStallDetection: kernelStallDetection, logger: logger))
        let accepted = AcceptedQueue()
        let listener = try await transport.listen(on: Endpoint(host: "127.0.0.1", port: 0))
        let port = listener.localAddress.port
        listener.acceptConnections { accepted.push($0) }

        // A connect, then a reset: the server aborts its end.
        let first = try await transport.connect(to: Endpoint(host: "127.0.0.1", port: port))
        let firstEnd = Ending()
        first.setHandler(firstEnd)
        first.startReading()
        let firstServer = try await accepted.next()
        firstServer.setHandler(Ending())
        firstServer.reset()
        let reset = try await firstEnd.wait(timeout: .seconds(10))
        guard reset?.reason == .reset else { throw Failure("the reset ended the client with \(String(describing: reset))") }
        say("reset: \(String(describing: reset))")

        // A stall: every packet of the port dropped while data is in flight.
        let second = try await transport.connect(to: Endpoint(host: "127.0.0.1", port: port))
        let secondEnd = Ending()
        second.setHandler(secondEnd)
        second.startReading()
        let secondServer = try await accepted.next()
        secondServer.setHandler(Ending())
        try command("/usr/sbin/nft", "add", "table", "inet", "observed")
        try command("/usr/sbin/nft", "add", "chain", "inet", "observed", "in", "{ type filter hook input priority 0; }")
        try command("/usr/sbin/nft", "add", "chain", "inet", "observed", "out", "{ type filter hook output priority 0; }")
        try command("/usr/sbin/nft", "add", "rule", "inet", "observed", "in", "tcp", "dport", "\(port)", "drop")
        try command("/usr/sbin/nft", "add", "rule", "inet", "observed", "in", "tcp", "sport", "\(port)", "drop")
        second.write(Array(repeating: 7, count: 64 * 1024), completion: nil)
        let stall = try await secondEnd.wait(timeout: .seconds(20))
        // The server's end goes before the path comes back (it may have stalled too, as
        // an idle end under keepalive does): its next probe must not meet the client's
        // kernel, which would answer with a reset.
        secondServer.close()
        try await Task.sleep(for: .milliseconds(100))
        try command("/usr/sbin/nft", "delete", "table", "inet", "observed")
        guard stall?.reason == .stalled else { throw Failure("the stall ended the client with \(String(describing: stall))") }
        say("stall: \(String(describing: stall))")

        // A connectivity change: the default route's link goes down, then comes back.
        let monitor = try NetlinkConnectivityMonitor(logger: logger)
        let paths = PathLog()
        let observation = monitor.observe { paths.append($0) }
        guard monitor.current.category == .wifi else { throw Failure("the monitor started with \(monitor.current), not wifi") }
        try command("/usr/sbin/ip", "link", "set", interface, "down")
        try await paths.wait(for: .none, timeout: .seconds(10))
        try command("/usr/sbin/ip", "link", "set", interface, "up")
        try command("/usr/sbin/ip", "route", "replace", "default", "via", gateway, "dev", interface)
        try await paths.wait(for: .wifi, timeout: .seconds(10))
        observation.cancel()
        monitor.close()
        say("connectivity: \(paths.categories)")

        listener.close()
        await transport.shutdown(gracePeriod: .seconds(1))
    }

    static func say(_ line: String) {
        FileHandle.standardError.write(Data((line + "\n").utf8))
    }

    /// Runs a command of the namespace's network setup; throws if it fails.
    static func command(_ path: String, _ arguments: String...) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw Failure("\(path) \(arguments.joined(separator: " ")) exited with \(process.terminationStatus)")
        }
    }

    /// Prints the captured log lines and metrics, one JSON object a line.
    static func printCaptured(_ metrics: TestMetrics) {
        var lines: [CapturedLine] = CapturingLogHandler.captured.withLock { $0 }.map { .log($0) }
        for counter in metrics.counters {
            lines.append(.metric(kind: "counter", label: counter.label, dimensions: counter.dimensions, value: Double(counter.totalValue)))
        }
        for meter in metrics.meters {
            lines.append(.metric(kind: "meter", label: meter.label, dimensions: meter.dimensions, value: meter.lastValue ?? 0))
        }
        for recorder in metrics.recorders {
            lines.append(.metric(kind: "gauge", label: recorder.label, dimensions: recorder.dimensions, value: recorder.lastValue ?? 0))
        }
        for timer in metrics.timers {
            lines.append(.metric(
                kind: "timer", label: timer.label, dimensions: timer.dimensions, value: Double(timer.lastValue ?? -1),
                count: timer.values.count))
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        for line in lines {
            if let data = try? encoder.encode(line) { print(String(decoding: data, as: UTF8.self)) }
        }
    }
}

/// One printed line: a log line or a metric.
struct CapturedLine: Encodable {
    var type: String
    var level: String?
    var message: String?
    var label: String?
    var metadata: [String: String]?
    var kind: String?
    var dimensions: [String: String]?
    var value: Double?
    var count: Int?

    static func log(_ entry: CapturingLogHandler.Entry) -> CapturedLine {
        CapturedLine(type: "log", level: entry.level.rawValue, message: entry.message, label: entry.label, metadata: entry.metadata)
    }

    static func metric(kind: String, label: String, dimensions: [(String, String)], value: Double, count: Int? = nil) -> CapturedLine {
        CapturedLine(
            type: "metric", label: label, kind: kind,
            dimensions: Dictionary(dimensions, uniquingKeysWith: { $1 }), value: value, count: count)
    }
}

/// The log handler the program bootstraps: it keeps every line (at its logger's level).
struct CapturingLogHandler: LogHandler {
    struct Entry: Sendable {
        var label: String
        var level: Logger.Level
        var message: String
        var metadata: [String: String]
    }
    static let captured = Mutex<[Entry]>([])

    let label: String
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .info

    init(label: String) { self.label = label }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        var merged = metadata
        if let extra = event.metadata { merged.merge(extra) { $1 } }
        let entry = Entry(
            label: label, level: event.level, message: "\(event.message)",
            metadata: merged.mapValues { "\($0)" })
        Self.captured.withLock { $0.append(entry) }
    }
}

/// Accepted connections, handed to whoever waits.
final class AcceptedQueue: Sendable {
    private let queue = Mutex<[any Connection]>([])

    func push(_ connection: any Connection) {
        queue.withLock { $0.append(connection) }
    }

    func next(timeout: Duration = .seconds(10)) async throws -> any Connection {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let connection = queue.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) { return connection }
            try await Task.sleep(for: .milliseconds(5))
        }
        throw Failure("no connection was accepted within \(timeout)")
    }
}

/// A handler that reads and drops, and remembers how its connection ended.
final class Ending: ConnectionHandler {
    private let end = Mutex<TransportError??>(nil)

    func connectionDidRead(_ bytes: UnsafeRawBufferPointer) {}
    func connectionDidReadEnd() {}
    func connectionDidClose(error: TransportError?) {
        end.withLock { $0 = .some(error) }
    }

    /// The end's error (nil after a local close); throws if it did not end in time.
    func wait(timeout: Duration) async throws -> TransportError? {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let ended = end.withLock({ $0 }) { return ended }
            try await Task.sleep(for: .milliseconds(10))
        }
        throw Failure("the connection did not end within \(timeout)")
    }
}

/// The paths a monitor reported.
final class PathLog: Sendable {
    private let paths = Mutex<[ConnectivityPath]>([])

    func append(_ path: ConnectivityPath) {
        paths.withLock { $0.append(path) }
    }

    var categories: [ConnectivityCategory] { paths.withLock { $0.map(\.category) } }

    func wait(for category: ConnectivityCategory, timeout: Duration) async throws {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if paths.withLock({ $0.last?.category == category }) { return }
            try await Task.sleep(for: .milliseconds(10))
        }
        throw Failure("the monitor did not report \(category) within \(timeout) (it reported \(categories))")
    }
}

struct Failure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
