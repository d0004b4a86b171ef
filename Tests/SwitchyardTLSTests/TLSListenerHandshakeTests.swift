import Switchyard
import SwitchyardTLS
import Testing

/// A `TLSListener` runs each server handshake on the connection's loop with no task of
/// its own, and times them all out from one queue of deadlines.
@Suite("TLS server handshakes: timed out from the listener, no task per handshake", .serialized, .timeLimit(.minutes(1)))
struct TLSListenerHandshakeTests {
    static func server(timeout: Duration) -> TLSConfiguration {
        var configuration = TestCertificates.server()
        configuration.handshakeTimeout = timeout
        return configuration
    }

    @Test("A client that never sends its ClientHello: deadlineExceeded/tls handshake after the timeout, and the server closes", arguments: Backend.allCases)
    func silentClient(backend: Backend) async throws {
        let failures = FailureLog()
        try await withTLS(backend, server: Self.server(timeout: .milliseconds(200)), handshakeFailures: failures.report) { tls in
            let listener = try await tls.listen(on: loopback)
            serveEcho(listener)
            let clock = ContinuousClock()
            let start = clock.now
            let plain = AsyncConnection(try await tls.wrapped.connect(to: Endpoint(host: "localhost", port: listener.localAddress.port)))
            let serverError = try await failures.first()
            #expect(serverError?.code == .deadlineExceeded)
            #expect(serverError?.reason == .tlsHandshake, "\(String(describing: serverError))")
            // Not before the timeout, and not much after it (the timing task wakes at
            // most a quarter of the timeout late).
            #expect(clock.now - start >= .milliseconds(200))
            #expect(clock.now - start < .seconds(2))
            // The server closed the connection: the client's read ends.
            _ = try? await plain.readToEnd()
            plain.close()
            listener.close()
        }
    }

    @Test("Silent clients that came one after another time out one after another, each after its own timeout")
    func staggered() async throws {
        let failures = FailureLog()
        try await withTLS(.bsd, server: Self.server(timeout: .milliseconds(300)), handshakeFailures: failures.report) { tls in
            let listener = try await tls.listen(on: loopback)
            serveEcho(listener)
            let clock = ContinuousClock()
            let endpoint = Endpoint(host: "localhost", port: listener.localAddress.port)
            let first = try await tls.wrapped.connect(to: endpoint)
            try await Task.sleep(for: .milliseconds(200))
            let second = try await tls.wrapped.connect(to: endpoint)
            let secondConnected = clock.now
            // The first times out about 300 ms after it came; the second, 200 ms later,
            // is still in its handshake then.
            _ = try await failures.first()
            #expect(failures.count == 1)
            #expect(clock.now - secondConnected < .milliseconds(300))
            for _ in 0..<300 where failures.count < 2 { try await Task.sleep(for: .milliseconds(10)) }
            #expect(failures.count == 2)
            #expect(clock.now - secondConnected >= .milliseconds(300))
            #expect(failures.all.allSatisfy { $0.code == .deadlineExceeded })
            first.close()
            second.close()
            listener.close()
        }
    }

    @Test("A handshake that finished is not timed out: its connection still echoes after the timeout passed", arguments: Backend.allCases)
    func finishedHandshakeSurvivesItsDeadline(backend: Backend) async throws {
        let failures = FailureLog()
        try await withTLS(backend, server: Self.server(timeout: .milliseconds(200)), handshakeFailures: failures.report) { tls in
            let listener = try await tls.listen(on: loopback)
            serveEcho(listener)
            let client = AsyncConnection(try await tls.connect(to: Endpoint(host: "localhost", port: listener.localAddress.port)))
            try await Task.sleep(for: .milliseconds(500))
            let message = testBytes(100, seed: 7)
            try await client.write(message)
            #expect(try await client.read(exactly: message.count) == message)
            #expect(failures.count == 0)
            client.close()
            listener.close()
        }
    }

    @Test("After the deadlines ran out, a later silent client is timed out too (the timing starts again)")
    func timingStartsAgain() async throws {
        let failures = FailureLog()
        try await withTLS(.bsd, server: Self.server(timeout: .milliseconds(150)), handshakeFailures: failures.report) { tls in
            let listener = try await tls.listen(on: loopback)
            serveEcho(listener)
            let endpoint = Endpoint(host: "localhost", port: listener.localAddress.port)
            let first = try await tls.wrapped.connect(to: endpoint)
            _ = try await failures.first()
            // Past the first deadline and the timing task's end.
            try await Task.sleep(for: .milliseconds(300))
            let second = try await tls.wrapped.connect(to: endpoint)
            for _ in 0..<300 where failures.count < 2 { try await Task.sleep(for: .milliseconds(10)) }
            #expect(failures.count == 2)
            #expect(failures.all.allSatisfy { $0.code == .deadlineExceeded && $0.reason == .tlsHandshake })
            first.close()
            second.close()
            listener.close()
        }
    }

    @Test("Closing the listener closes the connections still in their handshake", arguments: Backend.allCases)
    func closeDuringHandshake(backend: Backend) async throws {
        try await withTLS(backend, server: Self.server(timeout: .seconds(30))) { tls in
            let listener = try await tls.listen(on: loopback)
            let silent = AsyncConnection(try await tls.wrapped.connect(to: Endpoint(host: "localhost", port: listener.localAddress.port)))
            // Accepted and in its handshake before the close.
            try await Task.sleep(for: .milliseconds(200))
            let clock = ContinuousClock()
            let start = clock.now
            listener.close()
            _ = try? await silent.readToEnd()
            // Closed by the listener, not by the 30 s timeout.
            #expect(clock.now - start < .seconds(5))
            silent.close()
        }
    }
}
