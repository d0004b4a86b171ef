import Switchyard
import SwitchyardTLS
import Synchronization
import Testing

@Suite("TLS connections over every backend", .serialized, .timeLimit(.minutes(1)))
struct TLSConnectionTests {
    @Test("1 MiB echoed over TLS arrives intact, with the ALPN protocol both sides share", arguments: Backend.allCases)
    func echo(backend: Backend) async throws {
        try await withTLS(
            backend, client: TestCertificates.client(applicationProtocols: ["h2", "switchyard"]),
            server: TestCertificates.server(applicationProtocols: ["switchyard", "h2"])
        ) { tls in
            let listener = try await tls.listen(on: loopback)
            serveEcho(listener)
            let connection = try await tls.connect(to: Endpoint(host: "localhost", port: listener.localAddress.port))
            let tlsConnection = try #require(connection as? TLSConnection)
            #expect(tlsConnection.negotiatedProtocol == "switchyard")
            #expect(tlsConnection.negotiatedVersion == .tls13)
            #expect(connection.backendName == "\(backend)+tls")

            let bytes = testBytes(1 << 20, seed: 1)
            let client = AsyncConnection(connection)
            let writer = Task {
                for start in stride(from: 0, to: bytes.count, by: 10_000) {
                    try await client.write(Array(bytes[start..<min(start + 10_000, bytes.count)]))
                }
                try await client.shutdownOutput()
            }
            let echoed = try await client.readToEnd()
            try await writer.value
            #expect(echoed.count == bytes.count)
            #expect(echoed == bytes)
            client.close()
            listener.close()
        }
    }

    @Test("Mutual TLS: a client with a certificate from the CA gets in; the server sees it", arguments: Backend.allCases)
    func mutual(backend: Backend) async throws {
        try await withTLS(
            backend, client: TestCertificates.client(withCertificate: true),
            server: TestCertificates.server(clientAuthentication: .required)
        ) { tls in
            let listener = try await tls.listen(on: loopback)
            let accepted = Task { () -> TLSConnection? in
                for await connection in listener.connections { return connection as? TLSConnection }
                return nil
            }
            let connection = AsyncConnection(try await tls.connect(to: Endpoint(host: "127.0.0.1", port: listener.localAddress.port)))
            let server = try #require(await accepted.value)
            #expect(server.peerPresentedCertificate)
            let serverSide = AsyncConnection(server)
            try await connection.write(Array("ping".utf8))
            #expect(try await serverSide.read(exactly: 4) == Array("ping".utf8))
            connection.close()
            serverSide.close()
            listener.close()
        }
    }

    @Test("A close sends close_notify: the peer reads a clean end of stream", arguments: Backend.allCases)
    func cleanClose(backend: Backend) async throws {
        try await withTLS(backend) { tls in
            let listener = try await tls.listen(on: loopback)
            listener.acceptConnections { connection in
                connection.write(Array("bye".utf8)) { _ in connection.close() }
            }
            let client = AsyncConnection(try await tls.connect(to: Endpoint(host: "localhost", port: listener.localAddress.port)))
            #expect(try await client.readToEnd() == Array("bye".utf8))
            client.close()
            listener.close()
        }
    }

    @Test("A peer that closes TCP without close_notify is reported as truncated, after its data", arguments: Backend.allCases)
    func truncated(backend: Backend) async throws {
        try await withTLS(backend) { tls in
            let listener = try await tls.listen(on: loopback)
            listener.acceptConnections { connection in
                let tls = connection as! TLSConnection
                // The TCP connection ends under the TLS one: no close_notify.
                connection.write(Array("partial".utf8)) { _ in tls.wrapped.close() }
            }
            let client = AsyncConnection(try await tls.connect(to: Endpoint(host: "localhost", port: listener.localAddress.port)))
            #expect(try await client.read(exactly: 7) == Array("partial".utf8))
            let error = await transportError { _ = try await client.read() }
            #expect(error?.code == .unavailable)
            #expect(error?.reason == .truncated)
            client.close()
            listener.close()
        }
    }

    @Test("Writes after close or shutdownOutput are refused as the Connection contract says", arguments: [Backend.memory, .bsd])
    func refusals(backend: Backend) async throws {
        try await withTLS(backend) { tls in
            let listener = try await tls.listen(on: loopback)
            serveEcho(listener)
            let connection = try await tls.connect(to: Endpoint(host: "localhost", port: listener.localAddress.port))
            let client = AsyncConnection(connection)
            try await client.shutdownOutput()
            let afterShutdown = await transportError { try await client.write([1]) }
            #expect(afterShutdown?.reason == .outputShutdown)
            #expect(try await client.readToEnd() == [])
            client.close()
            let afterClose = await transportError { try await client.write([1]) }
            #expect(afterClose?.code == .cancelled)
            #expect(afterClose?.reason == .closed)
            listener.close()
        }
    }

    @Test("TLS 1.2 when the client speaks no newer: echo and a clean end of stream as with 1.3", arguments: [Backend.memory, .bsd])
    func tls12(backend: Backend) async throws {
        var client = TestCertificates.client()
        client.maximumVersion = .tls12
        try await withTLS(backend, client: client) { tls in
            let listener = try await tls.listen(on: loopback)
            serveEcho(listener)
            let connection = try #require(
                try await tls.connect(to: Endpoint(host: "localhost", port: listener.localAddress.port)) as? TLSConnection)
            #expect(connection.negotiatedVersion == .tls12)
            let async = AsyncConnection(connection)
            let bytes = testBytes(100_000, seed: 5)
            connection.write(bytes, completion: nil)
            try await async.shutdownOutput()
            #expect(try await async.readToEnd() == bytes)
            async.close()
            listener.close()
        }
    }

    @Test("A closed TLS connection is released: no cycle through the wrapped connection's handler", arguments: Backend.allCases)
    func released(backend: Backend) async throws {
        try await withTLS(backend) { tls in
            let listener = try await tls.listen(on: loopback)
            serveEcho(listener)
            weak var weakConnection: TLSConnection?
            do {
                let connection = try #require(
                    try await tls.connect(to: Endpoint(host: "localhost", port: listener.localAddress.port)) as? TLSConnection)
                weakConnection = connection
                let async = AsyncConnection(connection)
                try await async.write([1, 2, 3])
                #expect(try await async.read(exactly: 3) == [1, 2, 3])
                async.close()
            }
            for _ in 0..<200 where weakConnection != nil { try await Task.sleep(for: .milliseconds(10)) }
            #expect(weakConnection == nil)
            listener.close()
        }
    }

    @Test("A connect whose task is cancelled during the handshake ends with cancelled/task cancelled")
    func cancelled() async throws {
        try await withTLS(.memory) { tls in
            let listener = try await tls.wrapped.listen(on: loopback)  // never answers the handshake
            let attempt = Task {
                await transportError { _ = try await tls.connect(to: Endpoint(host: "localhost", port: listener.localAddress.port)) }
            }
            try await Task.sleep(for: .milliseconds(100))
            attempt.cancel()
            let error = await attempt.value
            #expect(error?.code == .cancelled)
            #expect(error?.reason == .taskCancelled)
            listener.close()
        }
    }

    /// Echoes, and after the peer's close_notify still writes a last line (half-close).
    final class LateWriter: ConnectionHandler, @unchecked Sendable {
        let connection: any Connection
        init(_ connection: any Connection) { self.connection = connection }
        func connectionDidRead(_ bytes: UnsafeRawBufferPointer) { connection.write(Array(bytes), completion: nil) }
        func connectionDidReadEnd() {
            connection.write(Array(" and after your end".utf8), completion: nil)
            connection.shutdownOutput(completion: nil)
        }
        func connectionDidClose(error: TransportError?) {}
    }

    @Test("Half-close: after the peer's close_notify this side still writes, and the peer reads it", arguments: [TLSConfiguration.Version.tls12, .tls13])
    func halfClose(version: TLSConfiguration.Version) async throws {
        var client = TestCertificates.client()
        client.maximumVersion = version
        try await withTLS(.bsd, client: client) { tls in
            let listener = try await tls.listen(on: loopback)
            listener.acceptConnections { connection in
                connection.setHandler(LateWriter(connection))
                connection.startReading()
            }
            let async = AsyncConnection(try await tls.connect(to: Endpoint(host: "localhost", port: listener.localAddress.port)))
            try await async.write(Array("hello".utf8))
            try await async.shutdownOutput()
            let reply = String(decoding: try await async.readToEnd(), as: UTF8.self)
            #expect(reply == "hello and after your end")
            async.close()
            listener.close()
        }
    }

    /// Records how the connection ended (and whether it read the end of stream).
    final class EndRecorder: ConnectionHandler, @unchecked Sendable {
        let ended = Mutex<TransportError??>(nil)
        let readEnd = Mutex(false)
        func connectionDidRead(_ bytes: UnsafeRawBufferPointer) {}
        func connectionDidReadEnd() { readEnd.withLock { $0 = true } }
        func connectionDidClose(error: TransportError?) { ended.withLock { $0 = .some(error) } }
    }

    @Test("Shutting a TLSTransport down sends close_notify: the peer reads a clean end, the server's connection ends cancelled/shutdown",
          arguments: [(Backend.bsd, false), (.libuv, true), (.memory, false)])
    func shutdownSendsCloseNotify(backend: Backend, graceful: Bool) async throws {
        let serverTLS = try TLSTransport(wrapping: try backend.transport(), server: TestCertificates.server())
        let recorder = EndRecorder()
        let listener = try await serverTLS.listen(on: loopback)
        listener.acceptConnections { connection in
            connection.setHandler(recorder)
            connection.startReading()
        }
        try await withTLS(backend, server: nil) { tls in
            let client = AsyncConnection(try await tls.connect(to: Endpoint(host: "localhost", port: listener.localAddress.port)))
            try await client.write([1])
            try await Task.sleep(for: .milliseconds(50))
            if graceful {
                await serverTLS.shutdown(gracePeriod: .milliseconds(100))
            } else {
                await serverTLS.shutdownNow()
            }
            #expect(try await client.readToEnd() == [])
            let end = recorder.ended.withLock { $0 }
            #expect(end??.code == .cancelled)
            #expect(end??.reason == .shutdown)
            client.close()
        }
    }

    @Test("A local close reports nil even when the peer had already gone", arguments: Backend.allCases)
    func localCloseAfterPeerLeft(backend: Backend) async throws {
        try await withTLS(backend) { tls in
            let recorder = EndRecorder()
            let listener = try await tls.listen(on: loopback)
            let accepted = Task { () -> (any Connection)? in
                for await connection in listener.connections { return connection }
                return nil
            }
            let client = try await tls.connect(to: Endpoint(host: "localhost", port: listener.localAddress.port))
            let server = try #require(await accepted.value)
            server.setHandler(recorder)
            server.startReading()
            client.close()
            for _ in 0..<200 where !recorder.readEnd.withLock({ $0 }) { try await Task.sleep(for: .milliseconds(10)) }
            #expect(recorder.readEnd.withLock { $0 })  // close_notify: a clean end
            server.close()
            for _ in 0..<100 where recorder.ended.withLock({ $0 }) == nil { try await Task.sleep(for: .milliseconds(10)) }
            let end = recorder.ended.withLock { $0 }
            #expect(end != nil)
            #expect(end! == nil)
            listener.close()
        }
    }
}
