import Switchyard
import SwitchyardTLS
import Synchronization
import Testing

/// The ``Connection`` contract's last promise, through TLS: once the transport's loops
/// have stopped, a call from another thread cannot hop to the loop anymore, and what it
/// would have reported runs on the caller's thread instead. Nothing is dropped.
@Suite("TLS connections after the loops stopped", .serialized, .timeLimit(.minutes(1)))
struct TLSAfterLoopsStoppedTests {
    /// Records every outcome it is told, with no waiting: the calls below must have
    /// answered before they return.
    final class Outcomes: ConnectionHandler, Sendable {
        let reported = Mutex<[String: [TransportError?]]>([:])
        func record(_ call: String) -> WriteCompletion { { error in self.reported.withLock { $0[call, default: []].append(error) } } }
        func connectionDidRead(_ bytes: UnsafeRawBufferPointer) {}
        func connectionDidReadEnd() {}
        func connectionDidClose(error: TransportError?) { reported.withLock { $0["connectionDidClose", default: []].append(error) } }
    }

    @Test(
        "Writes, an output shutdown and a late handler from another thread are answered there with cancelled/shutdown",
        arguments: Backend.allCases, [true, false])
    func nothingDropped(backend: Backend, shutDownTLSTransport: Bool) async throws {
        let tls = try TLSTransport(wrapping: try backend.transport(), client: TestCertificates.client(), server: TestCertificates.server())
        let listener = try await tls.listen(on: loopback)
        serveEcho(listener)
        let connection = try await tls.connect(to: Endpoint(host: "localhost", port: listener.localAddress.port))
        // Its loops stop: with close_notify sent by the TLS transport, or under it.
        if shutDownTLSTransport {
            await tls.shutdownNow()
        } else {
            await tls.wrapped.shutdownNow()
        }

        let outcomes = Outcomes()
        connection.write([1, 2, 3], completion: outcomes.record("write"))
        [4, 5].withUnsafeBytes { connection.write(borrowing: $0, completion: outcomes.record("write(borrowing:)")) }
        #expect(!connection.writeNowOrQueue([6], completion: outcomes.record("writeNowOrQueue")))
        connection.shutdownOutput(completion: outcomes.record("shutdownOutput"))
        // No handler heard the end yet: this one does.
        connection.setHandler(outcomes)
        connection.close()

        let reported = outcomes.reported.withLock { $0 }
        for call in ["write", "write(borrowing:)", "writeNowOrQueue", "shutdownOutput", "connectionDidClose"] {
            let errors = reported[call] ?? []
            #expect(errors.count == 1, "\(call) was answered \(errors.count) times")
            #expect(errors.first??.code == .cancelled, "\(call): \(String(describing: errors.first))")
            #expect(errors.first??.reason == .shutdown, "\(call): \(String(describing: errors.first))")
        }
        await tls.shutdownNow()
    }
}
