import SwitchyardPosix
import Foundation
import Switchyard
import SwitchyardBackends
import Synchronization

/// Two network namespaces joined by a veth pair, made for one reachability test and
/// removed after it (shared/TESTING.md): the client's end at 10.215.1.1, the server's at
/// 10.215.1.2, where the test's HTTP servers listen. Names carry this process's id and a
/// counter. Nothing in the machine's own namespace is touched: the pair is made inside
/// the client's namespace, the nft rules go into a table inside the server's.
final class ReachabilityNetwork: Sendable {
    let client: String
    let server: String
    let serverAddress = "10.215.1.2"
    private static let counter = Atomic<Int>(0)

    /// Why these tests cannot run here, or nil (root, `ip`, `nft`, `python3`).
    static var unavailableReason: String? {
        if getuid() != 0 { return "needs root for network namespaces" }
        if !FileManager.default.isExecutableFile(atPath: "/usr/sbin/ip") { return "needs iproute2 (/usr/sbin/ip)" }
        if !FileManager.default.isExecutableFile(atPath: "/usr/sbin/nft") { return "needs nftables (/usr/sbin/nft)" }
        if python == nil { return "needs python3 on PATH" }
        return nil
    }

    static let python: String? = {
        let paths = (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":")
        return paths.map { "\($0)/python3" }.first { FileManager.default.isExecutableFile(atPath: $0) }
    }()

    private init(number: Int) {
        let pid = getpid()
        client = "syre-c-\(pid)-\(number)"
        server = "syre-s-\(pid)-\(number)"
    }

    static func make() throws -> ReachabilityNetwork {
        let number = counter.add(1, ordering: .relaxed).newValue
        let network = ReachabilityNetwork(number: number)
        let pid = String(getpid(), radix: 36)
        let link = "syrc\(pid)n\(number)", peer = "syrs\(pid)n\(number)"
        let c = network.client, s = network.server
        let steps: [[String]] = [
            ["netns", "add", c],
            ["netns", "add", s],
            ["-n", c, "link", "set", "lo", "up"],
            ["-n", s, "link", "set", "lo", "up"],
            ["-n", c, "link", "add", link, "type", "veth", "peer", "name", peer, "netns", s],
            ["-n", c, "addr", "add", "10.215.1.1/24", "dev", link],
            ["-n", s, "addr", "add", "\(network.serverAddress)/24", "dev", peer],
            ["-n", s, "link", "set", peer, "up"],
            ["-n", c, "link", "set", link, "up"],
        ]
        for step in steps where !run("/usr/sbin/ip", step) {
            network.remove()
            throw NetworkFailure("`ip \(step.joined(separator: " "))` failed")
        }
        return network
    }

    func remove() {
        _ = Self.run("/usr/sbin/ip", ["netns", "del", client])
        _ = Self.run("/usr/sbin/ip", ["netns", "del", server])
    }

    /// Drops every packet to and from TCP `port` in the server's namespace, carrier up.
    func blackHole(port: Int) throws {
        let nft = ["netns", "exec", server, "nft"]
        for rule in [
            ["add", "table", "inet", "syre"],
            ["add", "chain", "inet", "syre", "in", "{ type filter hook input priority 0; }"],
            ["add", "chain", "inet", "syre", "out", "{ type filter hook output priority 0; }"],
            ["add", "rule", "inet", "syre", "in", "tcp", "dport", "\(port)", "drop"],
            ["add", "rule", "inet", "syre", "out", "tcp", "sport", "\(port)", "drop"],
        ] where !Self.run("/usr/sbin/ip", nft + rule) {
            throw NetworkFailure("`nft \(rule.joined(separator: " "))` failed")
        }
    }

    /// Makes a transport of `backend` on a thread that entered the client's namespace, so
    /// its loop threads, and every socket they open, live there.
    func makeTransport(_ backend: String) async throws -> any Transport {
        try await NetworkNamespace.run(in: client) {
            try Backends.makeTransport(named: backend, configuration: TransportConfiguration(eventLoopCount: 1))
        }
    }

    /// Starts a test server in the server's namespace on `port` (see
    /// `ReachabilityServer.script` for the modes) and waits until it listens.
    func startServer(port: Int, mode: String) async throws -> ReachabilityServer {
        let server = try ReachabilityServer(namespace: self.server, port: port, mode: mode)
        try await server.waitForLine("ready")
        return server
    }

    @discardableResult
    static func run(_ tool: String, _ arguments: [String]) -> Bool {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: tool)
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        do { try process.run() } catch { return false }
        process.waitUntilExit()
        return process.terminationStatus == 0
    }
}

struct NetworkFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// A Python server (run with `ip netns exec`), its output collected line by line.
///
/// `@unchecked Sendable`: `Process` is not marked Sendable; after `run()` only its
/// thread-safe members are used (`terminate`, `waitUntilExit`, `isRunning`).
final class ReachabilityServer: @unchecked Sendable {
    private let process = Process()
    private let output = Output()

    /// What the server printed.
    private final class Output: Sendable {
        let text = Mutex<String>("")
    }

    /// Modes: `http` (http.server: `HEAD /` is 204, `/redirect` 302 to
    /// `http://portal.test/login`, `/unavailable` 503; each request printed as
    /// `HEAD <path> ua=<User-Agent> host=<Host>`); raw sockets that print `accepted` per
    /// connection and then answer `garbage` (not HTTP), `endless` (a head that never
    /// ends, for at most 30 s), `slow` (one byte every 100 ms, at most 30 s), or
    /// `silent` (nothing, for 30 s).
    static let script = #"""
import socket, sys, threading, time
from http.server import BaseHTTPRequestHandler, HTTPServer
port, mode = int(sys.argv[1]), sys.argv[2]
if mode == "http":
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        def do_HEAD(self):
            print("HEAD %s ua=%s host=%s" % (self.path, self.headers.get("User-Agent", ""), self.headers.get("Host", "")), flush=True)
            if self.path == "/redirect":
                self.send_response(302)
                self.send_header("Location", "http://portal.test/login")
            elif self.path == "/unavailable":
                self.send_response(503)
            else:
                self.send_response(204)
            self.send_header("Content-Length", "0")
            self.end_headers()
        def log_message(self, *args):
            pass
    HTTPServer.allow_reuse_address = True
    server = HTTPServer(("0.0.0.0", port), Handler)
    print("ready", flush=True)
    server.serve_forever()
else:
    def serve(conn):
        try:
            conn.recv(4096)
            end = time.monotonic() + 30
            if mode == "garbage":
                conn.sendall(b"SSH-2.0-OpenSSH_9.2\r\n\r\n")
            elif mode == "endless":
                conn.sendall(b"HTTP/1.1 200 OK\r\n")
                while time.monotonic() < end:
                    conn.sendall(b"X-Endless: " + b"a" * 1000 + b"\r\n")
            elif mode == "slow":
                while time.monotonic() < end:
                    conn.sendall(b"H")
                    time.sleep(0.1)
            else:
                time.sleep(30)
        except OSError:
            pass
        finally:
            conn.close()
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("0.0.0.0", port))
    listener.listen(16)
    print("ready", flush=True)
    while True:
        conn, _ = listener.accept()
        print("accepted", flush=True)
        threading.Thread(target=serve, args=(conn,), daemon=True).start()
"""#

    init(namespace: String, port: Int, mode: String) throws {
        guard let python = ReachabilityNetwork.python else { throw NetworkFailure("python3 is not on PATH") }
        process.executableURL = URL(fileURLWithPath: "/usr/sbin/ip")
        process.arguments = ["netns", "exec", namespace, python, "-u", "-c", Self.script, String(port), mode]
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        process.standardInput = FileHandle.nullDevice
        let output = self.output
        pipe.fileHandleForReading.readabilityHandler = { handle in
            let data = handle.availableData
            if data.isEmpty {
                handle.readabilityHandler = nil
                return
            }
            output.text.withLock { $0 += String(decoding: data, as: UTF8.self) }
        }
        try process.run()
    }

    deinit { stop() }

    var lines: [String] { output.text.withLock { $0 }.split(separator: "\n").map(String.init) }

    /// The lines `isIncluded` selects, once there are at least `count` of them, or those
    /// there are after `timeout`. The server prints a request before it answers, but its
    /// output comes through a pipe that this process reads on another thread: a client
    /// can have the answer before the line is here.
    func lines(atLeast count: Int, where isIncluded: (String) -> Bool, timeout: Duration = .seconds(10)) async -> [String] {
        let deadline = ContinuousClock.now + timeout
        while true {
            let selected = lines.filter(isIncluded)
            if selected.count >= count || ContinuousClock.now >= deadline { return selected }
            try? await Task.sleep(for: .milliseconds(10))
        }
    }

    func waitForLine(_ text: String, timeout: Duration = .seconds(10)) async throws {
        let deadline = ContinuousClock.now + timeout
        while !lines.contains(where: { $0.contains(text) }) {
            if !process.isRunning { throw NetworkFailure("the server ended before printing '\(text)': \(lines)") }
            if ContinuousClock.now >= deadline { throw NetworkFailure("the server printed no '\(text)' within \(timeout): \(lines)") }
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    /// Ends the server (the process `ip netns exec` became) with SIGKILL, and waits for
    /// it. (SIGTERM may be blocked in a child: it inherits the signal mask of the thread
    /// that started it.)
    func stop() {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
    }
}
