import Switchyard
import Synchronization

// The TLS scenarios (65–70): each TLS failure a peer can cause ends with the error of
// docs/ERRORS.md's TLS table (code, reason, and OpenSSL's X509 verify text where the
// table gives it), and the server that saw it keeps serving others. They run on pairs
// of TLS backends (``ConformancePair/tls``) and skip every other pair.

extension ConformanceScenario {
    /// 65. A server certificate for another host name.
    public static let tlsWrongHostName = ConformanceScenario(
        "TLS: a server certificate for another host name ends the client's connect with unavailable (certificate) and 'hostname mismatch', and the server keeps serving others",
        checklist: ["K"], timeLimit: .seconds(60)
    ) { context in
        try await context.expectServerCertificateRefused("wronghost", verifyText: "hostname mismatch")
    }

    /// 66. An expired server certificate.
    public static let tlsExpiredCertificate = ConformanceScenario(
        "TLS: an expired server certificate ends the client's connect with unavailable (certificate) and 'certificate has expired', and the server keeps serving others",
        checklist: ["K"], timeLimit: .seconds(60)
    ) { context in
        try await context.expectServerCertificateRefused("expired", verifyText: "certificate has expired")
    }

    /// 67. A server certificate from a CA the client does not trust.
    public static let tlsUntrustedCertificate = ConformanceScenario(
        "TLS: a server certificate from a CA the client does not trust ends the client's connect with unavailable (certificate) and 'unable to get local issuer certificate', the server hears it as certificate, and keeps serving others",
        checklist: ["K"], timeLimit: .seconds(60)
    ) { context in
        try await context.expectServerCertificateRefused(
            "untrusted", verifyText: "unable to get local issuer certificate", serverHearsRefusal: true)
    }

    /// 68. No client certificate where the server requires one (mutual TLS).
    public static let tlsMissingClientCertificate = ConformanceScenario(
        "TLS: a client without a certificate at a server that requires one ends with unavailable (certificate) on both sides, and a client with one is then served",
        checklist: ["K"], timeLimit: .seconds(60)
    ) { context in
        let tls = try context.requireTLS()
        let failures = HandshakeFailureLog()
        let server = try tls.backend(over: tls.serverBase, .init(requiresClientCertificate: true, serverHandshakeFailures: failures.append))
        let withCertificate = try tls.backend(over: tls.clientBase, .init(presentsClientCertificate: true))
        try await context.withTransports(server: server, client: withCertificate) { server, withCertificate in
            let listener = try await context.listenServingEcho(on: server)
            defer { listener.close() }
            let target = context.endpoint(of: listener)
            // TLS 1.3: the client's handshake ends before the server has checked; its first
            // read hears the server's `certificate required` alert. TLS 1.2: its connect does.
            let client = context.client
            let error = try await context.expectError(
                code: .unavailable, reason: .certificate, "a client without a certificate connecting and reading"
            ) { () async throws -> Int in
                let connection = AsyncConnection(try await client.connect(to: target))
                defer { connection.close() }
                let bytes = try await connection.read()
                return bytes?.count ?? -1
            }
            context.log("the client heard: \(error)")
            let serverError = try await failures.first(context, "the server's handshake failure")
            try context.expectError(serverError, code: .unavailable, reason: .certificate, "the server's handshake failure")
            try context.expect(serverError.message.contains("no certificate"), "the server's handshake failure says the client sent no certificate; it says: \(serverError.message)")
            try await context.expectEchoes(over: withCertificate, to: target, "a client with a certificate")
        }
    }

    /// 69. A plaintext client at a TLS server.
    public static let tlsPlaintextClient = ConformanceScenario(
        "TLS: a client that sends plaintext (an HTTP request) to a TLS server ends the server's handshake with unavailable (protocol violation), is never echoed, and the server keeps serving TLS clients",
        checklist: ["K"], timeLimit: .seconds(60)
    ) { context in
        let tls = try context.requireTLS()
        let failures = HandshakeFailureLog()
        let server = try tls.backend(over: tls.serverBase, .init(serverHandshakeFailures: failures.append))
        try await context.withTransports(server: server, client: tls.clientBase) { server, plain in
            let listener = try await context.listenServingEcho(on: server)
            defer { listener.close() }
            let target = context.endpoint(of: listener)
            let request = Array("GET / HTTP/1.1\r\nHost: localhost\r\n\r\n".utf8)
            let connection = AsyncConnection(try await context.step("a plaintext client connecting") { try await plain.connect(to: target) })
            defer { connection.close() }
            try await context.step("the plaintext client writing an HTTP request") { try await connection.write(request) }
            let serverError = try await failures.first(context, "the server's handshake failure")
            try context.expectError(serverError, code: .unavailable, reason: .protocolViolation, "the server's handshake failure on a plaintext request")
            // The server's alert, then its close (or a reset): never an echo, never a hang.
            let answer: [UInt8] = try await context.within(seconds: 10, "the plaintext client reading the server's answer to its end") {
                (try? await connection.readToEnd(limit: 1 << 20)) ?? []
            }
            try context.expect(!answer.starts(with: Array("GET".utf8)), "the TLS server echoed the plaintext request")
            try await context.expectEchoes(over: context.client, to: target, "a TLS client after the plaintext one")
        }
    }

    /// 70. A TLS client at a plaintext server.
    public static let tlsPlaintextServer = ConformanceScenario(
        "TLS: a server that answers in plaintext ends the TLS client's connect with unavailable (protocol violation), and the plaintext server keeps serving plaintext clients",
        checklist: ["K"], timeLimit: .seconds(60)
    ) { context in
        let tls = try context.requireTLS()
        let greeting = Array("220 plain text greeting, no TLS here\r\n".utf8)
        try await context.withTransports(server: tls.serverBase, client: tls.clientBase) { plainServer, plainClient in
            let listener = try await context.listen(on: context.localEndpoint(), using: plainServer)
            defer { listener.close() }
            listener.acceptConnections { connection in
                connection.write(greeting, completion: nil)
                EchoHandler(connection).start()
            }
            let target = context.endpoint(of: listener)
            let client = context.client
            try await context.expectError(code: .unavailable, reason: .protocolViolation, "a TLS client connecting to a plaintext server") {
                try await client.connect(to: target).close()
            }
            let connection = AsyncConnection(try await context.step("a plaintext client connecting") { try await plainClient.connect(to: target) })
            defer { connection.close() }
            let ping = ConformancePattern.bytes(count: 1000, seed: 70)
            try await context.step("the plaintext client writing") { try await connection.write(ping) }
            let received = try await context.read(exactly: greeting.count + ping.count, from: connection)
            try context.expectBytes(received, greeting + ping, "the plaintext server's greeting and echo")
        }
    }
}

extension ConformanceContext {
    /// What the TLS scenarios need, or a skip for a pair that is not of TLS backends.
    func requireTLS(file: String = #fileID, line: Int = #line) throws -> ConformanceTLS {
        guard let tls else {
            try skip("\(pair) is not a pair of TLS backends: TLS scenarios run on the TLS pairs (switchyard-conformance --tls)", file: file, line: line)
        }
        return tls
    }

    /// Runs `body` with a server transport made from `server` and a client transport
    /// from `client` (this run's configuration), and shuts both down afterwards, also when
    /// `body` fails.
    func withTransports(
        server: TransportBackend, client: TransportBackend,
        _ body: @escaping @Sendable (any Transport, any Transport) async throws -> Void
    ) async throws {
        let serverTransport: any Transport
        do {
            serverTransport = try server.make(configuration)
        } catch {
            try fail("making a '\(server.name)' transport failed: \(error)")
        }
        let clientTransport: any Transport
        do {
            clientTransport = try client.make(configuration)
        } catch {
            await serverTransport.shutdownNow()
            try fail("making a '\(client.name)' transport failed: \(error)")
        }
        do {
            try await body(serverTransport, clientTransport)
        } catch {
            await clientTransport.shutdownNow()
            await serverTransport.shutdownNow()
            throw error
        }
        await clientTransport.shutdownNow()
        await serverTransport.shutdownNow()
    }

    /// Listens on `endpoint` on `transport` (not the pair's server transport).
    func listen(on endpoint: Endpoint, using transport: any Transport, file: String = #fileID, line: Int = #line) async throws -> any Listener {
        do {
            return try await within(seconds: 10, "listen on \(endpoint)", file: file, line: line) {
                try await transport.listen(on: endpoint)
            }
        } catch let error as TransportError {
            throw failure("listen on \(endpoint) failed: \(error)", file: file, line: line)
        }
    }

    /// Listens on ``localEndpoint()`` on `transport` and echoes on every accepted
    /// connection.
    func listenServingEcho(on transport: any Transport, file: String = #fileID, line: Int = #line) async throws -> any Listener {
        let listener = try await listen(on: localEndpoint(), using: transport, file: file, line: line)
        listener.acceptConnections { connection in EchoHandler(connection).start() }
        return listener
    }

    /// Connects `transport` to `target`, writes some bytes, and fails unless they come
    /// back: the server still serves.
    func expectEchoes(over transport: any Transport, to target: Endpoint, _ who: String, file: String = #fileID, line: Int = #line) async throws {
        let connection = AsyncConnection(try await step("\(who) connecting", file: file, line: line) { try await transport.connect(to: target) })
        defer { connection.close() }
        let ping = ConformancePattern.bytes(count: 4096, seed: 65)
        try await step("\(who) writing", file: file, line: line) { try await connection.write(ping) }
        let echoed = try await read(exactly: ping.count, from: connection, file: file, line: line)
        try expectBytes(echoed, ping, "what the server echoed to \(who)", file: file, line: line)
    }

    /// 65–67: the server presents `certificate`; the pair's client refuses it with
    /// `unavailable`/`certificate` and OpenSSL's verify text; a client that checks nothing
    /// is then served by the same listener.
    func expectServerCertificateRefused(_ certificate: String, verifyText: String, serverHearsRefusal: Bool = false) async throws {
        let tls = try requireTLS()
        let failures = HandshakeFailureLog()
        let server = try tls.backend(over: tls.serverBase, .init(serverCertificate: certificate, serverHandshakeFailures: failures.append))
        let lenient = try tls.backend(over: tls.clientBase, .init(verifiesServer: false))
        try await withTransports(server: server, client: lenient) { server, lenient in
            let listener = try await self.listenServingEcho(on: server)
            defer { listener.close() }
            let target = self.endpoint(of: listener)
            let client = self.client
            let error = try await self.expectError(code: .unavailable, reason: .certificate, "a connect to a server presenting \(certificate).pem") {
                try await client.connect(to: target).close()
            }
            try self.expect(error.message.contains(verifyText), "the certificate error says '\(verifyText)' (OpenSSL's verify result); it says: \(error.message)")
            try self.expectEqual(error.native?.domain.description, "x509", "the certificate error's native domain")
            if serverHearsRefusal {
                // The client's alert reaches the server: its certificate was refused.
                let serverError = try await failures.first(self, "the server's handshake failure")
                try self.expectError(serverError, code: .unavailable, reason: .certificate, "the server's handshake failure after the client refused its certificate")
            }
            try await self.expectEchoes(over: lenient, to: target, "a client that does not check the certificate")
        }
    }
}

/// Server handshake failures, as a TLS backend reports them, from any thread.
final class HandshakeFailureLog: Sendable {
    private let errors = Mutex<[TransportError]>([])

    init() {}

    var append: @Sendable (TransportError) -> Void { { error in self.errors.withLock { $0.append(error) } } }

    /// The first failure, waiting up to 10 s for it.
    func first(_ context: ConformanceContext, _ what: String, file: String = #fileID, line: Int = #line) async throws -> TransportError {
        try await context.waitUntil(seconds: 10, "\(what) was reported", file: file, line: line) {
            errors.withLock { !$0.isEmpty }
        }
        return errors.withLock { $0[0] }
    }
}
