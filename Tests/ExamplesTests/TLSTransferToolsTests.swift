import Foundation
import Testing

/// transfer-server --tls-cert and transfer-client --tls: a file sent over TLS arrives
/// whole, with the transfer digest Python computes; a client without --tls is turned away.
@Suite("transfer tools over TLS", .serialized, .timeLimit(.minutes(3)))
struct TLSTransferToolsTests {
    @Test("transfer-client --tls sends a file whole to transfer-server --tls-cert", arguments: socketBackends)
    func sendsWholeFile(backend: String) async throws {
        let certificates = try TestCertificates.shared()
        let work = try TemporaryFolder()
        let file = work.path + "/secret.bin"
        let size = 8 << 20
        try writeRandomFile(file, size: size)
        let dir = work.path + "/received"
        let (server, port) = try await startTLSTransferServer(backend: backend, dir: dir, certificates: certificates)
        defer { server.killIfRunning() }

        let client = try Subprocess(
            try Products.path("transfer-client"),
            ["send", file, "--backend", backend, "--host", "localhost", "--port", String(port),
             "--tls", "--tls-ca", certificates.path("ca.pem")],
            name: "transfer-client(\(backend), tls)")
        let ending = await client.wait(timeout: .seconds(90))
        #expect(ending == .exit(0), "\(client.report)\n\(server.report)")
        let sha256 = try await transferDigest(file)
        let summary = try #require(TransferSummary(client.stdout), "no summary line\n\(client.report)")
        #expect(summary == TransferSummary(sent: UInt64(size), resent: 0, resumes: 0, sha256: sha256), "\(client.report)")
        #expect(try await transferDigest(dir + "/secret.bin") == sha256, "the stored copy differs")
        _ = try await server.waitForLine(containing: "transfer-server: received secret.bin (\(size) bytes, sha256 \(sha256))", timeout: .seconds(5))
        await expectCleanStop(server)
    }

    @Test("transfer-client without --tls, or with a CA that did not sign the server, fails and sends nothing")
    func refusedClients() async throws {
        let certificates = try TestCertificates.shared()
        let work = try TemporaryFolder()
        let file = work.path + "/small.bin"
        try writeRandomFile(file, size: 4096)
        let dir = work.path + "/received"
        let (server, port) = try await startTLSTransferServer(backend: "bsd", dir: dir, certificates: certificates)
        defer { server.killIfRunning() }
        for (extra, mentions) in [
            // Plaintext: the server closes each connection at its first bytes; the client's
            // last call sees that close, or a reset when it was still writing (EPIPE).
            ([String](), ["the last: unavailable (closed)", "the last: unavailable (reset)"]),
            (["--tls", "--tls-ca", certificates.path("other-ca.pem")], ["the last: unavailable (certificate): the peer's certificate did not verify"]),
        ] {
            let client = try Subprocess(
                try Products.path("transfer-client"),
                ["send", file, "--port", String(port), "--reconnect-timeout", "1"] + extra, name: "transfer-client")
            let ending = await client.wait(timeout: .seconds(60))
            #expect(ending == .exit(1), "\(client.report)\n\(server.report)")
            #expect(mentions.contains { client.stderr.contains($0) }, "\(client.report)")
        }
        #expect(!FileManager.default.fileExists(atPath: dir + "/small.bin"))
        _ = try await server.waitForStandardError(containing: "transfer-server: TLS handshake with 127.0.0.1:")
        await expectCleanStop(server)
    }

    /// Mutual TLS: the transfer tools take the echo tools' TLS options (one set of option
    /// groups), so transfer-server --tls-client-ca turns away a sender without a client
    /// certificate and takes the file from one that presents it.
    @Test("transfer-server --tls-client-ca takes a file only from a transfer-client with --tls-cert and --tls-key")
    func mutualTLS() async throws {
        let certificates = try TestCertificates.shared()
        let work = try TemporaryFolder()
        let file = work.path + "/signed.bin"
        try writeRandomFile(file, size: 64 << 10)
        let dir = work.path + "/received"
        let (server, port) = try await startTLSTransferServer(
            backend: "libuv", dir: dir, certificates: certificates, extra: ["--tls-client-ca", certificates.path("ca.pem")])
        defer { server.killIfRunning() }
        let common = ["send", file, "--host", "localhost", "--port", String(port), "--reconnect-timeout", "1", "--tls", "--tls-ca", certificates.path("ca.pem")]

        let anonymous = try Subprocess(try Products.path("transfer-client"), common, name: "transfer-client(no client certificate)")
        #expect(await anonymous.wait(timeout: .seconds(60)) == .exit(1), "\(anonymous.report)\n\(server.report)")
        // TLS 1.3: the client's handshake is done before the server checks for its
        // certificate, so the client hears the server's alert, or its close, or (still
        // writing) a reset.
        let refusals = ["the last: unavailable (certificate)", "the last: unavailable (closed)", "the last: unavailable (reset)"]
        #expect(refusals.contains { anonymous.stderr.contains($0) }, "\(anonymous.report)")
        #expect(!FileManager.default.fileExists(atPath: dir + "/signed.bin"))

        let signed = try Subprocess(
            try Products.path("transfer-client"),
            common + ["--tls-cert", certificates.path("client.pem"), "--tls-key", certificates.path("client.key")],
            name: "transfer-client(client certificate)")
        #expect(await signed.wait(timeout: .seconds(60)) == .exit(0), "\(signed.report)\n\(server.report)")
        #expect(try await transferDigest(dir + "/signed.bin") == (try await transferDigest(file)), "the stored copy differs")
        await expectCleanStop(server)
    }
}

/// Starts `transfer-server` with TLS on a free port and returns it with the port it printed.
func startTLSTransferServer(
    backend: String, dir: String, certificates: TestCertificates, extra: [String] = []
) async throws -> (server: Subprocess, port: Int) {
    let server = try Subprocess(
        try Products.path("transfer-server"),
        ["--dir", dir, "--backend", backend, "--host", "127.0.0.1", "--port", "0",
         "--tls-cert", certificates.path("server.pem"), "--tls-key", certificates.path("server.key")] + extra,
        name: "transfer-server(\(backend), tls)", hardTimeout: .seconds(150))
    return (server, try await listeningPort(of: server, tool: "transfer-server", backend: "\(backend)+tls"))
}
