import Switchyard
import SwitchyardMemory
import SwitchyardTestSupport
import Synchronization
import Testing

@testable import SwitchyardCalls

/// The server's HTTP/2 connection gathers what it sends while handling one read, and
/// what the calls answer to it, into one write: a unary call's HEADERS, DATA and
/// trailers, and the echoes of messages that came in one read.
@Suite("Server write coalescing", .serialized, .timeLimit(.minutes(1)))
struct ServerWriteCoalescingTests {
    /// The reads and writes of the server's connections.
    final class Counts: Sendable {
        let reads = Atomic<Int>(0)
        let writes = Atomic<Int>(0)
        /// Writes that carry a HEADERS or DATA frame: the answers to calls (SETTINGS,
        /// their acknowledgements and WINDOW_UPDATEs come when they come).
        let answers = Atomic<Int>(0)

        /// Counts a write of whole HTTP/2 frames.
        func count(_ bytes: UnsafeRawBufferPointer) {
            writes.add(1, ordering: .releasing)
            var index = 0
            while index + 9 <= bytes.count {
                let length = Int(bytes[index]) << 16 | Int(bytes[index + 1]) << 8 | Int(bytes[index + 2])
                // Type 0 is DATA, 1 HEADERS.
                if bytes[index + 3] <= 1 {
                    answers.add(1, ordering: .releasing)
                    return
                }
                index += 9 + length
            }
        }
        var snapshot: (reads: Int, writes: Int) { (reads.load(ordering: .acquiring), writes.load(ordering: .acquiring)) }
    }

    /// A server connection that counts the writes made on it and the reads it handed over.
    final class CountingConnection: ForwardingConnection, @unchecked Sendable {
        let base: any Connection
        let counts: Counts
        init(base: any Connection, counts: Counts) {
            self.base = base
            self.counts = counts
        }
        func setHandler(_ handler: any ConnectionHandler) { base.setHandler(CountingHandler(handler, counts)) }
        func write(_ bytes: [UInt8], completion: WriteCompletion?) {
            bytes.withUnsafeBytes { counts.count($0) }
            base.write(bytes, completion: completion)
        }
        func write(borrowing bytes: UnsafeRawBufferPointer, completion: WriteCompletion?) {
            counts.count(bytes)
            base.write(borrowing: bytes, completion: completion)
        }
    }

    final class CountingHandler: ConnectionHandler {
        let inner: any ConnectionHandler
        let counts: Counts
        init(_ inner: any ConnectionHandler, _ counts: Counts) {
            self.inner = inner
            self.counts = counts
        }
        func connectionDidRead(_ bytes: UnsafeRawBufferPointer) {
            counts.reads.add(1, ordering: .releasing)
            inner.connectionDidRead(bytes)
        }
        func connectionDidReadEnd() { inner.connectionDidReadEnd() }
        func connectionDidDrainWrites() { inner.connectionDidDrainWrites() }
        func connectionDidClose(error: TransportError?) { inner.connectionDidClose(error: error) }
    }

    /// A listener whose accepted connections count their reads and writes.
    final class CountingListener: Listener {
        let base: any Listener
        let counts: Counts
        init(base: any Listener, counts: Counts) {
            self.base = base
            self.counts = counts
        }
        var backendName: String { base.backendName }
        var localAddress: Endpoint { base.localAddress }
        var connections: AcceptedConnections { base.connections }
        func close() { base.close() }
        func acceptConnections(_ handler: @escaping @Sendable (any Connection) -> Void) {
            let counts = counts
            base.acceptConnections { handler(CountingConnection(base: $0, counts: counts)) }
        }
    }

    /// Echoes each message; OK at the client's end.
    final class Echo: CallHandler {
        func call(_ call: Call, didReceive message: [UInt8]) { call.send(message) }
        func callDidReceiveEnd(_ call: Call) { call.finish(.ok) }
        func call(_ call: Call, didCloseWith status: CallStatus) {}
    }

    /// A unary method as gRPC servers run one: the answer once the client's side ended.
    final class UnaryEcho: CallHandler, @unchecked Sendable {
        private var message: [UInt8] = []
        func call(_ call: Call, didReceive message: [UInt8]) { self.message = message }
        func callDidReceiveEnd(_ call: Call) {
            call.send(message)
            call.finish(.ok)
        }
        func call(_ call: Call, didCloseWith status: CallStatus) {}
    }

    /// A client call that, on the first echo, sends `burst` messages at once (from its
    /// handler: one delivery, so they leave the client in one write), and notes the
    /// server's counts then and once every echo came back.
    final class Burst: CallHandler, @unchecked Sendable {
        let burst: Int
        let counts: Counts
        let state = Mutex<(received: Int, before: (reads: Int, writes: Int)?, after: (reads: Int, writes: Int)?)>((0, nil, nil))
        init(burst: Int, counts: Counts) {
            self.burst = burst
            self.counts = counts
        }
        func call(_ call: Call, didReceive message: [UInt8]) {
            let received = state.withLock { state in
                state.received += 1
                if state.received == 1 { state.before = counts.snapshot }
                if state.received == burst + 1 { state.after = counts.snapshot }
                return state.received
            }
            if received == 1 {
                for index in 0..<burst { call.send([UInt8(index), 1, 2, 3]) }
            } else if received == burst + 1 {
                call.finishSending()
            }
        }
        func call(_ call: Call, didCloseWith status: CallStatus) { self.status.withLock { $0 = status } }
        let status = Mutex<CallStatus?>(nil)

        func waitForStatus() async throws -> CallStatus {
            for _ in 0..<5000 {
                if let status = status.withLock({ $0 }) { return status }
                try await Task.sleep(for: .milliseconds(1))
            }
            throw TransportError(code: .deadlineExceeded, reason: .timedOut, message: "no status within 5 s")
        }
    }

    static func server(_ transport: MemoryTransport, counts: Counts) async throws -> CallServer {
        let listener = try await transport.listen(on: Endpoint(host: "127.0.0.1", port: 0))
        return CallServer(
            listener: CountingListener(base: listener, counts: counts), options: CallConfiguration(), configuration: CallServerConfiguration(),
            serving: .handler { call -> any CallHandler in call.method.hasSuffix("Unary") ? UnaryEcho() : Echo() })
    }

    @Test("A unary call's response (HEADERS, DATA, trailers) reaches the server's connection in one write")
    func unaryInOneWrite() async throws {
        let client = try MemoryTransport(configuration: .init(eventLoopCount: 1))
        let serverTransport = try MemoryTransport(configuration: .init(eventLoopCount: 1))
        let counts = Counts()
        let server = try await Self.server(serverTransport, counts: counts)
        defer { server.closeNow() }
        let channel = CallChannel(target: Endpoint(host: "127.0.0.1", port: server.localAddress.port), transport: client)
        defer { channel.close() }
        @Sendable func unary(_ byte: UInt8) async throws {
            let (messages, status) = try await channel.withCall(method: "/bench.Echo/Unary") { call in
                try await call.write([byte, 2, 3])
                try await call.finishSending()
                var messages: [[UInt8]] = []
                for try await message in call.messages { messages.append(message) }
                return (messages, await call.status())
            }
            #expect(messages == [[byte, 2, 3]])
            #expect(status.isOK)
        }
        // The connection's set-up (SETTINGS both ways) first.
        try await unary(0)
        let before = counts.answers.load(ordering: .acquiring)
        let calls = 5
        for index in 1...calls { try await unary(UInt8(index)) }
        #expect(counts.answers.load(ordering: .acquiring) - before == calls)
    }

    @Test("Messages the server read at once are echoed in one write (fewer writes than messages, at most one per read)")
    func pipelinedEchoesInOneWrite() async throws {
        let client = try MemoryTransport(configuration: .init(eventLoopCount: 1))
        let serverTransport = try MemoryTransport(configuration: .init(eventLoopCount: 1))
        let counts = Counts()
        let server = try await Self.server(serverTransport, counts: counts)
        defer { server.closeNow() }
        let channel = CallChannel(target: Endpoint(host: "127.0.0.1", port: server.localAddress.port), transport: client)
        defer { channel.close() }
        let burst = 8
        let handler = Burst(burst: burst, counts: counts)
        let call = try await channel.startCall(method: "/bench.Echo/Stream", handler: handler)
        call.send([0xFF])
        let status = try await handler.waitForStatus()
        #expect(status.isOK)
        _ = call
        let (received, before, after) = handler.state.withLock { $0 }
        #expect(received == burst + 1)
        let (start, end) = try #require(before.flatMap { before in after.map { (before, $0) } })
        let reads = end.reads - start.reads
        let writes = end.writes - start.writes
        #expect(writes >= 1)
        #expect(writes <= reads)
        #expect(writes < burst)
    }
}
