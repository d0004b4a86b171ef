// churn: opens, echoes and closes many connections in waves on each backend, and prints
// after each wave what the process holds: open descriptors, libuv handles, resident memory.
//
//     churn [--backends bsd,libuv,memory,simulation] [--connections 10000] [--waves 10]
//           [--concurrency 100] [--size 64] [--no-header]
//
// Per backend: a server transport and a client transport of that backend, two event loops
// each, in this process. The server echoes and, at the client's end of stream, shuts its
// output down and closes (so the TIME_WAIT sockets are the server's, and the client's
// ephemeral ports do not run out). Each client connection connects, sends SIZE bytes,
// checks the echo byte for byte, shuts its output down, expects the server's end of
// stream, and closes; CONCURRENCY connections at a time. After each wave the program
// waits (at most 10 s) until the server saw every connection close, and then (at most
// 5 s) until the descriptors and handles are back at the baseline, and measures:
//
// - fds: entries of /proc/self/fd (this directory's own descriptor left out), and the
//   difference to the baseline taken after a warm-up wave of 20 connections;
// - uv handles: `UVTransport.openHandleCounts()` (uv_walk) summed over both transports'
//   loops (libuv only; "-" otherwise);
// - RSS: VmRSS and RssAnon of /proc/self/status, in KiB;
// - the wave's wall time and connections per second (connects, echoes and closes, until
//   the server saw every connection close);
// - settled ms: how long after that the descriptors and handles took to be back at the
//   baseline (a close hops to its connection's loop), or "not in 5 s" (a leak).
//
// Exits 1 on any failed connection, wrong echo, or a server that kept connections open.
// `Benchmarks/churn` builds it in release mode and runs it; see Benchmarks/README.md.

import Glibc
import Switchyard
import SwitchyardBackends
import SwitchyardUV
import Synchronization

struct Settings {
    var backends = ["bsd", "libuv", "memory", "simulation"]
    var connections = 10_000
    var waves = 10
    var concurrency = 100
    var size = 64
    var header = true

    static func parse(_ arguments: [String]) -> Settings {
        var settings = Settings()
        var index = 0
        func value(_ name: String) -> String {
            index += 1
            guard index < arguments.count else { fail("\(name) needs a value") }
            return arguments[index]
        }
        func number(_ name: String, _ range: ClosedRange<Int>) -> Int {
            let text = value(name)
            guard let number = Int(text), range.contains(number) else {
                fail("\(name) \(text) is not a number in \(range.lowerBound)...\(range.upperBound)")
            }
            return number
        }
        while index < arguments.count {
            switch arguments[index] {
            case "--backends":
                settings.backends = value("--backends").split(separator: ",").map(String.init)
                for name in settings.backends where !Backends.registry.names.contains(name) {
                    fail("--backends: no backend '\(name)' (registered: \(Backends.registry.names.joined(separator: ", ")))")
                }
            case "--connections": settings.connections = number("--connections", 1...1_000_000)
            case "--waves": settings.waves = number("--waves", 1...10_000)
            case "--concurrency": settings.concurrency = number("--concurrency", 1...10_000)
            case "--size": settings.size = number("--size", 1...(1 << 20))
            case "--no-header": settings.header = false
            case "-h", "--help":
                print("usage: churn [--backends bsd,libuv,memory,simulation] [--connections N] [--waves W] [--concurrency C] [--size BYTES] [--no-header]")
                exit(0)
            default:
                fail("unknown argument '\(arguments[index])' (see --help)")
            }
            index += 1
        }
        guard settings.connections >= settings.waves else { fail("--connections must be at least --waves") }
        return settings
    }
}

@main
struct Churn {
    static func main() async {
        let settings = Settings.parse(Array(CommandLine.arguments.dropFirst()))
        if settings.header {
        print("churn: \(settings.connections) connections in \(settings.waves) waves, \(settings.concurrency) at a time, \(settings.size) B echoed each; backends \(settings.backends.joined(separator: ", "))")
        print("| backend | wave | connections | fds | fds - baseline | uv handles | RSS KiB | RssAnon KiB | wave s | conns/s | settled ms |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        }
        fflush(nil)
        var failed = false
        for backend in settings.backends {
            do {
                failed = try await run(backend, settings) || failed
            } catch {
                writeStandardError("churn: \(backend): \(error)\n")
                failed = true
            }
        }
        exit(failed ? 1 : 0)
    }

    /// Runs every wave on `backend`; whether a wave ended with more descriptors or handles
    /// than the baseline.
    static func run(_ backend: String, _ settings: Settings) async throws -> Bool {
        let configuration = TransportConfiguration(eventLoopCount: 2)
        let server = try Backends.makeTransport(named: backend, configuration: configuration)
        let client = try Backends.makeTransport(named: backend, configuration: configuration)
        let live = Live()
        let listener = try await server.listen(on: Endpoint(host: "127.0.0.1", port: 0))
        listener.acceptConnections { EchoHandler.serve($0, live: live) }
        let endpoint = Endpoint(host: "127.0.0.1", port: listener.localAddress.port)

        // A warm-up wave first, so that what a transport sets up once per loop, lazily (libuv's
        // reserved /dev/null descriptor, opened at a loop's first accept), is in the
        // baseline, not counted as a leak.
        var warmUp = settings
        warmUp.concurrency = 10
        try await runWave(client, endpoint, count: 20, first: -20, settings: warmUp)
        // And a sleep: Dispatch opens a timerfd the first time a task sleeps (at a priority).
        try await Task.sleep(for: .milliseconds(1))
        try await settle(live)
        let baseFDs = descriptorCount()
        let baseHandles = await handles(client, server)
        let baseMemory = memory()
        print("| \(backend) | 0 (baseline) | 0 | \(baseFDs) | 0 | \(baseHandles.map(String.init) ?? "-") | \(baseMemory.rss) | \(baseMemory.anon) | - | - | - |")
        fflush(nil)

        var leaked = false
        var done = 0
        let clock = ContinuousClock()
        for wave in 1...settings.waves {
            let count = settings.connections / settings.waves + (wave <= settings.connections % settings.waves ? 1 : 0)
            let start = clock.now
            try await runWave(client, endpoint, count: count, first: done, settings: settings)
            try await settle(live)
            let elapsed = (clock.now - start).seconds
            done += count
            // A close hops to the connection's loop: the last descriptors of a wave close
            // just after its last task ended. Wait for them (and the handles), at most 5 s.
            let closing = clock.now
            var fds = descriptorCount()
            var uv = await handles(client, server)
            while fds != baseFDs || uv != baseHandles, clock.now - closing < .seconds(5) {
                try await Task.sleep(for: .milliseconds(10))
                fds = descriptorCount()
                uv = await handles(client, server)
            }
            let settled = fds == baseFDs && uv == baseHandles ? "\(Int(((clock.now - closing).seconds * 1000).rounded()))" : "not in 5 s"
            let memory = memory()
            if fds != baseFDs || uv != baseHandles { leaked = true }
            print("| \(backend) | \(wave) | \(done) | \(fds) | \(fds - baseFDs) | \(uv.map(String.init) ?? "-") | \(memory.rss) | \(memory.anon) | \(format(elapsed)) | \(Int((Double(count) / elapsed).rounded())) | \(settled) |")
            fflush(nil)
        }
        listener.close()
        await client.shutdown(gracePeriod: .seconds(1))
        await server.shutdown(gracePeriod: .seconds(1))
        if leaked {
            writeStandardError("churn: \(backend): descriptors or handles did not return to the baseline after every wave\n")
        }
        return leaked
    }

    /// Waits until the server has seen every accepted connection close (at most 10 s).
    static func settle(_ live: Live) async throws {
        for _ in 0..<200 where live.count > 0 {
            try await Task.sleep(for: .milliseconds(50))
        }
        if live.count > 0 { throw Failure(description: "the server still has \(live.count) connections open 10 s after the wave") }
    }

    /// Open libuv handles over both transports' loops, nil for other backends.
    static func handles(_ client: any Transport, _ server: any Transport) async -> Int? {
        var total: Int?
        for transport in [client, server] {
            guard let uv = transport as? UVTransport else { continue }
            total = (total ?? 0) + (await uv.openHandleCounts()).reduce(0) { $0 + ($1 ?? 0) }
        }
        return total
    }

    static func runWave(_ transport: any Transport, _ endpoint: Endpoint, count: Int, first: Int, settings: Settings) async throws {
        let size = settings.size
        try await withThrowingTaskGroup(of: Void.self) { group in
            var started = 0
            func startNext() {
                let number = first + started
                group.addTask { try await roundTrip(transport, endpoint, number: number, size: size) }
                started += 1
            }
            while started < min(settings.concurrency, count) { startNext() }
            while try await group.next() != nil {
                if started < count { startNext() }
            }
        }
    }

    /// One churned connection: connect, send, check the echo, shut down, expect the end.
    static func roundTrip(_ transport: any Transport, _ endpoint: Endpoint, number: Int, size: Int) async throws {
        let connection = AsyncConnection(try await transport.connect(to: endpoint))
        defer { connection.close() }
        var message = [UInt8](repeating: 0, count: size)
        var state = UInt32(truncatingIfNeeded: number) &* 2_654_435_761 | 1
        for index in message.indices {
            state ^= state << 13
            state ^= state >> 17
            state ^= state << 5
            message[index] = UInt8(truncatingIfNeeded: state)
        }
        connection.connection.write(message, completion: nil)
        let echo = try await connection.read(exactly: size)
        guard echo == message else { throw Failure(description: "connection \(number): the echo differs from what was sent") }
        try await connection.shutdownOutput()
        let rest = try await connection.readToEnd(limit: 1)
        guard rest.isEmpty else { throw Failure(description: "connection \(number): \(rest.count) bytes after the echo") }
    }
}

struct Failure: Error, CustomStringConvertible {
    var description: String
}

/// Connections accepted and not yet closed.
final class Live: Sendable {
    private let value = Atomic<Int>(0)
    var count: Int { value.load(ordering: .acquiring) }
    func opened() { value.add(1, ordering: .relaxed) }
    func closed() { value.subtract(1, ordering: .releasing) }
}

/// Echoes; at the peer's end of stream shuts its output down and closes.
///
/// `@unchecked Sendable`: its events run on the connection's loop, one at a time, and
/// `connection` is set at init and cleared only there.
final class EchoHandler: ConnectionHandler, @unchecked Sendable {
    private var connection: (any Connection)?
    private let live: Live

    static func serve(_ connection: any Connection, live: Live) {
        live.opened()
        connection.setHandler(EchoHandler(connection, live: live))
        connection.startReading()
    }

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

/// Entries of /proc/self/fd, less the directory's own descriptor.
func descriptorCount() -> Int {
    guard let directory = opendir("/proc/self/fd") else { return -1 }
    defer { closedir(directory) }
    var count = 0
    while let entry = readdir(directory) {
        if entry.pointee.d_name.0 != 0x2e { count += 1 }  // not "." or ".."
    }
    return count - 1
}

/// VmRSS and RssAnon of /proc/self/status, in KiB.
func memory() -> (rss: Int, anon: Int) {
    let fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return (-1, -1) }
    defer { close(fd) }
    var buffer = [UInt8](repeating: 0, count: 8192)
    let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
    guard count > 0 else { return (-1, -1) }
    var rss = -1, anon = -1
    for line in String(decoding: buffer[..<count], as: UTF8.self).split(separator: "\n") {
        let fields = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
        guard fields.count >= 2 else { continue }
        if fields[0] == "VmRSS:" { rss = Int(fields[1]) ?? -1 }
        if fields[0] == "RssAnon:" { anon = Int(fields[1]) ?? -1 }
    }
    return (rss, anon)
}

func format(_ seconds: Double) -> String {
    let hundredths = Int((seconds * 100).rounded())
    let fraction = hundredths % 100
    return "\(hundredths / 100).\(fraction < 10 ? "0" : "")\(fraction)"
}

extension Duration {
    var seconds: Double {
        let (s, attoseconds) = components
        return Double(s) + Double(attoseconds) / 1e18
    }
}

func fail(_ message: String) -> Never {
    writeStandardError("churn: error: \(message)\n")
    exit(2)
}

/// Writes straight to descriptor 2 (the C `stderr` global is not concurrency-safe).
func writeStandardError(_ text: String) {
    var text = text
    text.withUTF8 { bytes in
        var offset = 0
        while offset < bytes.count {
            let n = write(2, bytes.baseAddress! + offset, bytes.count - offset)
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return }
            offset += n
        }
    }
}
