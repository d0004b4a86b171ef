import Foundation
import Testing

/// echo-server under job-control signals: `kill -TSTP` suspends it (it prints
/// `suspended`, its port refuses connects, open connections follow `--suspend-policy`),
/// `kill -CONT` resumes it (it prints `resumed` and echoes again on the same port). The
/// client side is plain sockets, so nothing of Switchyard's is on both ends.
@Suite("echo-server suspend and resume", .timeLimit(.minutes(2)))
struct SuspendResumeTests {
    @Test("SIGTSTP suspends echo-server and refuses connects; SIGCONT resumes it on the same port", arguments: socketBackends, ["close", "keep"])
    func suspendAndResume(backend: String, policy: String) async throws {
        let (server, port) = try await startEchoServer(backend: backend, extra: ["--suspend-policy", policy])
        defer { server.killIfRunning() }

        let open = try PlainSocket(port: port)
        #expect(try open.echo(Array("before".utf8)), "\(server.report)")

        server.send(SIGTSTP)
        try await waitForExactLine("suspended", count: 1, in: server)
        let start = ContinuousClock.now
        #expect(PlainSocket.connectError(port: port) == ECONNREFUSED, "a connect while suspended was not refused\n\(server.report)")
        let refusal = ContinuousClock.now - start
        #expect(refusal < .milliseconds(100), "the refusal took \(refusal)")

        let during = Array("during the suspension".utf8)
        if policy == "close" {
            // Closed by the server: end of stream (or a reset), at once.
            #expect(open.receiveEnd(), "the open connection was not closed on suspend (policy close)\n\(server.report)")
        } else {
            // Kept open and quiet: what is sent now is not echoed until the resume.
            try open.send(during)
            #expect(open.receive(count: during.count, timeout: 0.3) == nil, "the kept connection echoed while suspended")
        }

        server.send(SIGCONT)
        try await waitForExactLine("resumed", count: 1, in: server)
        if policy == "keep" {
            #expect(open.receive(count: during.count, timeout: 5) == during, "the kept connection did not echo after the resume\n\(server.report)")
        }
        open.close()
        let fresh = try PlainSocket(port: port)
        #expect(try fresh.echo(Array("after".utf8)), "no echo on port \(port) after the resume\n\(server.report)")
        fresh.close()

        // A second round, and SIGCONT while running changes nothing.
        server.send(SIGCONT)
        server.send(SIGTSTP)
        try await waitForExactLine("suspended", count: 2, in: server)
        server.send(SIGCONT)
        try await waitForExactLine("resumed", count: 2, in: server)
        let again = try PlainSocket(port: port)
        #expect(try again.echo(Array("again".utf8)), "\(server.report)")
        again.close()
        await expectCleanStop(server)
        #expect(server.stdout.split(separator: "\n").filter { $0 == "resumed" }.count == 2, "\(server.report)")
    }

    @Test("With --stop-after-suspend, SIGTSTP suspends then stops the process; SIGCONT continues and resumes it")
    func stopAfterSuspend() async throws {
        let (server, port) = try await startEchoServer(backend: "bsd", extra: ["--stop-after-suspend"])
        defer { server.killIfRunning() }
        server.send(SIGTSTP)
        try await waitForExactLine("suspended", count: 1, in: server)
        let stopped = ContinuousClock.now + .seconds(5)
        while processState(server.processIdentifier) != "T", ContinuousClock.now < stopped {
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(processState(server.processIdentifier) == "T", "echo-server did not stop after suspending")
        #expect(PlainSocket.connectError(port: port) == ECONNREFUSED)
        server.send(SIGCONT)
        try await waitForExactLine("resumed", count: 1, in: server)
        let fresh = try PlainSocket(port: port)
        #expect(try fresh.echo(Array("after".utf8)), "\(server.report)")
        fresh.close()
        await expectCleanStop(server)
    }
}

/// Waits until `server` printed the line `text` (exactly) `count` times.
private func waitForExactLine(_ text: String, count: Int, in server: Subprocess, timeout: Duration = .seconds(10)) async throws {
    let until = ContinuousClock.now + timeout
    while server.stdout.split(separator: "\n").filter({ $0 == text }).count < count {
        if ContinuousClock.now >= until || !server.isRunning {
            throw SubprocessFailure("\(server.name) did not print '\(text)' \(count) time(s)\n\(server.report)")
        }
        try await Task.sleep(for: .milliseconds(5))
    }
}

/// The state letter of /proc/PID/stat (`T` when stopped).
private func processState(_ pid: Int32) -> String? {
    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
          let close = stat.lastIndex(of: ")") else { return nil }
    return stat[stat.index(after: close)...].split(separator: " ").first.map(String.init)
}

/// A blocking TCP socket to 127.0.0.1 (the test's own client, not Switchyard's).
private final class PlainSocket {
    let fd: Int32

    init(port: Int) throws {
        let (fd, error) = PlainSocket.connect(port: port)
        guard let fd else { throw SubprocessFailure("connect to 127.0.0.1:\(port) failed: errno \(error)") }
        self.fd = fd
    }

    /// The errno of a connect to `port` (0 if it connected).
    static func connectError(port: Int) -> Int32 {
        let (fd, error) = connect(port: port)
        if let fd { Glibc.close(fd) }
        return error
    }

    private static func connect(port: Int) -> (Int32?, Int32) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return (nil, errno) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        if result != 0 {
            let error = errno
            Glibc.close(fd)
            return (nil, error)
        }
        return (fd, 0)
    }

    func send(_ bytes: [UInt8]) throws {
        let sent = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        guard sent == bytes.count else { throw SubprocessFailure("send failed: errno \(errno)") }
    }

    /// `count` bytes, or nil when they did not all arrive within `timeout` seconds.
    func receive(count: Int, timeout: Double) -> [UInt8]? {
        var received: [UInt8] = []
        let until = Date().addingTimeInterval(timeout)
        while received.count < count {
            let left = until.timeIntervalSinceNow
            guard left > 0 else { return nil }
            var poll = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard Glibc.poll(&poll, 1, Int32(left * 1000)) > 0 else { return nil }
            var buffer = [UInt8](repeating: 0, count: count - received.count)
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            guard n > 0 else { return nil }
            received += buffer[..<n]
        }
        return received
    }

    /// Whether the peer ended the stream (end of file or a reset) within 5 seconds.
    func receiveEnd() -> Bool {
        var poll = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard Glibc.poll(&poll, 1, 5000) > 0 else { return false }
        var byte: UInt8 = 0
        let n = recv(fd, &byte, 1, 0)
        return n == 0 || (n < 0 && errno == ECONNRESET)
    }

    func echo(_ bytes: [UInt8]) throws -> Bool {
        try send(bytes)
        return receive(count: bytes.count, timeout: 5) == bytes
    }

    func close() { Glibc.close(fd) }
}
