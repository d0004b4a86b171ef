// echo-server: a raw TCP echo server on any Switchyard socket backend.
//
//     echo-server [--backend NAME] [--host HOST] [--port PORT] [--mode raw] [--event-loops N]
//
// Every byte a peer sends comes back unchanged, so any TCP peer (nc, socat, a script,
// another echo client) can talk to it. When the peer shuts its output down, the server
// echoes what is left, shuts its own output down, and closes. SIGINT or SIGTERM stops it
// gracefully (exit 0); a second signal during the grace period stops it at once.

import ArgumentParser
import Dispatch
import Glibc
import Switchyard
import SwitchyardBackends

@main
struct EchoServer: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "echo-server",
        abstract: "A TCP echo server on a Switchyard backend chosen at run time.",
        discussion: """
            Prints 'echo-server: listening on HOST:PORT (backend NAME)' once it accepts \
            connections, and runs until SIGINT or SIGTERM.
            """)

    @Option(help: "The backend (default: $\(BackendRegistry.environmentVariable), else '\(Backends.defaultName)'). Registered: \(Backends.registry.names.joined(separator: ", ")).")
    var backend: String?

    @Option(help: "The address to listen on.")
    var host = "127.0.0.1"

    @Option(help: "The port to listen on; 0 picks a free one.")
    var port = 7007

    @Option(help: "What to echo: 'raw' echoes bytes as they come.")
    var mode: EchoMode = .raw

    @Option(name: .customLong("event-loops"), help: "Event loop threads (default: one per core).")
    var eventLoops: Int?

    @Option(name: .customLong("grace-period"), help: "Seconds open connections get to finish at shutdown.")
    var gracePeriod = 2.0

    func validate() throws {
        guard (0...65535).contains(port) else {
            throw ValidationError("--port \(port) is out of range: use 0...65535 (0 picks a free port)")
        }
        do {
            try Endpoint.validate(host: host)
        } catch {
            throw ValidationError("--host: \(error.message)")
        }
        if let eventLoops, !(1...1024).contains(eventLoops) {
            throw ValidationError("--event-loops \(eventLoops) is out of range: use 1...1024")
        }
        guard gracePeriod >= 0, gracePeriod <= 3600 else {
            throw ValidationError("--grace-period \(gracePeriod) is out of range: use 0...3600 seconds")
        }
        do {
            _ = try Backends.registry.backend(named: Backends.selectedName(explicit: backend))
        } catch {
            throw ValidationError("--backend: \(error.message)")
        }
    }

    func run() async throws {
        // Install the handlers before any transport thread exists.
        let signals = SignalWaiter(SIGINT, SIGTERM)
        let name = Backends.selectedName(explicit: backend)
        let transport: any Transport
        let listener: any Listener
        do {
            transport = try Backends.makeTransport(named: name, configuration: TransportConfiguration(eventLoopCount: eventLoops))
        } catch {
            fail("cannot start backend '\(name)': \(error)")
        }
        do {
            listener = try await transport.listen(on: Endpoint(host: host, port: port))
        } catch {
            await transport.shutdownNow()
            fail("cannot listen on \(Endpoint(host: host, port: port)): \(error)")
        }

        print("echo-server: listening on \(listener.localAddress) (backend \(transport.name))")
        fflush(nil)

        let acceptor = Task {
            for await connection in listener.connections {
                connection.setHandler(RawEchoHandler(connection))
                connection.startReading()
            }
        }

        let first = await signals.next()
        print("echo-server: \(signalName(first)), shutting down")
        fflush(nil)
        listener.close()
        await acceptor.value

        // A second signal during the grace period cuts it short.
        let forced = Task {
            _ = await signals.next()
            await transport.shutdownNow()
        }
        await transport.shutdown(gracePeriod: .milliseconds(Int64(gracePeriod * 1000)))
        forced.cancel()
        print("echo-server: stopped")
        fflush(nil)
    }
}

/// The modes the server speaks. Framed mode (5-byte prefixed messages) comes later.
enum EchoMode: String, ExpressibleByArgument, CaseIterable {
    case raw
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

    init(_ connection: any Connection) {
        self.connection = connection
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
        connection.startReading()
    }

    func connectionDidReadEnd() {
        guard let connection else { return }
        // The FIN goes after every queued echo; then we are done with this peer.
        connection.shutdownOutput { _ in connection.close() }
    }

    func connectionDidClose(error: TransportError?) {
        connection = nil
    }
}

/// Waits for signals without doing anything unsafe in a signal handler: the handler
/// only writes the signal number to a pipe, and a thread reads it.
final class SignalWaiter: Sendable {
    private let readEnd: Int32

    init(_ signals: Int32...) {
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { fail("pipe: \(String(cString: strerror(errno)))") }
        for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        readEnd = fds[0]
        signalPipeWriteEnd = fds[1]
        for signal in signals {
            var action = sigaction()
            action.__sigaction_handler.sa_handler = { signal in
                var byte = UInt8(truncatingIfNeeded: signal)
                let saved = errno
                _ = write(signalPipeWriteEnd, &byte, 1)
                errno = saved
            }
            sigemptyset(&action.sa_mask)
            action.sa_flags = SA_RESTART
            sigaction(signal, &action, nil)
        }
    }

    /// The next signal that arrives.
    func next() async -> Int32 {
        let fd = readEnd
        return await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                var byte: UInt8 = 0
                while true {
                    let n = read(fd, &byte, 1)
                    if n == 1 { break }
                    if n < 0, errno == EINTR { continue }
                    fail("reading the signal pipe failed")
                }
                continuation.resume(returning: Int32(byte))
            }
        }
    }
}

/// The write end of the signal pipe: set once, before any handler is installed, and
/// only read afterwards (from the signal handler, which cannot capture context).
nonisolated(unsafe) private var signalPipeWriteEnd: Int32 = -1

private func signalName(_ signal: Int32) -> String {
    switch signal {
    case SIGINT: "SIGINT"
    case SIGTERM: "SIGTERM"
    default: "signal \(signal)"
    }
}

/// Prints to standard error and exits 1.
func fail(_ message: String) -> Never {
    writeStandardError("echo-server: error: \(message)\n")
    exit(1)
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
