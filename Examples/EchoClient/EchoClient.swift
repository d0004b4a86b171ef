// echo-client: drives an echo server and checks every echoed byte.
//
//     echo-client [--backend NAME] [--backend-library PATH ...] [--host HOST]
//                 [--port PORT | --path PATH] [--count N] [--size BYTES] [--concurrency C]
//                 [--mode raw | --mode framed [--flow-control on|off]]
//                 [--tls [--tls-ca PEM] [--tls-server-name NAME] [--tls-cert PEM --tls-key PEM]]
//
// With `--tls` every connection speaks TLS (SwitchyardTLS's `TLSTransport` over the chosen
// backend): the server's certificate must lead to the system's trust store or to
// `--tls-ca`, and name `--tls-server-name` (else --host), which is also sent as SNI.
// `--tls-cert` and `--tls-key` give a client certificate to a server that asks for one.
// A handshake or certificate failure fails the connect, with OpenSSL's reason.
//
// Opens `concurrency` connections; each does `count` sequential round trips: it writes
// one message of `size` bytes, reads back exactly `size` bytes, and compares them with
// what it sent. Every message has its own deterministic pattern (seeded by connection
// and message number), so an echo from the wrong message or connection is caught. Raw
// mode (the default) works against any raw TCP echo server.
//
// Framed mode talks to `echo-server --mode framed`: each connection is one call on a
// CallChannel, each round trip sends one message and waits for the echoed message (with
// `--flow-control on` asking for exactly one message per round trip); then the client
// finishes sending and expects the call to end with status OK. Against a raw echo server
// the messages come back intact (a raw echo of a frame is the same frame) but no status
// does: the call ends with `unavailable`, and the client says so.
//
// With `--path`, it connects to a Unix-domain socket path instead (for a backend of
// socket paths, such as the `unix` backend of Examples/UnixBackend).
//
// Prints a summary; exits 1 on any error or mismatch. Latency percentiles come from an
// HdrHistogram (RunStatistics.swift). Runs longer than 2 s show a progress line on
// standard error (ProgressLine.swift). `--json` prints the report as one JSON object
// instead (its schema: JSONReport.swift, and `echo-client --help`).

import ArgumentParser
import Glibc
import Switchyard
import SwitchyardCalls
import SwitchyardBackends
import ToolSupport
import Synchronization

@main
struct EchoClient: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "echo-client",
        abstract: "Sends messages to a TCP echo server over a Switchyard backend and checks the echoes.",
        discussion: """
            Prints a summary: messages, bytes, time, throughput (echoed bytes), and the \
            p50 and p99 round-trip latency (from an HdrHistogram, within 0.1%). Exits 1 on \
            any error or mismatched byte. From 2 s into a run, a progress line on standard \
            error (rewritten every second on a terminal, a line every 5 s otherwise) gives \
            the messages done, the rate and the errors so far.

            With --json, standard output is one JSON object at the end (also after a \
            failure; the exit status is the same): schemaVersion (1), ok, failure (when \
            not ok), backend, mode, flowControl (framed), endpoint, connections, \
            messagesPerConnection, messageSizeBytes, messages, bytes, durationSeconds, \
            messagesPerSecond, throughputMiBPerSecond, latency {p50Microseconds, \
            p90Microseconds, p99Microseconds, p999Microseconds, maxMicroseconds}, errors \
            (counts by TransportError code; badEcho for a wrong echo), errorCount, \
            reconnects (with --reconnect), and tls (true with --tls). The lines --reconnect prints go to standard \
            error instead.
            """)

    static let maximumSize = 64 * 1024 * 1024

    @OptionGroup var backendOptions: BackendOptions

    @Option(help: "The echo server's host.")
    var host = "127.0.0.1"

    @Option(parsing: .unconditional, help: "The echo server's port.")
    var port = 7007

    @Option(help: "Connect to this Unix-domain socket path (unix:PATH) instead of --host and --port, for a backend of socket paths such as 'unix'.")
    var path: String?

    @Option(parsing: .unconditional, help: "Round trips per connection.")
    var count = 1000

    @Option(parsing: .unconditional, help: "Bytes per message (1 ... 64 MiB).")
    var size = 64

    @Option(parsing: .unconditional, help: "Connections, run at once.")
    var concurrency = 1

    @Option(help: "What the server echoes: 'raw' bytes, or 'framed' messages of a call (echo-server --mode framed).")
    var mode: EchoMode = .raw

    @Option(name: .customLong("flow-control"), help: "Framed mode only: 'on' asks for each echoed message before it is delivered; 'off' takes messages as they arrive.")
    var flowControl: FlowControlSetting = .off

    @Option(name: .customLong("event-loops"), parsing: .unconditional, help: "Event loop threads (default: one per core).")
    var eventLoops: Int?

    @Option(name: .customLong("connect-timeout"), parsing: .unconditional, help: "Seconds each connect may take.")
    var connectTimeout = 10.0

    @Flag(help: "Framed mode only: follow the network (rtnetlink); when a call fails with unavailable (the network changed, the connection broke or stalled), say so and go on with a new call, for up to --reconnect-timeout seconds per outage.")
    var reconnect = false

    @Option(name: .customLong("reconnect-timeout"), parsing: .unconditional, help: "With --reconnect: seconds to keep trying after a failure.")
    var reconnectTimeout = 30.0

    @Flag(help: "Print the report as one JSON object on standard output, for machines (its fields: above).")
    var json = false

    @OptionGroup var tlsOptions: TLSClientOptions

    func validate() throws {
        try ToolValidation.check(port: port, listening: false)
        try ToolValidation.check(host: host)
        try ToolValidation.check(path: path)
        guard count >= 1 else {
            throw ValidationError("--count \(count) is out of range: each connection sends at least 1 message")
        }
        guard (1...Self.maximumSize).contains(size) else {
            throw ValidationError("--size \(size) is out of range: use 1...\(Self.maximumSize) bytes (64 MiB)")
        }
        guard (1...10_000).contains(concurrency) else {
            throw ValidationError("--concurrency \(concurrency) is out of range: use 1...10000 connections")
        }
        guard count.multipliedReportingOverflow(by: concurrency).overflow == false else {
            throw ValidationError("--count \(count) x --concurrency \(concurrency) is too many messages")
        }
        if mode == .raw, flowControl == .on {
            throw ValidationError("--flow-control on needs --mode framed: raw mode sends bytes, not messages, so there is nothing to flow-control")
        }
        if reconnect, mode != .framed {
            throw ValidationError("--reconnect needs --mode framed: it starts a new call after a call fails")
        }
        guard reconnectTimeout > 0, reconnectTimeout <= 3600 else {
            throw ValidationError("--reconnect-timeout \(reconnectTimeout) is out of range: use a number of seconds in (0, 3600]")
        }
        try ToolValidation.check(eventLoops: eventLoops)
        guard connectTimeout > 0, connectTimeout <= 3600 else {
            throw ValidationError("--connect-timeout \(connectTimeout) is out of range: use a number of seconds in (0, 3600]")
        }
    }

    func run() async throws {
        reportsJSON.store(json, ordering: .relaxed)
        let base = backendOptions.makeTransport(configuration: TransportConfiguration(eventLoopCount: eventLoops), tool: "echo-client")
        let transport = await tlsOptions.wrap(base, tool: "echo-client")
        // The report names the backend; TLS is a field of its own.
        let backendName = base.name

        let endpoint = path.map { Endpoint(unixPath: $0) } ?? Endpoint(host: host, port: port)
        let options = ConnectOptions(timeout: .milliseconds(Int64(connectTimeout * 1000)))
        let (count, size, mode) = (self.count, self.size, self.mode)
        let callOptions = CallConfiguration(enableFlowControl: flowControl == .on, maximumMessageSize: Self.maximumSize)
        // Framed mode: one channel; each connection is one call on it (its own connection).
        // With --reconnect the channel follows the network, so a change of category ends
        // its calls at once (unavailable, connectivity changed) instead of letting them stall.
        let network = reconnect
            ? FollowedNetwork(
                now: { say("echo-client: network: \($0)") },
                changed: { say("echo-client: \(timestamp()) network changed to \($0)") },
                unavailable: { writeStandardError("echo-client: cannot follow the network (\(describe($0))); reconnecting on failures only\n") })
            : nil
        defer { network?.stop() }
        let channel = CallChannel(target: endpoint, transport: transport, connectOptions: options, monitor: network?.monitor)
        let reconnectTimeout: Duration? = reconnect ? .milliseconds(Int64(self.reconnectTimeout * 1000)) : nil
        let statistics = RunStatistics(concurrency: concurrency)
        let progress = Task {
            await ProgressLine(statistics: statistics, total: count * concurrency, reconnects: reconnect).run()
        }
        let clock = ContinuousClock()
        let start = clock.now
        do {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<concurrency {
                    group.addTask {
                        switch mode {
                        case .raw:
                            try await roundTrips(
                                transport: transport, endpoint: endpoint, options: options,
                                connection: index, count: count, size: size, statistics: statistics)
                        case .framed:
                            try await framedRoundTrips(
                                channel: channel, options: callOptions,
                                connection: index, count: count, size: size, statistics: statistics,
                                reconnectTimeout: reconnectTimeout)
                        }
                    }
                }
                // The first failure ends the group, which cancels the other connections.
                try await group.waitForAll()
            }
        } catch {
            let elapsed = clock.now - start
            progress.cancel()
            await progress.value
            await transport.shutdownNow()
            statistics.countError(errorCode(of: error))
            if json {
                print(report(transport: backendName, endpoint: endpoint, statistics: statistics, elapsed: elapsed, failure: "\(error)").text)
                fflush(nil)
            }
            fail("\(error)\(plaintextHint(error))")
        }
        let elapsed = clock.now - start
        progress.cancel()
        await progress.value
        await transport.shutdown(gracePeriod: .seconds(1))

        if json {
            print(report(transport: backendName, endpoint: endpoint, statistics: statistics, elapsed: elapsed, failure: nil).text)
            fflush(nil)
            return
        }
        let latency = LatencySummary(statistics.merged())
        let messages = statistics.messages
        let bytes = messages * size
        let seconds = elapsed.seconds
        let mibPerSecond = seconds > 0 ? Double(bytes) / seconds / (1024 * 1024) : 0
        let modeText = mode == .raw ? "" : "framed (flow control \(flowControl.rawValue)), "
        print("echo-client: backend \(transport.name), \(modeText)\(concurrency) connection\(concurrency == 1 ? "" : "s") x \(count) message\(count == 1 ? "" : "s") of \(size) B to \(endpoint)")
        print("messages \(messages)  bytes \(bytes)  time \(format(seconds, decimals: 2)) s  throughput \(format(mibPerSecond, decimals: 2)) MiB/s (echoed bytes)  latency p50 \(microseconds(latency.p50)) us  p99 \(microseconds(latency.p99)) us\(reconnect ? "  reconnects \(reconnectCount.load(ordering: .relaxed))" : "")")
        fflush(nil)
    }

    /// Without --tls, a hint for a server that closed before echoing anything: a TLS
    /// server does so when the first bytes are not a TLS handshake.
    private func plaintextHint(_ error: any Error) -> String {
        guard !tlsOptions.tls, let failure = error as? EchoFailure, failure.message == 0 || failure.message == nil,
            let reason = failure.error?.reason, reason == .closed || reason == .reset
        else { return "" }
        return " (the server closed before echoing anything: if it speaks TLS, add --tls)"
    }

    /// The --json report of this run.
    private func report(transport name: String, endpoint: Endpoint, statistics: RunStatistics, elapsed: Duration, failure: String?) -> JSONReport {
        JSONReport(
            ok: failure == nil, failure: failure, backend: name, mode: mode, flowControl: flowControl,
            endpoint: "\(endpoint)", connections: concurrency, messagesPerConnection: count, messageSize: size,
            messages: statistics.messages, seconds: elapsed.seconds, latency: LatencySummary(statistics.merged()),
            errors: statistics.errors, reconnects: reconnect ? reconnectCount.load(ordering: .relaxed) : nil, tls: tlsOptions.tls)
    }
}

/// The key an error is counted under in the report: its ``TransportError/Code`` name, or
/// `badEcho` for a wrong echo (bytes, length, or a message or status where none belonged).
func errorCode(of error: any Error) -> String {
    if let failure = error as? EchoFailure {
        return failure.error.map { "\($0.code)" } ?? "badEcho"
    }
    if let error = error as? TransportError { return "\(error.code)" }
    return "unknown"
}

/// With --json, the informational lines go to standard error, so that standard output
/// is the JSON object alone.
let reportsJSON = Atomic<Bool>(false)

/// Prints an informational line: on standard output, or standard error with --json.
func say(_ line: String) {
    if reportsJSON.load(ordering: .relaxed) {
        writeStandardError(line + "\n")
    } else {
        print(line)
        fflush(nil)
    }
}

/// The modes the client speaks.
enum EchoMode: String, ExpressibleByArgument, CaseIterable {
    /// Bytes on a connection.
    case raw
    /// Messages of a call (5-byte prefixed frames, then the server's status).
    case framed
}

/// `--flow-control on|off`.
enum FlowControlSetting: String, ExpressibleByArgument, CaseIterable {
    case on, off
}

/// What went wrong on one connection, for the error message.
struct EchoFailure: Error, CustomStringConvertible {
    var connection: Int
    var message: Int?
    var what: String
    /// The transport error behind it, if any.
    var error: TransportError? = nil

    var description: String {
        let place = message.map { "connection \(connection), message \($0)" } ?? "connection \(connection)"
        return "\(place): \(what)"
    }
}

/// One connection's round trips; each one's latency goes to `statistics`.
///
/// The write is not awaited before the read: a message larger than the socket buffers
/// is only taken by the kernel while its echo is being read, so waiting for the write
/// to finish first would deadlock against any echo server that pushes back. A failed
/// write ends the connection with its terminal error, which the read then throws.
func roundTrips(
    transport: any Transport, endpoint: Endpoint, options: ConnectOptions,
    connection index: Int, count: Int, size: Int, statistics: RunStatistics
) async throws {
    let connection: AsyncConnection
    do {
        connection = AsyncConnection(try await transport.connect(to: endpoint, options: options))
    } catch let error as TransportError {
        throw EchoFailure(connection: index, message: nil, what: "connect to \(endpoint) failed: \(describe(error))", error: error)
    }
    defer { connection.close() }

    // Cancellation (another connection failed) closes this one, so nothing waits on.
    return try await withTaskCancellationHandler {
        let clock = ContinuousClock()
        var message = [UInt8](repeating: 0, count: size)
        for number in 0..<count {
            fillPattern(&message, connection: index, message: number)
            let sent = clock.now
            let echo: [UInt8]
            do {
                connection.connection.write(message, completion: nil)
                echo = try await connection.read(exactly: size)
            } catch let error as TransportError {
                throw EchoFailure(connection: index, message: number, what: describe(error), error: error)
            }
            statistics.record(connection: index, latency: clock.now - sent)
            if echo != message {
                let at = echo.indices.first { echo[$0] != message[$0] } ?? 0
                throw EchoFailure(
                    connection: index, message: number,
                    what: "echoed byte \(at) of \(size) is \(hex(echo[at])), expected \(hex(message[at]))")
            }
        }
    } onCancel: {
        connection.close()
    }
}

/// Framed mode: one call's round trips; each one's latency goes to `statistics`.
///
/// Runs on the call's event loop (``CallChannel/withCall(options:_:)``). Each round trip
/// sends one message without waiting for it to reach the kernel (as in raw mode, so a
/// message larger than the socket buffers cannot deadlock against a server that pushes
/// back), then awaits the next message: with flow control on, that await is what asks
/// for it (`receiveNextMessage()`), so the call never holds more than one. After the
/// last round trip the client finishes sending and expects no more messages and status OK.
func framedRoundTrips(
    channel: CallChannel, options: CallConfiguration, connection index: Int, count: Int, size: Int,
    statistics: RunStatistics, reconnectTimeout: Duration? = nil
) async throws {
    let progress = FramedProgress(count: count)
    // Cancellation (another connection failed) cancels every call, so nothing waits on.
    return try await withTaskCancellationHandler {
        var failedSince: ContinuousClock.Instant?
        while true {
            var started = false
            do {
                try await channel.withCall(options: options) { call in
                    started = true
                    try await framedRoundTrips(call: call, connection: index, size: size, progress: progress, statistics: statistics)
                }
                return
            } catch {
                // With --reconnect, an unavailable call (network changed, connection broken
                // or stalled, no connectivity, refused) is said and retried with a new call.
                let transportError = (error as? EchoFailure)?.error ?? (error as? TransportError)
                guard let reconnectTimeout, let transportError, transportError.code == .unavailable else {
                    if let transportError = error as? TransportError, !started {
                        throw EchoFailure(connection: index, message: nil, what: "connect to \(channel.target) failed: \(describe(transportError))", error: transportError)
                    }
                    throw error
                }
                let now = ContinuousClock.now
                let since = failedSince ?? now
                failedSince = since
                if now - since > reconnectTimeout {
                    throw EchoFailure(connection: index, message: progress.next, what: "still failing after \(reconnectTimeout): \(describe(transportError))", error: transportError)
                }
                progress.reconnects += 1
                reconnectCount.add(1, ordering: .relaxed)
                statistics.countError("\(transportError.code)")
                say("echo-client: \(timestamp()) connection \(index), message \(progress.next): \(started ? "call failed" : "connect failed") with \(describe(transportError)); starting a new call")
                try await Task.sleep(for: .milliseconds(started ? 20 : 200))
                continue
            }
        }
    } onCancel: {
        channel.close()
    }
}

/// New calls started after a failure, over all connections.
let reconnectCount = Atomic<Int>(0)

/// How far one connection's round trips got, across the calls a reconnect makes.
final class FramedProgress {
    var next = 0
    var reconnects = 0
    init(count: Int) {
        self.count = count
    }
    let count: Int
}

private func framedRoundTrips(call: AsyncCall, connection index: Int, size: Int, progress: FramedProgress, statistics: RunStatistics) async throws {
    let clock = ContinuousClock()
    var message = [UInt8](repeating: 0, count: size)
    for number in progress.next..<progress.count {
        fillPattern(&message, connection: index, message: number)
        let sent = clock.now
        let echo: [UInt8]?
        do {
            call.call.send(message)
            echo = try await call.next()
        } catch let error as TransportError {
            throw EchoFailure(connection: index, message: number, what: "the call ended with \(describe(error))\(hint(error))", error: error)
        }
        statistics.record(connection: index, latency: clock.now - sent)
        guard let echo else {
            throw EchoFailure(
                connection: index, message: number,
                what: "the call ended with status OK before this message was echoed")
        }
        if echo != message {
            guard echo.count == message.count else {
                throw EchoFailure(
                    connection: index, message: number,
                    what: "the echoed message has \(echo.count) bytes, expected \(size)")
            }
            let at = echo.indices.first { echo[$0] != message[$0] } ?? 0
            throw EchoFailure(
                connection: index, message: number,
                what: "echoed byte \(at) of \(size) is \(hex(echo[at])), expected \(hex(message[at]))")
        }
        progress.next = number + 1
    }
    do {
        try await call.finishSending()
        if let extra = try await call.next() {
            throw EchoFailure(
                connection: index, message: nil,
                what: "after the last echo the server sent another message (\(extra.count) bytes) instead of the status")
        }
    } catch let error as TransportError {
        throw EchoFailure(
            connection: index, message: nil,
            what: "after the last echo the call ended with \(describe(error)) instead of status OK\(hint(error))", error: error)
    }
    let status = await call.status()
    if let error = status.error {
        throw EchoFailure(connection: index, message: nil, what: "the call ended with \(describe(error)) instead of status OK\(hint(error))", error: error)
    }
}

/// A hint for the errors a framed client sees when the server is not a framed one (a
/// raw echo server sends the client's HTTP/2 preface back, which is not HTTP/2's).
private func hint(_ error: TransportError) -> String {
    switch error.reason {
    case .closed, .protocolViolation:
        " (no call status from the server: is it an echo-server with --mode framed, or another gRPC server?)"
    default:
        ""
    }
}

/// A pattern of bytes unique to (connection, message): a xorshift stream seeded by both.
func fillPattern(_ buffer: inout [UInt8], connection: Int, message: Int) {
    var state = splitmix(UInt64(truncatingIfNeeded: connection) &<< 32 ^ UInt64(truncatingIfNeeded: message))
    buffer.withUnsafeMutableBytes { bytes in
        var offset = 0
        while offset < bytes.count {
            state ^= state &<< 13
            state ^= state &>> 7
            state ^= state &<< 17
            var word = state
            for _ in 0..<min(8, bytes.count - offset) {
                bytes[offset] = UInt8(truncatingIfNeeded: word)
                word &>>= 8
                offset += 1
            }
        }
    }
}

private func splitmix(_ seed: UInt64) -> UInt64 {
    var z = seed &+ 0x9E37_79B9_7F4A_7C15
    z = (z ^ (z &>> 30)) &* 0xBF58_476D_1CE4_E5B9
    z = (z ^ (z &>> 27)) &* 0x94D0_49BB_1331_11EB
    z ^= z &>> 31
    return z == 0 ? 1 : z  // xorshift must not start at 0
}

/// A TransportError with its code and reason up front.
func describe(_ error: TransportError) -> String {
    "\(error.code) (\(error.reason)): \(error.message)\(error.native.map { " [\($0)]" } ?? "")"
}

/// Nanoseconds as microseconds for the summary line: one decimal below 10 us.
func microseconds(_ nanoseconds: UInt64) -> String {
    let us = Double(nanoseconds) / 1000
    return us < 10 ? format(us, decimals: 1) : format(us, decimals: 0)
}

/// Formats a non-negative number with a fixed count of decimals (no Foundation).
func format(_ value: Double, decimals: Int) -> String {
    guard value.isFinite else { return "\(value)" }
    var scale = 1.0
    for _ in 0..<decimals { scale *= 10 }
    let scaled = (abs(value) * scale).rounded()
    guard scaled < 9e18 else { return "\(value)" }
    let whole = Int(scaled)
    let unit = Int(scale)
    var text = "\(whole / unit)"
    if decimals > 0 {
        let fraction = "\(whole % unit)"
        text += "." + String(repeating: "0", count: decimals - fraction.count) + fraction
    }
    return value < 0 ? "-" + text : text
}

func hex(_ byte: UInt8) -> String {
    let digits = Array("0123456789abcdef")
    return "0x\(digits[Int(byte >> 4)])\(digits[Int(byte & 0xf)])"
}

extension Duration {
    var seconds: Double {
        let (s, attoseconds) = components
        return Double(s) + Double(attoseconds) / 1e18
    }
}

/// Prints to standard error and exits 1.
func fail(_ message: String) -> Never {
    writeStandardError("echo-client: error: \(message)\n")
    exit(1)
}

/// Writes straight to descriptor 2 (the C `stderr` global is not concurrency-safe).
func writeStandardError(_ text: String) { ToolOutput.writeStandardError(text) }

/// Wall-clock time of day, for the lines --reconnect prints.
func timestamp() -> String {
    var now = timespec()
    clock_gettime(CLOCK_REALTIME, &now)
    var parts = tm()
    var seconds = now.tv_sec
    gmtime_r(&seconds, &parts)
    func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
    let millis = Int(now.tv_nsec / 1_000_000)
    let fraction = millis < 10 ? "00\(millis)" : millis < 100 ? "0\(millis)" : "\(millis)"
    return "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)).\(fraction)"
}
