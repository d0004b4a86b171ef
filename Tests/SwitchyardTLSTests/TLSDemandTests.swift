import Switchyard
import SwitchyardTLS
import Synchronization
import Testing

/// Reads stay demand-driven through TLS: a user who stops reading stops the reading of
/// the wrapped connection, so the TLS layer holds a bounded amount and the peer is pushed
/// back.
@Suite("TLS reads on demand", .serialized, .timeLimit(.minutes(1)))
struct TLSDemandTests {
    /// Counts bytes; stops reading after the first chunk while `paused`.
    final class Reader: ConnectionHandler, @unchecked Sendable {
        let connection: TLSConnection
        let received = Atomic<Int>(0)
        let mismatch = Atomic<Bool>(false)
        let ended = Atomic<Bool>(false)
        let pause = Atomic<Bool>(true)
        let expected: [UInt8]
        init(_ connection: TLSConnection, expected: [UInt8]) {
            self.connection = connection
            self.expected = expected
        }
        func connectionDidRead(_ bytes: UnsafeRawBufferPointer) {
            let offset = received.load(ordering: .relaxed)
            if !bytes.elementsEqual(expected[offset..<offset + bytes.count]) { mismatch.store(true, ordering: .relaxed) }
            received.add(bytes.count, ordering: .relaxed)
            if pause.load(ordering: .relaxed) { connection.stopReading() }
        }
        func connectionDidReadEnd() { ended.store(true, ordering: .relaxed) }
        func connectionDidClose(error: TransportError?) {}
    }

    /// The most a TLS connection may hold for a user who does not read: one read of the
    /// wrapped connection (64 KiB on every backend here) plus one record's plaintext
    /// (16 KiB), plus slack for a record's header and tag.
    static let bound = 64 * 1024 + 16 * 1024 + 512

    @Test("A flood of records the user does not read keeps the TLS layer's buffer bounded and pushes the writer back", arguments: Backend.allCases)
    func flood(backend: Backend) async throws {
        try await withTLS(backend) { tls in
            let listener = try await tls.listen(on: loopback)
            let flood = testBytes(16 << 20, seed: 3)
            let serverConnection = Mutex<(any Connection)?>(nil)
            let completed = Atomic<Int>(0)
            listener.acceptConnections { connection in
                serverConnection.withLock { $0 = connection }
                // Writes everything at once, without waiting: only completions tell
                // what reached the kernel.
                for start in stride(from: 0, to: flood.count, by: 16 * 1024) {
                    connection.write(Array(flood[start..<start + 16 * 1024])) { error in
                        if error == nil { completed.add(16 * 1024, ordering: .relaxed) }
                    }
                }
                connection.shutdownOutput(completion: nil)
            }
            let connection = try #require(
                try await tls.connect(to: Endpoint(host: "localhost", port: listener.localAddress.port)) as? TLSConnection)
            let reader = Reader(connection, expected: flood)
            connection.setHandler(reader)
            connection.startReading()
            // The first chunk arrives, the reader stops; the flood goes on for a while.
            while reader.received.load(ordering: .relaxed) == 0 { try await Task.sleep(for: .milliseconds(5)) }
            try await Task.sleep(for: .milliseconds(300))
            let heldWhilePaused = connection.bufferedInboundBytes
            let receivedWhilePaused = reader.received.load(ordering: .relaxed)
            let completedWhilePaused = completed.load(ordering: .relaxed)
            #expect(heldWhilePaused <= Self.bound, "TLS holds \(heldWhilePaused) bytes for a reader who stopped")
            #expect(receivedWhilePaused < 64 * 1024)
            // Pushed back: most of the flood is still waiting at the writer.
            #expect(completedWhilePaused < flood.count / 2, "\(completedWhilePaused) of \(flood.count) bytes written")

            // Reading again delivers everything, intact, then the clean end.
            reader.pause.store(false, ordering: .relaxed)
            connection.startReading()
            for _ in 0..<2000 where !reader.ended.load(ordering: .relaxed) { try await Task.sleep(for: .milliseconds(10)) }
            let received = reader.received.load(ordering: .relaxed)
            #expect(received == flood.count)
            let mismatch = reader.mismatch.load(ordering: .relaxed)
            let ended = reader.ended.load(ordering: .relaxed)
            #expect(!mismatch)
            #expect(ended)
            connection.close()
            serverConnection.withLock { $0?.close() }
            listener.close()
        }
    }
}
