import Glibc
import Switchyard
import SwitchyardMemory
import SwitchyardTestSupport
import Synchronization
import Testing

@testable import SwitchyardCalls

/// Messages a client sends from a task off the call's loop queue for the loop, which
/// sends everything queued in one write of the HTTP/2 connection
/// (OffLoopSendBatching.swift), with order, write reports and cancellation as before.
///
/// The tests hold the client's loop in a job of its own while the task sends, as a busy
/// loop would be, so the batch they check is the same on every run.
@Suite("Off-loop send batching", .serialized, .timeLimit(.minutes(1)))
struct OffLoopSendBatchingTests {
    typealias Counts = ServerWriteCoalescingTests.Counts

    /// A transport whose connections count their writes (and the writes that carry
    /// HEADERS or DATA).
    final class CountingTransport: Transport {
        let base: MemoryTransport
        let counts: Counts
        init(base: MemoryTransport, counts: Counts) {
            self.base = base
            self.counts = counts
        }
        var name: String { base.name }
        func connect(to endpoint: Endpoint, options: ConnectOptions) async throws -> any Connection {
            ServerWriteCoalescingTests.CountingConnection(base: try await base.connect(to: endpoint, options: options), counts: counts)
        }
        func listen(on endpoint: Endpoint, options: ListenOptions) async throws -> any Listener {
            try await base.listen(on: endpoint, options: options)
        }
        func shutdown(gracePeriod: Duration) async { await base.shutdown(gracePeriod: gracePeriod) }
        func shutdownNow() async { await base.shutdownNow() }
    }

    /// Echoes each message; OK at the client's end.
    final class Echo: CallHandler {
        func call(_ call: Call, didReceive message: [UInt8]) { call.send(message) }
        func callDidReceiveEnd(_ call: Call) { call.finish(.ok) }
        func call(_ call: Call, didCloseWith status: CallStatus) {}
    }

    /// The client's handler: the echoes, the write reports and the status.
    final class Collector: CallHandler, Sendable {
        let echoes = Mutex<[[UInt8]]>([])
        let writeReports = Atomic<Int>(0)
        let status = Mutex<CallStatus?>(nil)
        func call(_ call: Call, didReceive message: [UInt8]) {
            echoes.withLock { $0.append(message) }
            if call.options.enableFlowControl { call.receiveNextMessage() }
        }
        func callDidWriteData(_ call: Call) { writeReports.add(1, ordering: .relaxed) }
        func call(_ call: Call, didCloseWith status: CallStatus) { self.status.withLock { $0 = status } }

        func waitForStatus() async throws -> CallStatus {
            for _ in 0..<10_000 {
                if let status = status.withLock({ $0 }) { return status }
                try await Task.sleep(for: .milliseconds(1))
            }
            throw TransportError(code: .deadlineExceeded, reason: .timedOut, message: "no status within 10 s")
        }
    }

    /// Holds `loop` in a job until ``release()``; `then` runs on the loop right after.
    final class LoopHold: Sendable {
        private let released = Atomic<Bool>(false)
        private let holding = Atomic<Bool>(false)
        init(_ loop: any TransportEventLoop, then: @escaping @Sendable () -> Void = {}) {
            loop.execute { [self] in
                holding.store(true, ordering: .releasing)
                while !released.load(ordering: .acquiring) { sched_yield() }
                then()
            }
        }
        func waitUntilHeld() async throws {
            while !holding.load(ordering: .acquiring) { try await Task.sleep(for: .milliseconds(1)) }
        }
        func release() { released.store(true, ordering: .releasing) }
    }

    static func message(_ index: Int) -> [UInt8] { [UInt8(index >> 8), UInt8(index & 0xFF), 7, 7, 7, 7, 7, 7] }

    /// A server echoing every message, a channel to it whose connection counts its
    /// writes, and `body` on them.
    static func withEcho<T>(_ body: (CallChannel, Counts) async throws -> T) async throws -> T {
        let clientTransport = try MemoryTransport(configuration: .init(eventLoopCount: 1))
        let serverTransport = try MemoryTransport(configuration: .init(eventLoopCount: 1))
        let listener = try await serverTransport.listen(on: Endpoint(host: "127.0.0.1", port: 0))
        let server = CallServer(
            listener: listener, options: CallConfiguration(), configuration: CallServerConfiguration(),
            serving: .handler { _ -> any CallHandler in Echo() })
        defer { server.closeNow() }
        let counts = Counts()
        let transport = CountingTransport(base: clientTransport, counts: counts)
        let channel = CallChannel(target: Endpoint(host: "127.0.0.1", port: server.localAddress.port), transport: transport)
        defer { channel.close() }
        let result = try await body(channel, counts)
        _ = transport
        return result
    }

    @Test("Messages sent from a task while the loop is busy leave in one write, in order, before the half-close")
    func batchInOneWrite() async throws {
        let count = 200
        try await Self.withEcho { channel, counts in
            let collector = Collector()
            let call = try await channel.startCall(method: "/bench.Echo/Stream", handler: collector)
            // The connection's set-up and the request's HEADERS first.
            call.send(Self.message(0))
            while collector.echoes.withLock({ $0.count }) < 1 { try await Task.sleep(for: .milliseconds(1)) }
            let before = counts.answers.load(ordering: .acquiring)
            let hold = LoopHold(call.eventLoop)
            try await hold.waitUntilHeld()
            await Task.detached {
                for index in 1...count { call.send(Self.message(index)) }
                call.finishSending()
            }.value
            hold.release()
            let status = try await collector.waitForStatus()
            #expect(status.isOK)
            let echoes = collector.echoes.withLock { $0 }
            #expect(echoes == (0...count).map(Self.message))
            // Without batching: one write per message. With it: the batch, and the
            // half-close (an empty DATA with END_STREAM) in a job of its own.
            let writes = counts.answers.load(ordering: .acquiring) - before
            #expect(writes >= 1)
            #expect(writes <= 2)
        }
    }

    @Test("With flow control on, each message sent from off the loop reports its write once, and each completion runs once")
    func reportsPerMessage() async throws {
        let count = 100
        try await Self.withEcho { channel, counts in
            let collector = Collector()
            let call = try await channel.startCall(
                method: "/bench.Echo/Stream", options: CallConfiguration(enableFlowControl: true), handler: collector)
            call.receiveNextMessage()
            call.send(Self.message(0))
            while collector.writeReports.load(ordering: .relaxed) < 1 { try await Task.sleep(for: .milliseconds(1)) }
            let before = counts.answers.load(ordering: .acquiring)
            let completions = Atomic<Int>(0)
            let failures = Atomic<Int>(0)
            let hold = LoopHold(call.eventLoop)
            try await hold.waitUntilHeld()
            await Task.detached {
                for index in 1...count {
                    if index.isMultiple(of: 2) {
                        call.send(Self.message(index))
                    } else {
                        call.send(Self.message(index)) { error in
                            completions.add(1, ordering: .relaxed)
                            if error != nil { failures.add(1, ordering: .relaxed) }
                        }
                    }
                }
            }.value
            hold.release()
            while collector.echoes.withLock({ $0.count }) < count + 1 { try await Task.sleep(for: .milliseconds(1)) }
            #expect(collector.echoes.withLock { $0 } == (0...count).map(Self.message))
            // Every message reports its write once, those with a completion too.
            #expect(collector.writeReports.load(ordering: .relaxed) == count + 1)
            #expect(completions.load(ordering: .relaxed) == count / 2)
            #expect(failures.load(ordering: .relaxed) == 0)
            #expect(counts.answers.load(ordering: .acquiring) - before == 1)
            call.finishSending()
            #expect(try await collector.waitForStatus().isOK)
        }
    }

    @Test("A cancel that reaches the loop before the batch fails every queued message with cancelled and sends none")
    func cancelDropsQueued() async throws {
        let count = 50
        try await Self.withEcho { channel, counts in
            let collector = Collector()
            let call = try await channel.startCall(method: "/bench.Echo/Stream", handler: collector)
            call.send(Self.message(0))
            while collector.echoes.withLock({ $0.count }) < 1 { try await Task.sleep(for: .milliseconds(1)) }
            let before = counts.answers.load(ordering: .acquiring)
            let errors = Mutex<[TransportError?]>([])
            // The loop, once released, cancels the call before it runs the batch.
            let hold = LoopHold(call.eventLoop) { call.cancel() }
            try await hold.waitUntilHeld()
            await Task.detached {
                for index in 1...count {
                    call.send(Self.message(index)) { error in errors.withLock { $0.append(error) } }
                }
            }.value
            hold.release()
            let status = try await collector.waitForStatus()
            #expect(status.error?.code == .cancelled)
            while errors.withLock({ $0.count }) < count { try await Task.sleep(for: .milliseconds(1)) }
            let codes = errors.withLock { $0.map { $0?.code } }
            #expect(codes == [TransportError.Code?](repeating: .cancelled, count: count))
            // Only the RST_STREAM went out: no DATA.
            #expect(counts.answers.load(ordering: .acquiring) == before)
            #expect(collector.echoes.withLock { $0.count } == 1)
        }
    }
}
