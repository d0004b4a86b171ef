import SwitchyardCalls
// echo-server: a TCP echo server on any Switchyard socket backend.
//
//     echo-server [--backend NAME] [--backend-library PATH ...] [--host HOST]
//                 [--port PORT | --path PATH] [--event-loops N]
//                 [--mode raw | --mode framed [--flow-control on|off]]
//                 [--suspend-policy close|keep] [--stop-after-suspend]
//                 [--tls-cert PEM --tls-key PEM [--tls-client-ca PEM]]
//
// With `--tls-cert` and `--tls-key` it speaks TLS (SwitchyardTLS's `TLSTransport` over the
// chosen backend, a loaded one too): every connection is echoed (raw) or served (framed)
// after its TLS handshake; a handshake that fails is reported on standard error and that
// connection closed. `--tls-client-ca` also asks each client for a certificate and turns
// away those without one that leads to that CA (mutual TLS). A shutdown sends close_notify
// on the connections it closes, so peers read a clean end of stream.
//
// With `--path`, it listens on a Unix-domain socket path instead (for a backend of
// socket paths, such as the `unix` backend of Examples/UnixBackend).
//
// Raw mode (the default): every byte a peer sends comes back unchanged, so any TCP peer
// (nc, socat, a script, another echo client) can talk to it. When the peer shuts its
// output down, the server echoes what is left, shuts its own output down, and closes.
//
// Framed mode: a CallServer; every connection is one call, and every message the client
// sends comes back as a message. When the client finishes sending, the call ends with
// status OK. With `--flow-control on` the server asks for one message at a time and
// asks for the next only once the echo of the last one is in the kernel, so it holds at
// most one message per call; with it off (the default) messages are echoed as they arrive.
//
// `--backend-library PATH` (repeatable) loads a backend built as a shared library, and
// the lib*.so files in the folders of SWITCHYARD_BACKEND_PATH are loaded too; `--backend`
// then accepts their names.
//
// It runs as a swift-service-lifecycle `ServiceGroup`. SIGINT or SIGTERM stops it
// gracefully: it stops accepting at once (new connects are refused), the open connections
// (raw) or calls (framed) go on until their peers finish, then it exits 0. A second
// signal meanwhile, or the end of --grace-period, stops it at once: open connections are
// closed (calls end `cancelled`); after a second signal it exits with 128 plus the
// signal's number (143 for SIGTERM, 130 for SIGINT), as a shell reports a process the
// signal ended, since connections were cut.
//
// SIGTSTP suspends it (a `Lifecycle`, driven by the toolkit's `LifecycleSignals`): the
// listener closes, so connects are refused, and the open connections follow
// `--suspend-policy`: `close` (the default) closes them, `keep` keeps them open and stops
// reading them until the resume. It prints `suspended` once done, and with
// `--stop-after-suspend` then stops itself (SIGSTOP). SIGCONT resumes it: the listener
// reopens on the same port, kept connections read again, and it prints `resumed`.

import ArgumentParser
import Glibc
import ServiceLifecycle
import Switchyard
import SwitchyardBackendKit
import SwitchyardBackends
import SwitchyardServiceLifecycle
import ToolSupport
import Synchronization

/// The entry point: `AsyncParsableCommand`'s `main()`, with the main thread waiting for
/// the command instead of leaving. An async `main` ends the main thread with `pthread_exit`
/// (`dispatch_main`), whose forced unwind looks up an unwind entry for every frame: a
/// binary search over the executable's whole `.eh_frame_hdr`, which the kernel's
/// fault-around then keeps resident with much of `.eh_frame` (0.6 MiB of a static build,
/// Benchmarks/README.md, "Memory"). Parsing, help, errors and exit statuses are
/// ArgumentParser's, as before. Nothing here runs on the main actor.
@main
enum EchoServerMain {
    static func main() {
        // What `AsyncParsableCommand.main()` does, waited for on this thread.
        var command: any ParsableCommand
        do {
            command = try EchoServer.parseAsRoot()
        } catch {
            EchoServer.exit(withError: error)
        }
        guard let asyncCommand = command as? any AsyncParsableCommand else {
            do { try command.run() } catch { EchoServer.exit(withError: error) }
            return
        }
        nonisolated(unsafe) var running = asyncCommand
        nonisolated(unsafe) var failure: (any Error)?
        nonisolated(unsafe) let finished = UnsafeMutablePointer<sem_t>.allocate(capacity: 1)
        sem_init(finished, 0, 0)
        // Detached: `main` is on the main actor, whose thread waits here.
        Task.detached {
            do { try await running.run() } catch { failure = error }
            sem_post(finished)
        }
        while sem_wait(finished) != 0 {}  // EINTR: a signal's handler ran on this thread
        if let failure { EchoServer.exit(withError: failure) }
    }
}

struct EchoServer: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "echo-server",
        abstract: "A TCP echo server on a Switchyard backend chosen at run time.",
        discussion: """
            Prints 'echo-server: listening on HOST:PORT (backend NAME)' once it accepts \
            connections (in framed mode preceded by 'echo-server: framed mode, flow \
            control on|off'), and runs until SIGINT or SIGTERM: the first stops it \
            gracefully (new connects are refused at once, open connections finish, exit \
            0), a second one at once (exit 128 + the signal's number). SIGTSTP suspends it \
            (the listener closes; open connections follow --suspend-policy) and prints \
            'suspended'; SIGCONT resumes it on the same port and prints 'resumed'.
            """)

    @OptionGroup var backendOptions: BackendOptions

    @Option(help: "The address to listen on.")
    var host = "127.0.0.1"

    @Option(parsing: .unconditional, help: "The port to listen on; 0 picks a free one.")
    var port = 7007

    @Option(help: "Listen on this Unix-domain socket path (unix:PATH) instead of --host and --port, for a backend of socket paths such as 'unix'.")
    var path: String?

    @Option(help: "What to echo: 'raw' echoes bytes as they come; 'framed' serves calls and echoes each message.")
    var mode: EchoMode = .raw

    @Option(name: .customLong("flow-control"), help: "Framed mode only: 'on' asks for one message at a time, the next once the echo is in the kernel; 'off' echoes messages as they arrive.")
    var flowControl: FlowControlSetting = .off

    @Option(name: .customLong("event-loops"), parsing: .unconditional, help: "Event loop threads (default: one per core).")
    var eventLoops: Int?

    @Option(name: .customLong("grace-period"), parsing: .unconditional, help: "Seconds open connections get to finish after SIGINT or SIGTERM; then they are closed.")
    var gracePeriod = 2.0

    @Option(name: .customLong("suspend-policy"), help: "What SIGTSTP does to open connections: 'close' closes them; 'keep' keeps them open and stops reading them until SIGCONT.")
    var suspendPolicy: SuspendPolicySetting = .close

    @Flag(name: .customLong("stop-after-suspend"), help: "After suspending on SIGTSTP, stop the process (SIGSTOP) until SIGCONT, as job control expects.")
    var stopAfterSuspend = false

    @OptionGroup var tlsOptions: TLSServerOptions

    func validate() throws {
        try ToolValidation.check(port: port, listening: true)
        try ToolValidation.check(host: host)
        try ToolValidation.check(path: path)
        if mode == .raw, flowControl == .on {
            throw ValidationError("--flow-control on needs --mode framed: raw mode echoes bytes, not messages, so there is nothing to flow-control")
        }
        try ToolValidation.check(eventLoops: eventLoops)
        try ToolValidation.check(gracePeriod: gracePeriod)
    }

    func run() async throws {
        let lifecycle = Lifecycle()
        let policy = suspendPolicy.policy
        let lifecycleSignals: LifecycleSignals
        do {
            lifecycleSignals = try LifecycleSignals(driving: lifecycle, stopAfterSuspend: stopAfterSuspend) { error in
                fail("cannot resume: \(error)")
            }
        } catch {
            fail("cannot handle SIGTSTP and SIGCONT: \(error)")
        }
        // Printed before a --stop-after-suspend stop: the observer runs inside the suspend.
        let announcements = lifecycle.observe { state in
            if state == .suspended {
                print("suspended")
                fflush(nil)
            } else if state == .active {
                print("resumed")
                fflush(nil)
            }
        }
        let base = backendOptions.makeTransport(configuration: TransportConfiguration(eventLoopCount: eventLoops), tool: "echo-server")
        let transport = await tlsOptions.wrap(base, tool: "echo-server")
        let endpoint = path.map { Endpoint(unixPath: $0) } ?? Endpoint(host: host, port: port)

        // The server, as the Service the group runs, and the lines that say it is ready.
        let server: any Service
        var ready: [String] = []
        switch mode {
        case .raw:
            let listener: SuspendableListener
            do {
                listener = try await lifecycle.listen(on: endpoint, using: transport)
            } catch {
                await transport.shutdownNow()
                fail("cannot listen on \(endpoint): \(error)")
            }
            server = RawEchoServer(listener: listener, lifecycle: lifecycle, policy: policy)
            ready.append("echo-server: listening on \(listener.localAddress) (backend \(transport.name))")

        case .framed:
            let flowControl = self.flowControl == .on
            // Flow control on: the manual policy with the first message already asked for
            // (see FirstMessageAskedFlowController).
            let options = CallConfiguration(
                enableFlowControl: flowControl, maximumMessageSize: framedMaximumMessageSize,
                flowController: flowControl ? FirstMessageAskedFlowController() : nil)
            let callServer: CallServer
            do {
                callServer = try await CallServer.start(
                    transport: transport, on: endpoint, options: options, lifecycle: lifecycle, policy: policy
                ) { call in
                    FramedEchoHandler(flowControl: flowControl)
                }
            } catch {
                await transport.shutdownNow()
                fail("cannot listen on \(endpoint): \(error)")
            }
            server = callServer
            ready.append("echo-server: framed mode, flow control \(flowControl ? "on" : "off")")
            ready.append("echo-server: listening on \(callServer.localAddress) (backend \(transport.name))")
        }

        // The first SIGTERM or SIGINT shuts the group down gracefully: the signal driver
        // stops (last in the group, so first to stop), then the server stops accepting at
        // once and returns when its open connections have closed. A second one, or the
        // grace period running out, cancels: open connections are closed at once.
        await ToolRun.runServer(
            tool: "echo-server", services: [server, lifecycleSignals], transport: transport, gracePeriod: gracePeriod,
            ready: ready, whenStopped: { announcements.cancel() })
    }
}

/// Raw mode as a `Service`: echoes every connection the listener accepts
/// (``RawEchoHandler``) until the group stops it.
///
/// - Graceful shutdown: the listener closes at once (new connects are refused) and
///   `run()` returns once every open connection has closed: each ends when its peer
///   shuts its output down and the echo of what it sent is out.
/// - Cancellation: the listener closes and every open connection is closed at once.
///
/// The connections are tracked as they are accepted and closed (a lock taken twice per
/// connection, never per read).
final class RawEchoServer: Service, Sendable {
    private struct State {
        var open: [ObjectIdentifier: any Connection] = [:]
        var closed = false
        var waiter: CheckedContinuation<Void, Never>?
    }
    private let listener: SuspendableListener
    private let state = Mutex(State())

    init(listener: SuspendableListener, lifecycle: Lifecycle, policy: SuspendPolicy) {
        self.listener = listener
        // Each accepted connection starts echoing on its own loop, with no task hop.
        listener.acceptConnections { [self] connection in
            guard opened(connection) else {
                // Accepted as the server closed: not served, as a connect after it.
                connection.close()
                return
            }
            let id = ObjectIdentifier(connection)
            let handler = RawEchoHandler(connection) { [self] in self.closed(id) }
            connection.setHandler(handler)
            handler.follow(lifecycle, policy: policy)
            connection.startReading()
        }
    }

    func run() async throws {
        await withTaskCancellationHandler {
            await withGracefulShutdownHandler {
                await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                    let done = state.withLock { state in
                        if state.closed, state.open.isEmpty { return true }
                        state.waiter = continuation
                        return false
                    }
                    if done { continuation.resume() }
                }
            } onGracefulShutdown: {
                self.stopAccepting()
            }
        } onCancel: {
            for connection in self.stopAccepting() { connection.close() }
        }
    }

    /// Closes the listener; returns the open connections.
    @discardableResult
    private func stopAccepting() -> [any Connection] {
        listener.close()
        let (open, waiter) = state.withLock { state -> ([any Connection], CheckedContinuation<Void, Never>?) in
            state.closed = true
            guard state.open.isEmpty else { return (Array(state.open.values), nil) }
            defer { state.waiter = nil }
            return ([], state.waiter)
        }
        waiter?.resume()
        return open
    }

    private func opened(_ connection: any Connection) -> Bool {
        state.withLock { state in
            if state.closed { return false }
            state.open[ObjectIdentifier(connection)] = connection
            return true
        }
    }

    private func closed(_ connection: ObjectIdentifier) {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            state.open.removeValue(forKey: connection)
            guard state.closed, state.open.isEmpty else { return nil }
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }
}

/// The modes the server speaks.
enum EchoMode: String, ExpressibleByArgument, CaseIterable {
    /// Bytes, echoed as they come.
    case raw
    /// Calls: 5-byte prefixed messages, each echoed as a message, then a status.
    case framed
}

/// `--suspend-policy close|keep`.
enum SuspendPolicySetting: String, ExpressibleByArgument, CaseIterable {
    case close, keep

    var policy: SuspendPolicy { self == .close ? .close : .keep }
}

/// `--flow-control on|off`.
enum FlowControlSetting: String, ExpressibleByArgument, CaseIterable {
    case on, off
}

/// The largest message the framed server accepts: the echo client's largest (64 MiB),
/// above the framework's default of 4 MiB. With flow control on a call holds at most one
/// such message; with it off, what the client sends before it reads.
let framedMaximumMessageSize = 64 * 1024 * 1024

/// Framed mode: echoes each message of a call as a message, then ends the call with OK
/// once the client has finished sending. Runs on the call's event loop (the handler
/// face, no tasks), so an echo is one `send` from inside `didReceive`.
///
/// With flow control on, one message is asked for from the start (the policy below)
/// and the next only in `callDidWriteData`, once the echo of the last one is in the
/// kernel: a call never has more than one message pending here, and a client that sends
/// faster than it reads is pushed back by TCP. With it off, every message is echoed as it
/// arrives (the write queue is then bounded only by how fast the client reads its echoes).
final class FramedEchoHandler: CallHandler {
    let flowControl: Bool

    init(flowControl: Bool) {
        self.flowControl = flowControl
    }

    func call(_ call: Call, didReceive message: [UInt8]) {
        call.send(message)
    }

    func callDidWriteData(_ call: Call) {
        // Reported with flow control on only: the echo is out, so take the next message.
        if flowControl { call.receiveNextMessage() }
    }

    func callDidReceiveEnd(_ call: Call) {
        // The status goes after every queued echo.
        call.finish(.ok)
    }

    func call(_ call: Call, didCloseWith status: CallStatus) {}
}

/// Flow control on, with the first message already asked for: ``ManualFlowController``'s
/// semantics (deliver only what was asked for; report each write) after one
/// `receiveNextMessage()`.
///
/// Why not `CallConfiguration(enableFlowControl: true)` plus `call.receiveNextMessage()` in
/// `makeHandler`: the server attaches the handler (and only then may the call read) on
/// the call's loop after `makeHandler` returns, and a request that reaches the loop first
/// starts reading a connection that has no handler yet, losing the first bytes. A
/// handler has no "started" event to ask from, so the initial demand lives in the policy.
struct FirstMessageAskedFlowController: FlowController {
    private var manual = ManualFlowController()
    init() { manual.request(1) }
    var reportsWrites: Bool { manual.reportsWrites }
    var mayDeliver: Bool { manual.mayDeliver }
    mutating func didDeliver(bytes: Int) { manual.didDeliver(bytes: bytes) }
    mutating func request(_ count: Int) { manual.request(count) }
}

/// Echoes every byte back on the connection's own loop.
///
/// The hot path allocates nothing: bytes are written borrowed, and the backend copies
/// only what the kernel did not take. When bytes stay queued, reading stops until the
/// queue drains, so a peer that does not read its echo is pushed back by TCP and the
/// server's memory stays bounded.
///
/// `@unchecked Sendable`: every method runs on the connection's event loop, one at a
/// time (the `ConnectionHandler` contract), so the mutable state needs no lock.
final class RawEchoHandler: ConnectionHandler, @unchecked Sendable {
    /// Held until the connection closes (the connection holds us too: the cycle is
    /// broken in `connectionDidClose`).
    private var connection: (any Connection)?
    private var paused = false
    /// Whether the process is suspended (policy keep): reading stays off until resumed.
    private var quiet = false
    /// The lifecycle registration, ended when the connection closes.
    private let registration = Mutex<LifecycleRegistration?>(nil)
    /// Told when the connection closed (the server forgets it).
    private let onClose: @Sendable () -> Void

    init(_ connection: any Connection, onClose: @escaping @Sendable () -> Void) {
        self.connection = connection
        self.onClose = onClose
    }

    func connectionDidRead(_ bytes: UnsafeRawBufferPointer) {
        guard let connection else { return }
        connection.write(borrowing: bytes, completion: nil)
        if !paused, connection.pendingWriteBytes > 0 {
            paused = true
            connection.stopReading()
        }
    }

    func connectionDidDrainWrites() {
        guard paused, let connection else { return }
        paused = false
        if !quiet { connection.startReading() }
    }

    /// Registers the connection with `lifecycle` under `policy`; with `.keep` it stops
    /// reading while suspended (the hooks hop to the connection's loop and wait for it,
    /// so the suspend completes only once the connection is quiet).
    func follow(_ lifecycle: Lifecycle, policy: SuspendPolicy) {
        guard let connection else { return }
        guard policy == .keep else {
            // Closed on suspend: nothing to quiet, so no hooks (three closures less per
            // connection, measured in Benchmarks' idle memory).
            let made = lifecycle.register(connection, policy: policy)
            registration.withLock { $0 = made }
            return
        }
        let loop = connection.eventLoop
        let quiet: @Sendable (Bool) async -> Void = { quiet in
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                loop.execute {
                    self.setQuiet(quiet)
                    continuation.resume()
                }
            }
        }
        let made = lifecycle.register(
            connection, policy: policy,
            willSuspend: { await quiet(true) },
            didResume: { await quiet(false) })
        registration.withLock { $0 = made }
    }

    /// On the loop: stops or restarts reading for a suspension.
    private func setQuiet(_ quiet: Bool) {
        guard let connection, self.quiet != quiet else { return }
        self.quiet = quiet
        if quiet {
            connection.stopReading()
        } else if !paused {
            connection.startReading()
        }
    }

    func connectionDidReadEnd() {
        guard let connection else { return }
        // The FIN goes after every queued echo; then we are done with this peer.
        connection.shutdownOutput { _ in connection.close() }
    }

    func connectionDidClose(error: TransportError?) {
        connection = nil
        registration.withLock { $0 }?.cancel()
        onClose()
    }
}

/// Prints to standard error and exits 1.
func fail(_ message: String) -> Never {
    writeStandardError("echo-server: error: \(message)\n")
    exit(1)
}

/// Writes straight to descriptor 2 (the C `stderr` global is not concurrency-safe).
func writeStandardError(_ text: String) { ToolOutput.writeStandardError(text) }
