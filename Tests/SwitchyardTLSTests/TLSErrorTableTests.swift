import Switchyard
import SwitchyardTLS
import Testing

/// Each failure of the table in TLSErrorTable (and docs/ERRORS.md), injected for real.
@Suite("TLS failures end with the documented errors", .serialized, .timeLimit(.minutes(1)))
struct TLSErrorTableTests {
    func connectError(
        _ backend: Backend, server: TLSConfiguration, client: TLSConfiguration = TestCertificates.client(), host: String = "localhost"
    ) async throws -> (client: TransportError?, server: TransportError?) {
        let failures = FailureLog()
        return try await withTLS(backend, client: client, server: server, handshakeFailures: failures.report) { tls in
            let listener = try await tls.listen(on: loopback)
            serveEcho(listener)
            let error = await transportError {
                _ = try await tls.connect(to: Endpoint(host: host, port: listener.localAddress.port))
            }
            let serverError = try await failures.first()
            listener.close()
            return (error, serverError)
        }
    }

    @Test("A certificate for another host: unavailable/certificate, with OpenSSL's verify result", arguments: Backend.allCases)
    func wrongHost(backend: Backend) async throws {
        let (error, _) = try await connectError(backend, server: TestCertificates.server("wronghost"))
        #expect(error?.code == .unavailable)
        #expect(error?.reason == .certificate)
        #expect(error?.message.contains("hostname mismatch") == true, "\(String(describing: error))")
        #expect(error?.native?.domain == .x509)
    }

    @Test("An expired certificate: unavailable/certificate, 'certificate has expired'", arguments: Backend.allCases)
    func expired(backend: Backend) async throws {
        let (error, _) = try await connectError(backend, server: TestCertificates.server("expired"))
        #expect(error?.reason == .certificate)
        #expect(error?.message.contains("certificate has expired") == true, "\(String(describing: error))")
    }

    @Test("A certificate from a CA the client does not trust: unavailable/certificate", arguments: Backend.allCases)
    func untrusted(backend: Backend) async throws {
        let (error, serverError) = try await connectError(backend, server: TestCertificates.server("untrusted"))
        #expect(error?.code == .unavailable)
        #expect(error?.reason == .certificate)
        #expect(error?.message.contains("unable to get local issuer certificate") == true, "\(String(describing: error))")
        // The client's alert reaches the server: it refused the server's certificate.
        #expect(serverError?.reason == .certificate, "\(String(describing: serverError))")
    }

    @Test("No client certificate where one is required: both sides end with certificate errors", arguments: Backend.allCases)
    func missingClientCertificate(backend: Backend) async throws {
        let failures = FailureLog()
        try await withTLS(backend, server: TestCertificates.server(clientAuthentication: .required), handshakeFailures: failures.report) { tls in
            let listener = try await tls.listen(on: loopback)
            serveEcho(listener)
            // TLS 1.3: the client's handshake ends before the server checks; its first read
            // hears the server's `certificate required` alert.
            var clientError: TransportError?
            do {
                let client = AsyncConnection(try await tls.connect(to: Endpoint(host: "localhost", port: listener.localAddress.port)))
                clientError = await transportError { _ = try await client.read() }
                client.close()
            } catch let error as TransportError {
                clientError = error
            }
            #expect(clientError?.code == .unavailable)
            #expect(clientError?.reason == .certificate, "\(String(describing: clientError))")
            let serverError = try await failures.first()
            #expect(serverError?.reason == .certificate)
            #expect(serverError?.message.contains("no certificate") == true, "\(String(describing: serverError))")
            listener.close()
        }
    }

    @Test("A plaintext peer: the TLS server's handshake ends with protocol violation", arguments: Backend.allCases)
    func plaintextClient(backend: Backend) async throws {
        let failures = FailureLog()
        try await withTLS(backend, handshakeFailures: failures.report) { tls in
            let listener = try await tls.listen(on: loopback)
            serveEcho(listener)
            let plain = AsyncConnection(try await tls.wrapped.connect(to: Endpoint(host: "localhost", port: listener.localAddress.port)))
            try await plain.write(Array("GET / HTTP/1.1\r\nHost: localhost\r\n\r\n".utf8))
            let serverError = try await failures.first()
            #expect(serverError?.code == .unavailable)
            #expect(serverError?.reason == .protocolViolation, "\(String(describing: serverError))")
            // The server's alert, then its close: never a crash, never an echo.
            let rest = try? await plain.readToEnd()
            #expect(rest?.starts(with: Array("GET".utf8)) != true)
            plain.close()
            listener.close()
        }
    }

    @Test("A plaintext server: the TLS client's handshake ends with protocol violation", arguments: Backend.allCases)
    func plaintextServer(backend: Backend) async throws {
        try await withTLS(backend) { tls in
            let listener = try await tls.wrapped.listen(on: loopback)
            listener.acceptConnections { connection in
                connection.write(Array("220 plain text greeting, no TLS here\r\n".utf8), completion: nil)
                connection.setHandler(EchoHandler(connection))
            }
            let error = await transportError {
                _ = try await tls.connect(to: Endpoint(host: "localhost", port: listener.localAddress.port))
            }
            #expect(error?.code == .unavailable)
            #expect(error?.reason == .protocolViolation, "\(String(describing: error))")
            listener.close()
        }
    }

    @Test("A peer that never answers the handshake: deadlineExceeded/tls handshake after the timeout")
    func handshakeTimeout() async throws {
        var client = TestCertificates.client()
        client.handshakeTimeout = .milliseconds(200)
        try await withTLS(.memory, client: client) { tls in
            let listener = try await tls.wrapped.listen(on: loopback)  // accepts, never answers
            let clock = ContinuousClock()
            let start = clock.now
            let error = await transportError {
                _ = try await tls.connect(to: Endpoint(host: "localhost", port: listener.localAddress.port))
            }
            #expect(error?.code == .deadlineExceeded)
            #expect(error?.reason == .tlsHandshake)
            #expect(clock.now - start < .seconds(2))
            listener.close()
        }
    }

    @Test("Files that cannot be loaded: invalidArgument, naming the file")
    func badFiles() throws {
        let missing = TLSConfiguration.server(certificateChainFile: "/nonexistent/cert.pem", privateKeyFile: TestCertificates.path("server.key"))
        #expect {
            _ = try TLSContext(configuration: missing)
        } throws: { error in
            let error = error as? TransportError
            return error?.code == .invalidArgument && error?.message.contains("/nonexistent/cert.pem") == true
        }
        // A key that is not PEM (the CA certificate's text is not a key).
        let notAKey = TLSConfiguration.server(certificateChainFile: TestCertificates.path("server.pem"), privateKeyFile: TestCertificates.path("ca.pem"))
        #expect {
            _ = try TLSContext(configuration: notAKey)
        } throws: { error in
            (error as? TransportError)?.message.contains("ca.pem") == true
        }
        let mismatched = TLSConfiguration.server(certificateChainFile: TestCertificates.path("server.pem"), privateKeyFile: TestCertificates.path("client.key"))
        #expect {
            _ = try TLSContext(configuration: mismatched)
        } throws: { error in
            (error as? TransportError)?.message.contains("does not match") == true
        }
        let badBundle = TLSConfiguration.client(trustRoots: .pemFile(TestCertificates.path("server.key")))
        #expect {
            _ = try TLSContext(configuration: badBundle)
        } throws: { error in
            (error as? TransportError)?.message.contains("server.key") == true
        }
    }

    @Test("Plaintext after the handshake: the reader's connection ends with protocol violation", arguments: Backend.allCases)
    func garbageAfterHandshake(backend: Backend) async throws {
        try await withTLS(backend) { tls in
            let listener = try await tls.listen(on: loopback)
            listener.acceptConnections { connection in
                let tls = connection as! TLSConnection
                connection.write(Array("sealed".utf8)) { _ in
                    // Bytes that are not a TLS record, straight onto the TCP stream.
                    tls.wrapped.write(Array("HTTP/1.1 200 OK\r\n\r\nnot a record".utf8), completion: nil)
                }
            }
            let client = AsyncConnection(try await tls.connect(to: Endpoint(host: "localhost", port: listener.localAddress.port)))
            #expect(try await client.read(exactly: 6) == Array("sealed".utf8))
            let error = await transportError { _ = try await client.read() }
            #expect(error?.code == .unavailable)
            #expect(error?.reason == .protocolViolation, "\(String(describing: error))")
            client.close()
            listener.close()
        }
    }

    @Test("200 random byte strings at a TLS server: each ends its handshake with an error, none crashes")
    func randomGarbage() async throws {
        let failures = FailureLog()
        try await withTLS(.memory, handshakeFailures: failures.report) { tls in
            let listener = try await tls.listen(on: loopback)
            serveEcho(listener)
            for seed in 0..<200 {
                let raw = try await tls.wrapped.connect(to: Endpoint(host: "localhost", port: listener.localAddress.port))
                var bytes = testBytes(1 + seed * 37 % 3000, seed: UInt64(seed) + 100)
                // Every tenth one starts like a handshake record, to get past the first check.
                if seed % 10 == 0 && bytes.count > 5 { bytes.replaceSubrange(0..<3, with: [0x16, 0x03, 0x01]) }
                raw.write(bytes) { _ in raw.close() }
            }
            for _ in 0..<500 where failures.count < 200 { try await Task.sleep(for: .milliseconds(10)) }
            let all = failures.all
            #expect(all.count == 200)
            #expect(all.allSatisfy { $0.code == .unavailable && ($0.reason == .protocolViolation || $0.reason == .tlsHandshake) },
                    "\(Set(all.map { "\($0.code)/\($0.reason)" }))")
            listener.close()
        }
    }
}
