import GRPCCore
import Switchyard
import SwitchyardGRPC
import Synchronization
import Testing

/// A request producer that writes in a loop hands SwitchyardGRPC's client several
/// messages per turn of the event loop (a write returns before its message is in the
/// kernel, within a bound), and the call sends those together: far fewer writes of the
/// connection than messages, in order.
@Suite("Client stream batching", .serialized, .timeLimit(.minutes(1)))
struct ClientStreamBatchingTests {
    /// Writes of the client's connection that carry an HTTP/2 DATA frame.
    final class DataWrites: Sendable {
        let count = Atomic<Int>(0)
        func note(_ bytes: UnsafeRawBufferPointer) {
            var index = 0
            while index + 9 <= bytes.count {
                let length = Int(bytes[index]) << 16 | Int(bytes[index + 1]) << 8 | Int(bytes[index + 2])
                if bytes[index + 3] == 0 {
                    count.add(1, ordering: .relaxed)
                    return
                }
                index += 9 + length
            }
        }
    }

    /// A connection that notes its writes and forwards everything.
    final class NotingConnection: Connection, @unchecked Sendable {
        let base: any Connection
        let writes: DataWrites
        init(base: any Connection, writes: DataWrites) {
            self.base = base
            self.writes = writes
        }
        var backendName: String { base.backendName }
        var eventLoop: any TransportEventLoop { base.eventLoop }
        var localAddress: Endpoint { base.localAddress }
        var remoteAddress: Endpoint { base.remoteAddress }
        var pendingWriteBytes: Int { base.pendingWriteBytes }
        func setHandler(_ handler: any ConnectionHandler) { base.setHandler(handler) }
        func startReading() { base.startReading() }
        func stopReading() { base.stopReading() }
        func write(_ bytes: [UInt8], completion: WriteCompletion?) {
            bytes.withUnsafeBytes { writes.note($0) }
            base.write(bytes, completion: completion)
        }
        func write(borrowing bytes: UnsafeRawBufferPointer, completion: WriteCompletion?) {
            writes.note(bytes)
            base.write(borrowing: bytes, completion: completion)
        }
        func shutdownOutput(completion: WriteCompletion?) { base.shutdownOutput(completion: completion) }
        func close() { base.close() }
        func reset() { base.reset() }
    }

    /// A transport whose connections note their writes.
    final class NotingTransport: Transport {
        let base: any Transport
        let writes: DataWrites
        init(base: any Transport, writes: DataWrites) {
            self.base = base
            self.writes = writes
        }
        var name: String { base.name }
        func connect(to endpoint: Endpoint, options: ConnectOptions) async throws -> any Connection {
            NotingConnection(base: try await base.connect(to: endpoint, options: options), writes: writes)
        }
        func listen(on endpoint: Endpoint, options: ListenOptions) async throws -> any Listener {
            try await base.listen(on: endpoint, options: options)
        }
        func shutdown(gracePeriod: Duration) async { await base.shutdown(gracePeriod: gracePeriod) }
        func shutdownNow() async { await base.shutdownNow() }
    }

    @Test("A producer writing 2,000 messages in a loop: they arrive in order, in far fewer writes than messages", arguments: [Backend.bsd, .libuv])
    func fewerWritesThanMessages(backend: Backend) async throws {
        let count = 2000
        let writes = DataWrites()
        let client = NotingTransport(base: try backend.transport(), writes: writes)
        try await withEcho(server: try backend.transport(), client: client) { client, _, _ in
            let coder = BytesCoder()
            // The connection's set-up first.
            _ = try await client.get([1])
            let before = writes.count.load(ordering: .relaxed)
            let collected = try await client.clientStreaming(
                request: StreamingClientRequest(of: [UInt8].self) { writer in
                    for index in 0..<count { try await writer.write([UInt8(index >> 8), UInt8(index & 0xFF)]) }
                },
                descriptor: EchoService.collect, serializer: coder, deserializer: coder, options: .defaults
            ) { try $0.message }
            var expected: [UInt8] = []
            for index in 0..<count { expected += [UInt8(index >> 8), UInt8(index & 0xFF)] }
            #expect(collected == expected)
            let made = writes.count.load(ordering: .relaxed) - before
            // One write per message when each write waits for the kernel.
            #expect(made >= 1)
            #expect(made < count / 4, "\(made) writes carried DATA for \(count) messages")
        }
    }

    @Test("Writes after the call ended throw rather than return, so a producer loop stops", arguments: [Backend.bsd])
    func writesAfterTheEndThrow(backend: Backend) async throws {
        try await withEcho(server: try backend.transport(), client: try backend.transport()) { client, _, _ in
            let coder = BytesCoder()
            let written = Atomic<Int>(0)
            // Get answers after its request ends; a call the server fails at once: its
            // writes fail from then on.
            let metadata: Metadata = ["fail-code": "\(Status.Code.aborted.rawValue)", "fail-message": "no"]
            await #expect(throws: RPCError.self) {
                try await client.clientStreaming(
                    request: StreamingClientRequest(of: [UInt8].self, metadata: metadata) { writer in
                        while true {
                            try await writer.write([1, 2, 3])
                            written.add(1, ordering: .relaxed)
                            if written.load(ordering: .relaxed) > 5_000_000 { return }
                        }
                    },
                    descriptor: EchoService.get, serializer: coder, deserializer: coder, options: .defaults
                ) { try $0.message }
            }
            #expect(written.load(ordering: .relaxed) < 5_000_000)
        }
    }
}
