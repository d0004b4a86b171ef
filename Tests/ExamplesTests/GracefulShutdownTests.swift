import Foundation
import Switchyard
import SwitchyardBackends
import SwitchyardCalls
import Synchronization
import Testing

/// `kill -TERM` on a running echo-server under load: it runs in a
/// swift-service-lifecycle ServiceGroup. The first signal stops accepting at once (a
/// connect after it is refused), lets the open connections finish with every byte
/// echoed, and the server exits 0 once they closed; a second signal while connections are
/// open makes it exit at once, with 128 + 15 = 143 (what a shell reports for a process
/// SIGTERM ended: the open connections were cut, not finished).
///
/// The load is several connections streaming in both directions at once, held
/// mid-stream while the signal arrives. Raw: raw sockets on threads of this process.
/// Framed: one call on a `CallChannel` of its own per peer (so one HTTP/2 connection
/// each, as a gRPC client makes them), on the server's backend in this process; the
/// server's GOAWAY lets those calls finish, each with every message echoed and status OK.
@Suite("echo-server stops gracefully on SIGTERM, at once on a second", .serialized, .timeLimit(.minutes(3)))
struct GracefulShutdownTests {
    @Test("Under load, SIGTERM refuses new connects at once, open connections finish byte for byte, exit 0 after they close",
          arguments: socketBackends, ["raw", "framed"])
    func gracefulUnderLoad(backend: String, mode: String) async throws {
        let (server, port) = try await startEchoServer(
            backend: backend, extra: ["--mode", mode, "--event-loops", "2", "--grace-period", "60"])
        defer { server.killIfRunning() }
        try await withStreamingPeers(8, mode: mode, backend: backend, port: port) { peers in
            // Mid-stream: every connection has had part of its echo back and sends no more yet.
            for peer in peers { try await peer.waitForEcho(atLeast: peer.firstPart / 2) }

            let signalled = ContinuousClock.now
            server.send(SIGTERM)
            let refusedAfter = try await connectUntilRefused(port: port, within: .seconds(5)) - signalled
            #expect(refusedAfter < .seconds(1), "a connect was refused only \(refusedAfter) after SIGTERM")
            _ = try await server.waitForLine(containing: "echo-server: SIGTERM, shutting down", timeout: .seconds(5))
            // The open connections hold the server up.
            try await Task.sleep(for: .milliseconds(300))
            #expect(server.isRunning, "echo-server ended with connections open\n\(server.report)")

            for peer in peers { peer.sendTheRest() }
            var lastClosed = ContinuousClock.now
            for peer in peers {
                let outcome = try await peer.waitUntilDone(within: .seconds(60))
                #expect(outcome.mismatch == nil, "connection \(peer.index): \(outcome.mismatch ?? "")")
                #expect(outcome.received == peer.expectedTotal, "connection \(peer.index): \(outcome.received) of \(peer.expectedTotal) bytes")
                // Framed: the call's status, which must be OK.
                #expect(outcome.error == nil, "connection \(peer.index): \(outcome.error ?? "")")
                lastClosed = max(lastClosed, outcome.endedAt)
            }
            let ending = await server.wait(timeout: .seconds(10))
            let exitAfter = ContinuousClock.now - lastClosed
            #expect(ending == .exit(0), "\(server.report)")
            #expect(exitAfter < .seconds(5), "exited \(exitAfter) after the last connection closed")
            #expect(server.stdout.hasSuffix("echo-server: stopped\n"), "\(server.report)")
            print("measured (\(backend), \(mode)): connect refused \(milliseconds(refusedAfter)) ms after SIGTERM; exit \(milliseconds(exitAfter)) ms after the last of 8 \(mode == "raw" ? "connections" : "calls") closed")
        }
    }

    @Test("A second SIGTERM while connections are open makes echo-server exit at once, with 143",
          arguments: socketBackends, ["raw", "framed"])
    func secondSignalStopsAtOnce(backend: String, mode: String) async throws {
        let (server, port) = try await startEchoServer(
            backend: backend, extra: ["--mode", mode, "--event-loops", "2", "--grace-period", "60"])
        defer { server.killIfRunning() }
        try await withStreamingPeers(4, mode: mode, backend: backend, port: port) { peers in
            for peer in peers { try await peer.waitForEcho(atLeast: peer.firstPart / 2) }

            server.send(SIGTERM)
            _ = try await server.waitForLine(containing: "echo-server: SIGTERM, shutting down", timeout: .seconds(5))
            try await Task.sleep(for: .milliseconds(100))
            #expect(server.isRunning, "echo-server ended with connections open\n\(server.report)")

            let second = ContinuousClock.now
            server.send(SIGTERM)
            let ending = await server.wait(timeout: .seconds(10))
            let exitAfter = ContinuousClock.now - second
            #expect(ending == .exit(143), "\(server.report)")
            #expect(exitAfter < .seconds(2), "exited \(exitAfter) after the second SIGTERM")
            #expect(server.stdout.contains("echo-server: SIGTERM again, stopping at once"), "\(server.report)")
            // The open connections were cut: each peer sees its stream end short of the
            // whole echo; a framed call ends with an error status, not OK.
            for peer in peers {
                let outcome = try await peer.waitUntilDone(within: .seconds(5))
                #expect(outcome.received < peer.expectedTotal, "connection \(peer.index) got everything: not cut")
                #expect(outcome.mismatch == nil, "connection \(peer.index): \(outcome.mismatch ?? "")")
                if mode == "framed" {
                    #expect(outcome.error != nil, "call \(peer.index) ended with status OK: not cut")
                }
            }
            print("measured (\(backend), \(mode)): exit \(milliseconds(exitAfter)) ms after the second SIGTERM")
        }
    }
}

/// Runs `body` with `count` peers streaming to the echo server at 127.0.0.1:`port` in
/// `mode` (raw: ``StreamingPeer``; framed: ``FramedStreamingPeer``, on a transport of
/// `backend` made here), then abandons them and, framed, shuts that transport down.
func withStreamingPeers(
    _ count: Int, mode: String, backend: String, port: Int, _ body: ([any EchoLoadPeer]) async throws -> Void
) async throws {
    guard mode == "framed" else {
        let peers = try (0..<count).map { try StreamingPeer(port: port, index: $0) }
        defer { for peer in peers { peer.abandon() } }
        try await body(peers)
        return
    }
    // Kept alive until every peer's channel is closed.
    let transport = try Backends.makeTransport(named: backend, configuration: TransportConfiguration(eventLoopCount: 2))
    var peers: [FramedStreamingPeer] = []
    do {
        for index in 0..<count {
            peers.append(try await FramedStreamingPeer(transport: transport, port: port, index: index))
        }
        try await body(peers)
    } catch {
        for peer in peers { peer.abandon() }
        await transport.shutdownNow()
        throw error
    }
    for peer in peers { peer.abandon() }
    await transport.shutdownNow()
}

/// How one peer's stream ended (or how far it got).
struct LoadOutcome: Sendable {
    /// Bytes echoed back (framed: of the messages).
    var received = 0
    /// Where the echo first differed from what was sent, if it did.
    var mismatch: String?
    /// Raw: the error that ended the reads. Framed: the call's status when it is not OK.
    var error: String?
    var done = false
    var endedAt = ContinuousClock.now
}

/// One peer of the load: it sends ``firstPart`` at once, the rest on ``sendTheRest()``,
/// and checks its echo.
protocol EchoLoadPeer: Sendable {
    var index: Int { get }
    /// What is sent before ``sendTheRest()``, in bytes (framed: of the messages).
    var firstPart: Int { get }
    /// What comes back when the stream finishes whole, in bytes (framed: of the messages).
    var expectedTotal: Int { get }
    /// Lets the peer send the rest and finish sending.
    func sendTheRest()
    /// Lets go of the peer if the test ends early.
    func abandon()
    /// The outcome so far.
    var current: LoadOutcome { get }
}

extension EchoLoadPeer {
    /// Waits until at least `count` bytes came back.
    func waitForEcho(atLeast count: Int) async throws {
        let until = ContinuousClock.now + .seconds(20)
        while true {
            let current = self.current
            if current.received >= count { return }
            if current.done { throw SubprocessFailure("connection \(index) ended after \(current.received) bytes: \(current.error ?? current.mismatch ?? "end of stream")") }
            guard ContinuousClock.now < until else { throw SubprocessFailure("connection \(index): only \(current.received) of \(count) bytes echoed in 20 s") }
            try await Task.sleep(for: .milliseconds(5))
        }
    }

    /// Waits until the stream ended.
    func waitUntilDone(within limit: Duration) async throws -> LoadOutcome {
        let until = ContinuousClock.now + limit
        while true {
            let current = self.current
            if current.done { return current }
            guard ContinuousClock.now < until else {
                throw SubprocessFailure("connection \(index) did not end within \(limit) (\(current.received) of \(expectedTotal) bytes)")
            }
            try await Task.sleep(for: .milliseconds(5))
        }
    }
}

func milliseconds(_ duration: Duration) -> String {
    let (seconds, attoseconds) = duration.components
    let value = Double(seconds) * 1000 + Double(attoseconds) / 1e15
    return String(format: "%.1f", value)
}

/// Connects to 127.0.0.1:`port` every millisecond (closing what connects) until a connect
/// is refused; returns when it was.
func connectUntilRefused(port: Int, within limit: Duration) async throws -> ContinuousClock.Instant {
    let until = ContinuousClock.now + limit
    while ContinuousClock.now < until {
        let (fd, error) = loopbackSocket(port: port)
        if let fd {
            close(fd)
        } else if error == ECONNREFUSED {
            return .now
        } else {
            throw SubprocessFailure("connect failed with errno \(error), not ECONNREFUSED")
        }
        try await Task.sleep(for: .milliseconds(1))
    }
    throw SubprocessFailure("no connect was refused within \(limit)")
}

/// A blocking TCP socket connected to 127.0.0.1:`port`, or the connect's errno.
func loopbackSocket(port: Int) -> (fd: Int32?, errno: Int32) {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { return (nil, errno) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    address.sin_addr.s_addr = in_addr_t(UInt32(0x7F00_0001).bigEndian)
    let result = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard result == 0 else {
        let error = errno
        close(fd)
        return (nil, error)
    }
    return (fd, 0)
}

/// One connection streaming to an echo server: a writer thread sends `firstPart` bytes,
/// waits for ``sendTheRest()``, sends the rest and shuts its output down; a reader thread
/// reads until end of stream and compares every byte with what should come back.
///
/// 4 MiB of a pattern, echoed as it is.
///
/// `@unchecked Sendable`: the threads share only `state` (behind its lock) and the
/// immutable buffers; `proceed` is a semaphore.
final class StreamingPeer: EchoLoadPeer, @unchecked Sendable {
    typealias Outcome = LoadOutcome
    let index: Int
    let firstPart: Int
    let expectedTotal: Int
    private let fd: Int32
    private let sent: [UInt8]
    private let expected: [UInt8]
    private let proceed = DispatchSemaphore(value: 0)
    private let state = NSLock()
    private var outcome = Outcome()

    init(port: Int, index: Int) throws {
        self.index = index
        let (fd, error) = loopbackSocket(port: port)
        guard let fd else { throw SubprocessFailure("connect to the echo server failed: errno \(error)") }
        self.fd = fd
        let bytes = (0..<(4 << 20)).map { Self.pattern($0, index) }
        sent = bytes
        expected = bytes
        expectedTotal = expected.count
        firstPart = sent.count / 4
        Thread { self.write() }.start()
        Thread { self.read() }.start()
    }

    static func pattern(_ offset: Int, _ connection: Int) -> UInt8 {
        UInt8(truncatingIfNeeded: offset &* 31 &+ connection &* 7 &+ offset >> 9)
    }

    /// Lets the writer send the rest and half-close.
    func sendTheRest() { proceed.signal() }

    /// Unblocks the writer if the test ends early (the socket is closed by the reader).
    func abandon() { proceed.signal() }

    private func write() {
        if !send(sent[0..<firstPart]) { return }
        proceed.wait()
        if !send(sent[firstPart...]) { return }
        shutdown(fd, Int32(SHUT_WR))
    }

    private func send(_ bytes: ArraySlice<UInt8>) -> Bool {
        var offset = bytes.startIndex
        while offset < bytes.endIndex {
            let chunk = min(64 * 1024, bytes.endIndex - offset)
            let n = bytes.withUnsafeBufferPointer { buffer in
                Glibc.send(fd, buffer.baseAddress! + (offset - bytes.startIndex), chunk, Int32(MSG_NOSIGNAL))
            }
            if n < 0 {
                if errno == EINTR { continue }
                return false  // the server cut the connection; the reader says so
            }
            offset += n
        }
        return true
    }

    private func read() {
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        var received = 0
        var failure: String?
        var mismatch: String?
        while true {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n < 0 {
                if errno == EINTR { continue }
                failure = "recv: errno \(errno)"
                break
            }
            if n == 0 { break }
            if mismatch == nil {
                mismatch = compare(buffer[0..<n], at: received)
            }
            received += n
            state.withLock { outcome.received = received }
        }
        close(fd)
        state.withLock {
            outcome.mismatch = mismatch
            outcome.error = failure
            outcome.done = true
            outcome.endedAt = .now
        }
    }

    /// Where `bytes`, received at `offset`, differ from what should come back; nil if not.
    private func compare(_ bytes: ArraySlice<UInt8>, at offset: Int) -> String? {
        guard offset + bytes.count <= expected.count else {
            return "\(offset + bytes.count - expected.count) bytes more than expected"
        }
        let same = bytes.withUnsafeBytes { got in
            expected.withUnsafeBytes { want in memcmp(got.baseAddress!, want.baseAddress! + offset, got.count) == 0 }
        }
        if same { return nil }
        let at = zip(bytes, expected[offset...]).enumerated().first { $0.element.0 != $0.element.1 }!.offset
        return "byte \(offset + at) is \(bytes[bytes.startIndex + at]), expected \(expected[offset + at])"
    }

    var current: Outcome { state.withLock { outcome } }
}

/// One call streaming to `echo-server --mode framed`, on a `CallChannel` of its own, so
/// on an HTTP/2 connection of its own: 128 messages of 32 KiB, the first quarter sent
/// when it starts, the rest on ``sendTheRest()``, then the end of its sending. Every
/// echoed message is compared with the one sent in its place; the call's status ends it.
///
/// Its events run on the call's loop (the `CallHandler` face); `Call`'s methods may be
/// called from any thread, and act on that loop in call order.
final class FramedStreamingPeer: EchoLoadPeer, CallHandler {
    static let messageCount = 128
    static let messageSize = 32 * 1024

    let index: Int
    let firstPart = FramedStreamingPeer.messageCount / 4 * FramedStreamingPeer.messageSize
    let expectedTotal = FramedStreamingPeer.messageCount * FramedStreamingPeer.messageSize
    private let channel: CallChannel
    private let messages: [[UInt8]]
    private let started = Mutex<Call?>(nil)
    private let state = Mutex<(outcome: LoadOutcome, echoed: Int)>((LoadOutcome(), 0))

    /// Starts the call (connecting its channel) and sends the first quarter.
    init(transport: any Transport, port: Int, index: Int) async throws {
        self.index = index
        channel = CallChannel(target: Endpoint(host: "127.0.0.1", port: port), transport: transport)
        messages = (0..<Self.messageCount).map { message in
            (0..<Self.messageSize).map { StreamingPeer.pattern(message * Self.messageSize + $0, index) }
        }
        let call = try await channel.startCall(handler: self)
        started.withLock { $0 = call }
        for message in messages[..<(Self.messageCount / 4)] { call.send(message) }
    }

    func sendTheRest() {
        guard let call = started.withLock({ $0 }) else { return }
        for message in messages[(Self.messageCount / 4)...] { call.send(message) }
        call.finishSending()
    }

    /// Cancels the call if it is still open, and closes the channel (its connection).
    func abandon() {
        started.withLock { $0 }?.cancel()
        channel.close()
    }

    var current: LoadOutcome { state.withLock { $0.outcome } }

    // MARK: CallHandler (on the call's loop)

    func call(_ call: Call, didReceive message: [UInt8]) {
        state.withLock { state in
            let number = state.echoed
            state.echoed += 1
            state.outcome.received += message.count
            guard state.outcome.mismatch == nil else { return }
            guard number < messages.count else {
                state.outcome.mismatch = "message \(number) echoed, but only \(messages.count) were sent"
                return
            }
            let sent = messages[number]
            guard message != sent else { return }
            guard message.count == sent.count else {
                state.outcome.mismatch = "message \(number) echoed with \(message.count) bytes, sent with \(sent.count)"
                return
            }
            let at = zip(message, sent).enumerated().first { $0.element.0 != $0.element.1 }!.offset
            state.outcome.mismatch = "message \(number), byte \(at) is \(message[at]), expected \(sent[at])"
        }
    }

    func call(_ call: Call, didCloseWith status: CallStatus) {
        state.withLock { state in
            state.outcome.error = status.error.map { "the call ended with \($0)" }
            state.outcome.done = true
            state.outcome.endedAt = .now
        }
    }
}
