import SwitchyardCalls
// transfer-client: sends a file to a transfer-server as a resumable transfer
// (SwitchyardTransfer), on any Switchyard socket backend.
//
//     transfer-client send FILE [--backend NAME] [--backend-library PATH ...]
//                     [--host HOST] [--port PORT] [--id ID]
//                     [--resume-state PATH] [--reconnect-timeout SECONDS]
//                     [--follow-network] [--stall-timeout SECONDS]
//                     [--tls [--tls-ca PEM] [--tls-server-name NAME] [--tls-cert PEM --tls-key PEM]]
//
// With `--tls` the calls go over TLS (SwitchyardTLS's TLSTransport over the backend):
// the server's certificate must lead to the system's trust store or `--tls-ca`, and name
// `--tls-server-name` (else --host); `--tls-cert` and `--tls-key` give a client
// certificate to a server that asks for one (the TLS options are echo-client's:
// Examples/ToolSupport). Every resumed call makes a new TLS connection.
//
// One `Transfer` over a `CallChannel`: the file goes in chunks, the server acknowledges what
// it synced, and a broken call is followed by a new one that resumes from the server's
// last acknowledged offset, for up to --reconnect-timeout seconds after the break.
// A path that dies without an error (a network switch, a link gone) breaks the call only
// if something notices: `--follow-network` makes the channel follow rtnetlink, so a change
// of network ends the call at once (unavailable, connectivity or path changed) and the
// next one goes over the new path; `--stall-timeout` ends a call that made no progress
// for that long (the backend's stall detection).
//
// With `--resume-state PATH` the resume state (id, the file's identity, size, the
// acknowledged offset and the digest of the bytes below it) is saved in PATH as acknowledgements arrive and when
// the send stops, loaded at start, and removed once the file is sent: a client that was
// killed, run again with the same arguments, picks up where the last one stopped instead
// of starting over (and refuses a file that changed meanwhile).
//
// Progress: on a terminal, one line redrawn in place (a bar, bytes, rate, time left,
// resumes); otherwise plain `progress:` lines (at the first answer, at every tenth of the
// file, at most a second apart, and at the end). At the end exactly one summary line:
//
//     sent N bytes, resent R bytes, resumes K, sha256 HEX
//
// HEX is the transfer digest both ends agreed on: the SHA-256 of the digests of the
// file's 64 KiB leaves (`TransferChunkDigest`; XXH3-128 by default, SHA-256 with
// `--leaf-digest sha256`), not what `sha256sum` prints.
// N is what this process sent (bytes the server already held are not sent), R the part
// of N sent more than once, K the new calls after broken ones, plus one when this
// process picked up a transfer the server held part of, not all (a restart with
// --resume-state, or the same file sent again after an interrupted run).
//
// The send runs in a swift-service-lifecycle `ServiceGroup`: SIGINT or SIGTERM stops it
// gracefully (the resume state is saved) and it exits 1. Bad
// arguments, and a file that is missing or cannot be read, exit 64 with a message;
// a failed transfer exits 1 with the error.

import ArgumentParser
import Glibc
import Logging
import ServiceLifecycle
import Switchyard
import SwitchyardBackends
import SwitchyardServiceLifecycle
import ToolSupport
import SwitchyardTransfer
import Synchronization

@main
struct TransferClientCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "transfer-client",
        abstract: "Sends files to a transfer-server as resumable transfers, on a Switchyard backend chosen at run time.",
        subcommands: [Send.self])
}

struct Send: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Sends one file; resumes after broken connections, and after a restart with --resume-state.",
        discussion: """
            Shows a progress bar on a terminal (plain 'progress:' lines otherwise) and ends \
            with one line: 'sent N bytes, resent R bytes, resumes K, sha256 HEX' (HEX: the \
            transfer digest, the SHA-256 of the file's 64 KiB leaves' SHA-256s). N counts \
            the bytes this process sent, R those of them sent more than once, K the times \
            the transfer was picked up from an offset (a new call after a broken one, or a \
            start that found part, not all, of the file at the server). Exits 1 when the transfer fails (the resume state is kept).
            """)

    @Argument(help: ArgumentHelp("The file to send (a regular file).", valueName: "file"))
    var file: String

    @OptionGroup var backendOptions: BackendOptions

    @Option(help: "The transfer server's host.")
    var host = "127.0.0.1"

    @Option(parsing: .unconditional, help: "The transfer server's port.")
    var port = 7008

    @Option(help: "The transfer's id, which is also the file's name on the server: 1-255 letters, digits, '.', '_', '-', not starting with '.' (default: the resume state's id, else the file's name).")
    var id: String?

    @Option(name: .customLong("resume-state"), help: ArgumentHelp("Save the resume state in this file as the transfer goes, and resume from it at start (removed once the file is sent).", valueName: "path"))
    var resumeState: String?

    @Option(name: .customLong("reconnect-timeout"), parsing: .unconditional, help: "Seconds to keep trying to resume after a connection broke.")
    var reconnectTimeout = 30.0

    @Flag(name: .customLong("follow-network"), help: "Follow the network (rtnetlink): a change of network ends the call at once and the transfer resumes over the new path, instead of waiting for the old connection to fail.")
    var followNetwork = false

    @Option(name: .customLong("stall-timeout"), parsing: .unconditional, help: "Seconds without progress after which a connection counts as broken and the transfer resumes on a new one (default: the kernel's own, which can take minutes).")
    var stallTimeout: Double?

    @Option(name: .customLong("leaf-digest"), help: ArgumentHelp("How each 64 KiB leaf is hashed: xxh3-128 (fast; catches damage, not forgery) or sha256. A send that resumes from --resume-state hashes as that state's send did.", valueName: "name"))
    var leafDigest = TransferLeafDigest.standard.description

    @OptionGroup var tlsOptions: TLSClientOptions

    func validate() throws {
        guard TransferLeafDigest(name: leafDigest) != nil else {
            throw ValidationError("--leaf-digest \(leafDigest) is not one of: \(TransferLeafDigest.allCases.map(\.description).joined(separator: ", "))")
        }
        try ToolValidation.check(port: port, listening: false)
        try ToolValidation.check(host: host)
        guard reconnectTimeout > 0, reconnectTimeout <= 86_400 else {
            throw ValidationError("--reconnect-timeout \(reconnectTimeout) is out of range: use a number of seconds in (0, 86400]")
        }
        if let stallTimeout, !(stallTimeout > 0 && stallTimeout <= 3600) {
            throw ValidationError("--stall-timeout \(stallTimeout) is out of range: use a number of seconds in (0, 3600]")
        }
        // The file: opened here so that a missing or unreadable one is a usage error.
        do {
            _ = try FileTransferSource(path: file)
        } catch {
            throw ValidationError("cannot send \(file): \((error as? TransportError)?.message ?? "\(error)")")
        }
        var saved: TransferResumeState?
        if let resumeState {
            let folder = resumeState.lastIndex(of: "/").map { String(resumeState[..<$0]) } ?? "."
            var info = stat()
            guard stat(folder.isEmpty ? "/" : folder, &info) == 0, info.st_mode & S_IFMT == S_IFDIR else {
                throw ValidationError("--resume-state \(resumeState): the folder \(folder) does not exist")
            }
            do {
                saved = try TransferResumeState.load(from: resumeState)
            } catch {
                throw ValidationError("--resume-state \(resumeState): \((error as? TransportError)?.message ?? "\(error)")")
            }
        }
        if let id {
            guard TransferRecord.isValid(id: id) else {
                throw ValidationError("--id \"\(id)\" is not a transfer id: use 1-255 letters, digits, '.', '_' or '-', not starting with '.'")
            }
            if let saved, saved.id != id {
                throw ValidationError("--id \(id) is not the id of the resume state in \(resumeState ?? ""), \(saved.id)")
            }
        } else if saved == nil {
            let name = String(file.split(separator: "/").last ?? "")
            guard TransferRecord.isValid(id: name) else {
                throw ValidationError("the file name \"\(name)\" is not a transfer id (1-255 letters, digits, '.', '_' or '-', not starting with '.'): pass --id")
            }
        }
    }

    func run() async throws {
        let configuration = TransportConfiguration(stallTimeout: stallTimeout.map { .milliseconds(Int64($0 * 1000)) })
        let base = backendOptions.makeTransport(configuration: configuration, tool: "transfer-client")
        let transport = await tlsOptions.wrap(base, tool: "transfer-client")
        // With --follow-network a change of network ends the call at once (the channel's
        // rule); the transfer then resumes on a new call. Changes are told on stderr.
        let network = followNetwork
            ? FollowedNetwork(
                now: { writeStandardError("transfer-client: network: \($0)\n") },
                changed: { writeStandardError("transfer-client: network changed to \($0)\n") },
                unavailable: { writeStandardError("transfer-client: cannot follow the network (\($0)); resuming on broken connections only\n") })
            : nil
        defer { network?.stop() }
        let channel = CallChannel(target: Endpoint(host: host, port: port), transport: transport, monitor: network?.monitor)
        let options = TransferOptions(
            reconnectTimeout: .milliseconds(Int64(reconnectTimeout * 1000)), resumeStatePath: resumeState,
            leafDigest: TransferLeafDigest(name: leafDigest) ?? .standard)
        let transfer = Transfer(channel: channel, options: options)

        let display = Task {
            var display = ProgressDisplay(terminal: isatty(1) == 1)
            for await report in transfer.progress { display.show(report) }
            display.finish()
        }
        // The send runs as the service of a ServiceGroup: the first SIGINT or SIGTERM shuts
        // it down gracefully, which stops the send (the resume state is saved); a second
        // one cancels the group (nothing more to stop). The send ending ends the group.
        let sending = SendService(transfer: transfer, file: file, id: id)
        let signals = ShutdownSignals(onSignal: { signal, forced in
            writeStandardError("transfer-client: \(ShutdownSignals.name(of: signal))\(forced ? " again" : ""), stopping\n")
        })
        let group = ServiceGroup(
            configuration: signals.configuration(
                running: [
                    ServiceGroupConfiguration.ServiceConfiguration(
                        service: sending, successTerminationBehavior: .gracefullyShutdownGroup,
                        failureTerminationBehavior: .gracefullyShutdownGroup)
                ],
                logger: Logger(label: "transfer-client")))

        let result: TransferResult
        do {
            try await group.run()
            result = try sending.result
        } catch {
            await display.value
            channel.close()
            await transport.shutdown(gracePeriod: .seconds(1))
            fail("\(error)\(advice(for: error))")
        }
        await display.value
        print("sent \(result.bytesSent) bytes, resent \(result.bytesResent) bytes, resumes \(result.resumes), sha256 \(result.sha256Hex)")
        fflush(nil)
        // The channel's idle connection closes now; the grace period is for what is
        // still in flight, not a wait for a connection nobody would close.
        channel.close()
        await transport.shutdown(gracePeriod: .seconds(1))
    }
}

/// The send as a `Service`: `run()` sends the file; a graceful shutdown (the first
/// SIGINT or SIGTERM) cancels the transfer, which saves its resume state and throws.
final class SendService: Service, Sendable {
    private let transfer: Transfer
    private let file: String
    private let id: String?
    private let outcome = Mutex<Result<TransferResult, any Error>?>(nil)

    init(transfer: Transfer, file: String, id: String?) {
        self.transfer = transfer
        self.file = file
        self.id = id
    }

    func run() async throws {
        let transfer = self.transfer
        do {
            let result = try await withGracefulShutdownHandler {
                try await transfer.send(file: file, id: id)
            } onGracefulShutdown: {
                transfer.cancel()
            }
            outcome.withLock { $0 = .success(result) }
        } catch {
            outcome.withLock { $0 = .failure(error) }
            throw error
        }
    }

    /// What the send gave, once `run()` returned.
    var result: TransferResult {
        get throws {
            guard let outcome = outcome.withLock({ $0 }) else {
                throw TransportError(code: .cancelled, reason: .init("shutdown"), message: "the send did not run")
            }
            return try outcome.get()
        }
    }
}

extension Send {
    /// What to do next after `error`, appended to its message.
    func advice(for error: any Error) -> String {
        if let error = error as? TransportError, error.reason == .sourceChanged {
            let state = resumeState.map { " (and remove \($0))" } ?? ""
            return "; the server or the resume state knows another version of this file: send this one under another --id\(state)"
        }
        return resumeState.map { "; the resume state is in \($0): run the same command to resume" } ?? ""
    }
}

/// Draws progress reports: on a terminal one line redrawn in place (at most ten times a
/// second), otherwise plain lines (the first report, each tenth of the file, at most a
/// second apart, and the last). Used by one task.
struct ProgressDisplay {
    let terminal: Bool
    private let clock = ContinuousClock()
    private var lastDrawn: ContinuousClock.Instant?
    private var lastTenth = -1
    private var started = false
    /// The newest report not drawn yet (a terminal draws it at the end).
    private var pending: TransferProgress?
    private var drewLine = false
    private var drewEnd = false

    init(terminal: Bool) {
        self.terminal = terminal
    }

    mutating func show(_ report: TransferProgress) {
        let first = !started
        started = true
        let now = clock.now
        let done = report.bytesAcknowledged == report.totalBytes
        // The end is reported twice (the last ack, then the receiver's done): draw it once.
        guard !(done && drewEnd) else { return }
        drewEnd = done
        let tenth = report.totalBytes == 0 ? 10 : Int(report.bytesAcknowledged * 10 / report.totalBytes)
        let due: Bool
        if terminal {
            due = first || done || lastDrawn.map { now - $0 >= .milliseconds(100) } ?? true
        } else {
            due = first || done || tenth > lastTenth || lastDrawn.map { now - $0 >= .seconds(1) } ?? true
        }
        guard due else {
            pending = report
            return
        }
        pending = nil
        lastDrawn = now
        lastTenth = tenth
        draw(report)
    }

    /// Draws what is pending and ends the terminal line.
    mutating func finish() {
        if let pending { draw(pending) }
        if terminal, drewLine { print("") }
        fflush(nil)
    }

    private mutating func draw(_ report: TransferProgress) {
        let percent = format(report.fractionCompleted * 100, decimals: 1)
        let rate = format(report.bytesPerSecond / 1_048_576, decimals: 1)
        let eta = report.estimatedTimeRemaining.map(clockTime) ?? "--:--"
        if terminal {
            let width = 24
            let filled = min(width, Int(report.fractionCompleted * Double(width)))
            let bar = String(repeating: "#", count: filled) + String(repeating: ".", count: width - filled)
            let mib = "\(format(Double(report.bytesAcknowledged) / 1_048_576, decimals: 1))/\(format(Double(report.totalBytes) / 1_048_576, decimals: 1)) MiB"
            // Carriage return, the line, then erase what a longer previous line left.
            print("\r[\(bar)] \(percent)% \(mib)  \(rate) MiB/s  ETA \(eta)  resumes \(report.resumes)\u{1B}[K", terminator: "")
            drewLine = true
        } else {
            print("progress: \(report.bytesAcknowledged) of \(report.totalBytes) bytes (\(percent)%), \(rate) MiB/s, ETA \(eta), resumes \(report.resumes), resent \(report.bytesResent) bytes")
        }
        fflush(nil)
    }
}

/// `value` (not negative) with `decimals` digits after the point.
func format(_ value: Double, decimals: Int) -> String {
    guard value.isFinite, value >= 0, value < 1e15 else { return "\(value)" }
    var scale = 1
    for _ in 0..<decimals { scale *= 10 }
    let scaled = Int((value * Double(scale)).rounded())
    let fraction = String(scaled % scale)
    let padded = String(repeating: "0", count: max(0, decimals - fraction.count)) + fraction
    return decimals == 0 ? "\(scaled)" : "\(scaled / scale).\(padded)"
}

/// A duration as `M:SS`, or `H:MM:SS` from an hour on.
func clockTime(_ duration: Duration) -> String {
    let total = max(0, Int(duration.components.seconds))
    func two(_ value: Int) -> String { value < 10 ? "0\(value)" : "\(value)" }
    let (hours, minutes, seconds) = (total / 3600, total / 60 % 60, total % 60)
    return hours > 0 ? "\(hours):\(two(minutes)):\(two(seconds))" : "\(minutes):\(two(seconds))"
}

/// Prints to standard error and exits 1.
func fail(_ message: String) -> Never {
    writeStandardError("transfer-client: error: \(message)\n")
    exit(1)
}

/// Writes straight to descriptor 2 (the C `stderr` global is not concurrency-safe).
func writeStandardError(_ text: String) { ToolOutput.writeStandardError(text) }
