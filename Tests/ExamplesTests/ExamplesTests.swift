import Foundation
import Testing

/// The socket backends the examples run on. A new socket backend (say `libuv`) is one
/// more word here; the in-memory backend cannot be reached over TCP, so it is not listed.
let socketBackends = ["bsd", "libuv"]

/// Starts `echo-server` on a free port and returns it with the port it printed.
func startEchoServer(backend: String, extra: [String] = []) async throws -> (server: Subprocess, port: Int) {
    let server = try Subprocess(
        try Products.path("echo-server"), ["--backend", backend, "--host", "127.0.0.1", "--port", "0"] + extra,
        name: "echo-server(\(backend))")
    return (server, try await listeningPort(of: server, tool: "echo-server", backend: backend))
}

/// The port `server` (the tool `tool`) says it listens on in its ready line, `TOOL:
/// listening on 127.0.0.1:PORT (backend NAME)`; kills it when the line is not that.
func listeningPort(of server: Subprocess, tool: String, backend: String) async throws -> Int {
    do {
        let line = try await server.waitForLine(containing: "listening on")
        guard line.hasPrefix("\(tool): listening on 127.0.0.1:"), line.hasSuffix("(backend \(backend))"),
              let address = line.split(separator: " ").dropFirst(3).first,
              let colon = address.lastIndex(of: ":"),
              let port = Int(address[address.index(after: colon)...]), port > 0
        else { throw SubprocessFailure("unexpected ready line: \(line)") }
        return port
    } catch {
        server.killIfRunning()
        throw error
    }
}

/// Stops a server with `signal` and expects a clean exit 0.
func expectCleanStop(_ server: Subprocess, with signal: Int32 = SIGTERM, sourceLocation: SourceLocation = #_sourceLocation) async {
    let ending = await server.stop(with: signal)
    #expect(ending == .exit(0), "\(server.name) should exit 0 on signal \(signal)\n\(server.report)", sourceLocation: sourceLocation)
}

@Suite("echo-server and echo-client", .timeLimit(.minutes(3)))
struct ExamplesTests {
    /// A peer Switchyard did not write (Python's socket module) checks the raw echo:
    /// 1 B, 64 KiB and 1 MiB of random bytes sent in random chunks while a second thread
    /// reads, compared byte for byte; then it half-closes and expects the server to end
    /// the stream once everything is echoed. Three connections also run at once.
    @Test("echo-server echoes a foreign peer byte for byte", arguments: socketBackends)
    func serverAgainstForeignClient(backend: String) async throws {
        let (server, port) = try await startEchoServer(backend: backend)
        defer { server.killIfRunning() }

        let peer = try Python.start(PythonPeers.echoChecker, ["127.0.0.1", String(port)], name: "python echo checker")
        defer { peer.killIfRunning() }
        let ending = await peer.wait(timeout: .seconds(60))
        #expect(ending == .exit(0), "the Python peer found a problem\n\(peer.report)\n\(server.report)")
        #expect(peer.stdout.contains("all echoes verified"), "\(peer.report)")

        await expectCleanStop(server)
    }

    /// echo-client against an echo server Switchyard did not write (threaded Python).
    @Test("echo-client checks a foreign echo server", arguments: socketBackends)
    func clientAgainstForeignServer(backend: String) async throws {
        let peer = try Python.start(PythonPeers.echoServer, [], name: "python echo server")
        defer { peer.killIfRunning() }
        let portLine = try await peer.waitForLine(containing: "port ")
        let port = try #require(Int(portLine.dropFirst("port ".count)), "bad line from the Python server: \(portLine)")

        let client = try Subprocess(
            try Products.path("echo-client"),
            ["--backend", backend, "--port", String(port), "--count", "200", "--size", "1000", "--concurrency", "4"],
            name: "echo-client(\(backend))")
        let ending = await client.wait()
        #expect(ending == .exit(0), "\(client.report)\n\(peer.report)")
        expectSummary(client.stdout, messages: 800, bytes: 800_000, backend: backend)

        peer.killIfRunning()
        await peer.wait()
    }

    /// Both Switchyard: every pairing of socket backends, several sizes.
    @Test("echo-client against echo-server", arguments: socketBackends, socketBackends)
    func clientAgainstServer(serverBackend: String, clientBackend: String) async throws {
        let (server, port) = try await startEchoServer(backend: serverBackend, extra: ["--event-loops", "2"])
        defer { server.killIfRunning() }

        // Small messages, messages near the socket buffers, messages far above them (the
        // server must push back and the client must read while it writes), many connections.
        for (count, size, concurrency) in [(500, 64, 4), (20, 256 * 1024, 3), (2, 24 * 1024 * 1024, 2), (50, 1, 64)] {
            let client = try Subprocess(
                try Products.path("echo-client"),
                ["--backend", clientBackend, "--port", String(port),
                 "--count", String(count), "--size", String(size), "--concurrency", String(concurrency)],
                name: "echo-client(\(clientBackend))")
            let ending = await client.wait()
            #expect(ending == .exit(0), "\(count) x \(size) B x \(concurrency)\n\(client.report)\n\(server.report)")
            expectSummary(client.stdout, messages: count * concurrency, bytes: count * concurrency * size, backend: clientBackend)
        }

        // The server survived all of it and still stops cleanly (SIGINT this time).
        #expect(server.isRunning, "\(server.report)")
        await expectCleanStop(server, with: SIGINT)
    }

    /// Framed mode: a call per connection, every message echoed as a message, then status
    /// OK; every pairing of socket backends, flow control on and off (the same on both
    /// ends). The in-memory backend is not here: it cannot be reached from another process.
    @Test("framed echo-client against framed echo-server", arguments: framedPairs)
    func framedClientAgainstFramedServer(serverBackend: String, clientBackend: String, flowControl: String) async throws {
        let (server, port) = try await startEchoServer(
            backend: serverBackend, extra: ["--mode", "framed", "--flow-control", flowControl, "--event-loops", "2"])
        defer { server.killIfRunning() }
        #expect(server.stdout.contains("echo-server: framed mode, flow control \(flowControl)\n"), "\(server.report)")

        // Small messages on several calls at once, messages near the socket buffers, and
        // messages above the framework's default 4 MiB maximum (both ends raise it).
        for (count, size, concurrency) in [(200, 64, 4), (10, 256 * 1024, 2), (2, 5 * 1024 * 1024, 1), (20, 1, 16)] {
            let client = try Subprocess(
                try Products.path("echo-client"),
                ["--backend", clientBackend, "--port", String(port), "--mode", "framed", "--flow-control", flowControl,
                 "--count", String(count), "--size", String(size), "--concurrency", String(concurrency)],
                name: "echo-client(\(clientBackend), framed, flow control \(flowControl))")
            let ending = await client.wait()
            let what = "\(count) x \(size) B x \(concurrency), flow control \(flowControl)"
            #expect(ending == .exit(0), "\(what)\n\(client.report)\n\(server.report)")
            expectSummary(client.stdout, messages: count * concurrency, bytes: count * concurrency * size, backend: clientBackend)
            #expect(
                client.stdout.contains("echo-client: backend \(clientBackend), framed (flow control \(flowControl)), \(concurrency) connection"),
                "\(what): the header line names the mode\n\(client.report)")
        }

        #expect(server.isRunning, "\(server.report)")
        await expectCleanStop(server)
    }

    static let framedPairs: [(String, String, String)] = socketBackends.flatMap { server in
        socketBackends.flatMap { client in ["off", "on"].map { (server, client, $0) } }
    }

    /// Flow control is each end's own policy, not part of the protocol: a client with it
    /// on talks to a server with it off, and the other way round.
    @Test("framed flow control on one end only", arguments: [("on", "off"), ("off", "on")])
    func framedFlowControlOnOneEnd(serverFlowControl: String, clientFlowControl: String) async throws {
        let backend = try #require(socketBackends.first)
        let (server, port) = try await startEchoServer(backend: backend, extra: ["--mode", "framed", "--flow-control", serverFlowControl])
        defer { server.killIfRunning() }
        let client = try Subprocess(
            try Products.path("echo-client"),
            ["--backend", backend, "--port", String(port), "--mode", "framed", "--flow-control", clientFlowControl,
             "--count", "100", "--size", "1000", "--concurrency", "2"])
        #expect(await client.wait() == .exit(0), "\(client.report)\n\(server.report)")
        expectSummary(client.stdout, messages: 200, bytes: 200_000, backend: backend)
        await expectCleanStop(server)
    }

    /// A framed client against a RAW echo server: the raw server sends the client's
    /// HTTP/2 preface back, which is not a server's preface (a SETTINGS frame). The
    /// client must say so (the call ended `unavailable`: the server does not speak
    /// HTTP/2; a hint to use `--mode framed`) and exit 1 promptly: no summary, no hang.
    @Test("framed echo-client against a raw echo-server fails clearly", arguments: socketBackends, ["off", "on"])
    func framedClientAgainstRawServer(backend: String, flowControl: String) async throws {
        let (server, port) = try await startEchoServer(backend: backend)
        defer { server.killIfRunning() }
        let client = try Subprocess(
            try Products.path("echo-client"),
            ["--backend", backend, "--port", String(port), "--mode", "framed", "--flow-control", flowControl,
             "--count", "10", "--size", "100", "--concurrency", "2"],
            name: "echo-client(\(backend), framed)", hardTimeout: .seconds(30))
        let ending = await client.wait(timeout: .seconds(20))
        #expect(ending == .exit(1), "\(client.report)")
        let stderr = client.stderr
        for word in ["unavailable", "does not speak HTTP/2", "status", "--mode framed"] {
            #expect(stderr.contains(word), "the error should mention '\(word)'\n\(client.report)")
        }
        #expect(!client.stdout.contains("messages "), "no summary after a failed call\n\(client.report)")
        // The raw server is unharmed.
        #expect(server.isRunning, "\(server.report)")
        await expectCleanStop(server)
    }

    /// `SWITCHYARD_BACKEND` picks the backend when `--backend` is absent.
    @Test("SWITCHYARD_BACKEND selects the backend")
    func environmentSelectsBackend() async throws {
        let bad = try Subprocess(try Products.path("echo-server"), ["--port", "0"], environment: ["SWITCHYARD_BACKEND": "nosuch"])
        #expect(await bad.wait() != .exit(0))
        #expect(bad.stderr.contains("nosuch") && bad.stderr.contains("bsd"), "\(bad.report)")

        let backend = try #require(socketBackends.first)
        let server = try Subprocess(try Products.path("echo-server"), ["--port", "0"], environment: ["SWITCHYARD_BACKEND": backend])
        defer { server.killIfRunning() }
        let line = try await server.waitForLine(containing: "listening on")
        #expect(line.hasSuffix("(backend \(backend))"), "\(line)")
        await expectCleanStop(server)
    }

    /// A connect that is refused ends the client with exit 1 and the error's code and reason.
    @Test("echo-client reports a refused connect", arguments: socketBackends)
    func clientReportsRefusedConnect(backend: String) async throws {
        let port = try closedPort()
        let client = try Subprocess(try Products.path("echo-client"), ["--backend", backend, "--port", String(port)])
        #expect(await client.wait() == .exit(1), "\(client.report)")
        #expect(client.stderr.contains("unavailable") && client.stderr.contains("refused"), "\(client.report)")
    }

    static let badClientArguments: [([String], [String])] = [
        (["--count", "0"], ["--count", "0"]),
        (["--size", "0"], ["--size"]),
        (["--size", String(64 * 1024 * 1024 + 1)], ["--size"]),
        (["--concurrency", "0"], ["--concurrency"]),
        (["--concurrency", "10001"], ["--concurrency"]),
        (["--port", "70000"], ["--port", "70000"]),
        (["--port", "0"], ["--port"]),
        (["--backend", "nosuch"], ["nosuch", "bsd"]),
        (["--mode", "stream"], ["stream", "raw", "framed"]),
        (["--mode", "framed", "--flow-control", "maybe"], ["--flow-control", "maybe", "on", "off"]),
        (["--flow-control", "maybe"], ["--flow-control", "maybe"]),
        (["--flow-control", "on"], ["--flow-control", "--mode framed"]),
        (["--host", "not a host"], ["--host"]),
        (["--count", "many"], ["many"]),
        (["--frobnicate"], ["--frobnicate"]),
    ]

    /// Bad arguments: a non-zero exit and a message that names the problem.
    @Test("echo-client rejects bad arguments", arguments: badClientArguments)
    func clientRejectsBadArguments(arguments: [String], mentions: [String]) async throws {
        let client = try Subprocess(try Products.path("echo-client"), arguments)
        let ending = await client.wait(timeout: .seconds(30))
        #expect(ending == .exit(64), "\(arguments): ArgumentParser exits 64 on a usage error, got \(ending)\n\(client.report)")
        #expect(ending != .exit(0), "\(arguments)\n\(client.report)")
        for word in mentions {
            #expect(client.stderr.contains(word), "\(arguments): the message should mention '\(word)'\n\(client.report)")
        }
    }

    static let badServerArguments: [([String], [String])] = [
        (["--port", "70000"], ["--port", "70000"]),
        (["--port", "-1"], ["--port"]),
        (["--backend", "nosuch"], ["nosuch", "bsd"]),
        (["--mode", "stream"], ["stream", "raw", "framed"]),
        (["--mode", "framed", "--flow-control", "maybe"], ["--flow-control", "maybe", "on", "off"]),
        (["--flow-control", "on"], ["--flow-control", "--mode framed"]),
        (["--event-loops", "0"], ["--event-loops"]),
        (["--host", "bad host!"], ["--host"]),
    ]

    @Test("echo-server rejects bad arguments", arguments: badServerArguments)
    func serverRejectsBadArguments(arguments: [String], mentions: [String]) async throws {
        let server = try Subprocess(try Products.path("echo-server"), arguments)
        defer { server.killIfRunning() }
        let ending = await server.wait(timeout: .seconds(30))
        #expect(ending != .exit(0), "\(arguments)\n\(server.report)")
        #expect(!server.stdout.contains("listening on"), "\(arguments)\n\(server.report)")
        for word in mentions {
            #expect(server.stderr.contains(word), "\(arguments): the message should mention '\(word)'\n\(server.report)")
        }
    }

    /// A socket backend grows the process's descriptor table once at start
    /// (`TransportConfiguration.reservedDescriptors`, default 16,384, clamped to the soft
    /// descriptor limit) instead of doubling it under load, where each growth in a
    /// threaded process waits for an RCU grace period. A fresh process starts with 64
    /// slots; `FDSize` in /proc shows the table's size.
    @Test("echo-server reserves its descriptor table at start", arguments: socketBackends)
    func serverReservesDescriptorTable(backend: String) async throws {
        var limit = rlimit()
        #expect(getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0)
        let expected = Int(min(16_384, limit.rlim_cur))
        try #require(expected > 64, "the soft descriptor limit (\(limit.rlim_cur)) leaves nothing to reserve")
        let (server, _) = try await startEchoServer(backend: backend)
        defer { server.killIfRunning() }
        let status = try String(contentsOfFile: "/proc/\(server.pid)/status", encoding: .utf8)
        let size = status.split(separator: "\n").first { $0.hasPrefix("FDSize:") }
            .flatMap { Int($0.dropFirst("FDSize:".count).trimmingCharacters(in: .whitespaces)) }
        #expect((size ?? 0) >= expected, "FDSize \(size.map(String.init) ?? "missing"), want at least \(expected)")
        await expectCleanStop(server)
    }

    /// A port taken by someone else: exit 1 naming the problem, not a crash.
    @Test("echo-server reports a port in use", arguments: socketBackends)
    func serverReportsPortInUse(backend: String) async throws {
        let (first, port) = try await startEchoServer(backend: backend)
        defer { first.killIfRunning() }
        let second = try Subprocess(try Products.path("echo-server"), ["--backend", backend, "--port", String(port)])
        defer { second.killIfRunning() }
        #expect(await second.wait(timeout: .seconds(30)) == .exit(1), "\(second.report)")
        #expect(second.stderr.contains("address in use"), "\(second.report)")
        await expectCleanStop(first)
    }
}

/// Checks the client's two summary lines.
func expectSummary(_ output: String, messages: Int, bytes: Int, backend: String, sourceLocation: SourceLocation = #_sourceLocation) {
    let lines = output.split(separator: "\n")
    #expect(lines.contains { $0.hasPrefix("echo-client: backend \(backend),") }, "\(output)", sourceLocation: sourceLocation)
    guard let summary = lines.first(where: { $0.hasPrefix("messages ") }) else {
        Issue.record("no summary line in:\n\(output)", sourceLocation: sourceLocation)
        return
    }
    #expect(summary.contains("messages \(messages) "), "\(output)", sourceLocation: sourceLocation)
    #expect(summary.contains("bytes \(bytes) "), "\(output)", sourceLocation: sourceLocation)
    for field in ["time ", "throughput ", "MiB/s", "latency p50 ", "p99 "] {
        #expect(summary.contains(field), "missing '\(field)' in \(output)", sourceLocation: sourceLocation)
    }
}

/// A local port nothing listens on (bound, then released).
func closedPort() throws -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw SubprocessFailure("socket: \(errno)") }
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = in_addr_t(UInt32(0x7f00_0001).bigEndian)
    address.sin_port = 0
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let ok = withUnsafeMutablePointer(to: &address) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { sockaddrPointer in
            bind(fd, sockaddrPointer, length) == 0 && getsockname(fd, sockaddrPointer, &length) == 0
        }
    }
    guard ok else { throw SubprocessFailure("bind: \(errno)") }
    return Int(UInt16(bigEndian: address.sin_port))
}

/// Peers Switchyard did not write.
enum PythonPeers {
    /// argv: host port. Verifies the raw echo; prints "all echoes verified" and exits 0,
    /// or prints what went wrong and exits 1.
    static let echoChecker = #"""
import os, random, socket, sys, threading

host, port = sys.argv[1], int(sys.argv[2])

def exchange(label, payload, seed):
    rng = random.Random(seed)
    sock = socket.create_connection((host, port), timeout=30)
    send_error = []

    def sender():
        try:
            view = memoryview(payload)
            offset = 0
            while offset < len(view):
                n = rng.randint(1, 65536)
                sock.sendall(view[offset:offset + n])
                offset += n
            sock.shutdown(socket.SHUT_WR)  # half-close: the server must echo the rest, then end
        except Exception as e:
            send_error.append(e)

    thread = threading.Thread(target=sender)
    thread.start()
    received = bytearray()
    try:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break  # the server ended the stream after echoing
            received += chunk
            if len(received) > len(payload):
                break
    except socket.timeout:
        raise SystemExit("%s: timed out after %d of %d bytes echoed (no end of stream after the half-close?)"
                         % (label, len(received), len(payload)))
    finally:
        thread.join()
        sock.close()
    if send_error:
        raise SystemExit("%s: sending failed: %r" % (label, send_error[0]))
    if len(received) != len(payload):
        raise SystemExit("%s: sent %d bytes, got %d back before end of stream" % (label, len(payload), len(received)))
    if received != payload:
        at = next(i for i in range(len(payload)) if received[i] != payload[i])
        raise SystemExit("%s: byte %d differs: sent 0x%02x, got 0x%02x" % (label, at, payload[at], received[at]))
    print("%s: %d bytes echoed and verified, then end of stream" % (label, len(payload)))

try:
    for i, size in enumerate([1, 64 * 1024, 1024 * 1024]):
        exchange("%d B" % size, os.urandom(size), i)

    # Three connections at once, each with all three sizes back to back.
    errors = []
    def run(n):
        try:
            exchange("concurrent #%d" % n, os.urandom(1) + os.urandom(64 * 1024) + os.urandom(1024 * 1024), 100 + n)
        except BaseException as e:
            errors.append(e)
    threads = [threading.Thread(target=run, args=(n,)) for n in range(3)]
    for t in threads: t.start()
    for t in threads: t.join()
    if errors:
        raise SystemExit(str(errors[0]))
except socket.timeout:
    print("timed out waiting for the echo server", file=sys.stderr)
    sys.exit(1)
except SystemExit as e:
    if e.code not in (None, 0):
        print(e.code, file=sys.stderr)
        sys.exit(1)
    raise
except Exception as e:
    print("error: %r" % (e,), file=sys.stderr)
    sys.exit(1)
print("all echoes verified")
"""#

    /// A threaded TCP echo server on 127.0.0.1, port 0; prints "port N" when ready.
    static let echoServer = #"""
import socket, sys, threading

server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
server.bind(("127.0.0.1", 0))
server.listen(128)
print("port %d" % server.getsockname()[1], flush=True)

def serve(conn):
    with conn:
        while True:
            data = conn.recv(65536)
            if not data:
                break
            conn.sendall(data)

while True:
    conn, _ = server.accept()
    threading.Thread(target=serve, args=(conn,), daemon=True).start()
"""#
}
