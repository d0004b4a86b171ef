// transfer-server: receives resumable transfers (SwitchyardTransfer) into a folder, on
// any Switchyard socket backend.
//
//     transfer-server --dir DIR [--backend NAME] [--backend-library PATH ...]
//                     [--host HOST] [--port PORT] [--event-loops N] [--grace-period S]
//                     [--tls-cert PEM --tls-key PEM [--tls-client-ca PEM]]
//
// A `TransferServer` over a `DirectoryTransferStorage`: a finished transfer is the file
// `DIR/<id>` (the id is the sender's file name unless it chose another); while it runs,
// its bytes and record are in `DIR/.partial`, synced before every acknowledgement, so a
// sender that lost its connection, or a restarted sender process, resumes from there,
// and so does this server after a restart.
//
// With `--tls-cert PEM --tls-key PEM` it speaks TLS (SwitchyardTLS's TLSTransport over
// the backend; the backend's name then ends in `+tls`); a failed handshake is reported on
// standard error. `--tls-client-ca PEM` requires senders to present a certificate that
// leads to it (mutual TLS). The TLS options are echo-server's (Examples/ToolSupport).
//
// Prints `transfer-server: listening on HOST:PORT (backend NAME)` once it accepts calls,
// then `transfer-server: received ID (N bytes, sha256 HEX) -> PATH` for each finished
// file. It runs as a swift-service-lifecycle `ServiceGroup`: SIGINT or SIGTERM stops it
// gracefully (exit 0): it stops accepting at once, open transfer calls get the grace
// period, and what they synced stays for the senders to resume; a second signal during
// the grace period ends them at once (exit 128 plus the signal's number).

import ArgumentParser
import Glibc
import Switchyard
import SwitchyardBackends
import SwitchyardServiceLifecycle
import ToolSupport
import SwitchyardTransfer

@main
struct TransferServerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "transfer-server",
        abstract: "Receives resumable file transfers into a folder, on a Switchyard backend chosen at run time.",
        discussion: """
            Prints 'transfer-server: listening on HOST:PORT (backend NAME)' once it accepts \
            transfers, and 'transfer-server: received ID (N bytes, sha256 HEX) -> PATH' for \
            each finished file (DIR/ID). Unfinished transfers wait in DIR/.partial for their \
            sender to resume. Runs until SIGINT or SIGTERM.
            """)

    @Option(help: ArgumentHelp("The folder finished files go to (created if missing; its parent must exist).", valueName: "dir"))
    var dir: String

    @OptionGroup var backendOptions: BackendOptions

    @Option(help: "The address to listen on.")
    var host = "127.0.0.1"

    @Option(parsing: .unconditional, help: "The port to listen on; 0 picks a free one.")
    var port = 7008

    @Option(name: .customLong("event-loops"), parsing: .unconditional, help: "Event loop threads (default: one per core).")
    var eventLoops: Int?

    @Option(name: .customLong("grace-period"), parsing: .unconditional, help: "Seconds open transfers get to finish after SIGINT or SIGTERM; then they are ended (their senders resume later).")
    var gracePeriod = 2.0

    @OptionGroup var tlsOptions: TLSServerOptions

    func validate() throws {
        try ToolValidation.check(port: port, listening: true)
        try ToolValidation.check(host: host)
        try ToolValidation.check(eventLoops: eventLoops)
        try ToolValidation.check(gracePeriod: gracePeriod)
        guard !dir.isEmpty else {
            throw ValidationError("--dir is empty: name the folder finished files go to")
        }
        var info = stat()
        if stat(dir, &info) == 0 {
            guard info.st_mode & S_IFMT == S_IFDIR else {
                throw ValidationError("--dir \(dir) is not a folder")
            }
            guard access(dir, R_OK | W_OK | X_OK) == 0 else {
                throw ValidationError("--dir \(dir): cannot write there (\(String(cString: strerror(errno))))")
            }
        } else if errno != ENOENT {
            throw ValidationError("--dir \(dir): \(String(cString: strerror(errno)))")
        }
    }

    func run() async throws {
        let storage: DirectoryTransferStorage
        do {
            storage = try DirectoryTransferStorage(directory: dir)
        } catch {
            fail("cannot use --dir \(dir): \(error)")
        }
        let base = backendOptions.makeTransport(configuration: TransportConfiguration(eventLoopCount: eventLoops), tool: "transfer-server")
        let transport = await tlsOptions.wrap(base, tool: "transfer-server")
        let endpoint = Endpoint(host: host, port: port)
        let server: TransferServer
        do {
            server = try await TransferServer.start(transport: transport, on: endpoint, storage: storage)
        } catch {
            await transport.shutdownNow()
            fail("cannot listen on \(endpoint): \(error)")
        }

        // One line per finished file; ends once the server stopped.
        let announcements = Task {
            for await record in server.finished {
                print("transfer-server: received \(record.id) (\(record.size) bytes, sha256 \(TransferDigest.hex(record.sha256))) -> \(storage.path(of: record.id))")
                fflush(nil)
            }
        }

        // The first SIGTERM or SIGINT shuts the group down gracefully: the server stops
        // accepting at once and open transfers go on; a second one, or the end of the
        // grace period, ends them at once (what they synced stays for their senders).
        await ToolRun.runServer(
            tool: "transfer-server", services: [server], transport: transport, gracePeriod: gracePeriod,
            ready: ["transfer-server: listening on \(server.localAddress) (backend \(transport.name))"],
            whenStopped: { await announcements.value })
    }
}

/// Prints to standard error and exits 1.
func fail(_ message: String) -> Never {
    writeStandardError("transfer-server: error: \(message)\n")
    exit(1)
}

/// Writes straight to descriptor 2 (the C `stderr` global is not concurrency-safe).
func writeStandardError(_ text: String) { ToolOutput.writeStandardError(text) }
