import Foundation
import Glibc
import SwitchyardConformance
import SwitchyardConformanceTLS
import Synchronization
import Testing

/// echo-server and echo-client over TLS, as their users run them, against peers
/// Switchyard did not write: `socat` with its OpenSSL listener (echoing through `cat`) and
/// `openssl s_client` (driven line by line by Python), and against each other on every
/// pair of socket backends. Certificates come from `scripts/make-test-certs`, made into a
/// temporary folder once per test process.
@Suite("echo tools over TLS", .serialized, .timeLimit(.minutes(3)))
struct TLSToolsTests {
    /// socat terminates TLS and echoes through `cat`; echo-client checks every byte of
    /// small messages on several connections and of messages far above the socket and
    /// TLS record sizes.
    @Test("echo-client --tls checks every byte echoed by socat's OpenSSL listener", arguments: socketBackends)
    func clientAgainstSocat(backend: String) async throws {
        let certificates = try TestCertificates.shared()
        let port = try closedPort()
        let socat = try Subprocess(
            try TLSPeers.tool("socat"),
            ["OPENSSL-LISTEN:\(port),bind=127.0.0.1,reuseaddr,fork,verify=0,cert=\(certificates.path("server.pem")),key=\(certificates.path("server.key"))",
             "EXEC:cat"],
            name: "socat")
        defer { socat.killIfRunning() }
        try await waitUntilListening(port: port, process: socat)

        for (count, size, concurrency) in [(200, 1000, 4), (4, 1 << 20, 2)] {
            let client = try Subprocess(
                try Products.path("echo-client"),
                ["--backend", backend, "--port", String(port), "--tls", "--tls-ca", certificates.path("ca.pem"),
                 "--count", String(count), "--size", String(size), "--concurrency", String(concurrency)],
                name: "echo-client(\(backend), tls)")
            let ending = await client.wait()
            #expect(ending == .exit(0), "\(count) x \(size) B x \(concurrency)\n\(client.report)\n\(socat.report)")
            expectSummary(client.stdout, messages: count * concurrency, bytes: count * concurrency * size, backend: backend + "+tls")
        }
    }

    /// `openssl s_client` verifies echo-server's chain against the test CA (and the name
    /// localhost), sends lines and reads each one back; then it ends its input, sends
    /// close_notify and must exit 0. Raw and framed echo servers run the same handshake;
    /// the lines are raw bytes, so the raw mode is the one s_client can talk to.
    @Test("openssl s_client verifies echo-server --tls-cert and gets its lines back", arguments: socketBackends)
    func sClientAgainstServer(backend: String) async throws {
        let certificates = try TestCertificates.shared()
        let (server, port) = try await startTLSEchoServer(backend: backend, certificates: certificates)
        defer { server.killIfRunning() }

        let peer = try TLSPeers.sClient(port: port, ca: certificates.path("ca.pem"), lines: 200)
        defer { peer.killIfRunning() }
        let ending = await peer.wait(timeout: .seconds(60))
        #expect(ending == .exit(0), "s_client's run failed\n\(peer.report)\n\(server.report)")
        #expect(peer.stdout.contains("200 lines echoed"), "\(peer.report)")
        // The chain was verified (depth 0 is the server's certificate, depth 1 the CA).
        #expect(peer.stdout.contains("depth=0 CN = localhost") && peer.stdout.contains("verify return:1"), "\(peer.report)")
        #expect(!peer.stdout.contains("verify error"), "\(peer.report)")

        await expectCleanStop(server)
    }

    /// The same s_client with a CA that did not sign the server's certificate: it must
    /// refuse the handshake (so the test above does verify), and the server reports the
    /// failed handshake and goes on.
    @Test("openssl s_client with another CA refuses echo-server's certificate")
    func sClientRefusesUntrustedServer() async throws {
        let certificates = try TestCertificates.shared()
        let (server, port) = try await startTLSEchoServer(backend: "bsd", certificates: certificates)
        defer { server.killIfRunning() }

        let peer = try TLSPeers.sClient(port: port, ca: certificates.path("other-ca.pem"), lines: 1)
        defer { peer.killIfRunning() }
        let ending = await peer.wait(timeout: .seconds(60))
        #expect(ending == .exit(1), "\(peer.report)")
        #expect(peer.stdout.contains("unable to get local issuer certificate") || peer.stdout.contains("verify error"), "\(peer.report)")
        _ = try await server.waitForStandardError(containing: "echo-server: TLS handshake with 127.0.0.1:")
        #expect(server.isRunning, "\(server.report)")
        await expectCleanStop(server)
    }

    /// Mutual TLS: with --tls-client-ca, s_client gets in with the test client
    /// certificate and is turned away without one.
    @Test("echo-server --tls-client-ca lets in s_client with a client certificate only")
    func sClientMutualTLS() async throws {
        let certificates = try TestCertificates.shared()
        let (server, port) = try await startTLSEchoServer(
            backend: "libuv", certificates: certificates, extra: ["--tls-client-ca", certificates.path("ca.pem")])
        defer { server.killIfRunning() }

        let admitted = try TLSPeers.sClient(
            port: port, ca: certificates.path("ca.pem"), lines: 20,
            extra: ["-cert", certificates.path("client.pem"), "-key", certificates.path("client.key")])
        defer { admitted.killIfRunning() }
        #expect(await admitted.wait(timeout: .seconds(60)) == .exit(0), "\(admitted.report)\n\(server.report)")
        #expect(admitted.stdout.contains("20 lines echoed"), "\(admitted.report)")

        let refused = try TLSPeers.sClient(port: port, ca: certificates.path("ca.pem"), lines: 1)
        defer { refused.killIfRunning() }
        #expect(await refused.wait(timeout: .seconds(60)) == .exit(1), "\(refused.report)\n\(server.report)")
        _ = try await server.waitForStandardError(containing: "certificate")
        await expectCleanStop(server)
    }

    /// Both Switchyard, every pairing of socket backends, raw and framed, with a client
    /// certificate asked for in framed mode.
    @Test("echo-client --tls against echo-server --tls-cert", arguments: socketBackends, socketBackends)
    func clientAgainstServer(serverBackend: String, clientBackend: String) async throws {
        let certificates = try TestCertificates.shared()
        let tlsClient = ["--tls", "--tls-ca", certificates.path("ca.pem"), "--host", "localhost"]
        let (raw, rawPort) = try await startTLSEchoServer(backend: serverBackend, certificates: certificates)
        defer { raw.killIfRunning() }
        for (count, size, concurrency) in [(300, 64, 4), (10, 256 * 1024, 2), (1, 8 << 20, 1)] {
            let client = try Subprocess(
                try Products.path("echo-client"),
                ["--backend", clientBackend, "--port", String(rawPort), "--count", String(count), "--size", String(size),
                 "--concurrency", String(concurrency)] + tlsClient,
                name: "echo-client(\(clientBackend), tls)")
            #expect(await client.wait() == .exit(0), "\(count) x \(size) B x \(concurrency)\n\(client.report)\n\(raw.report)")
            expectSummary(client.stdout, messages: count * concurrency, bytes: count * concurrency * size, backend: clientBackend + "+tls")
        }
        await expectCleanStop(raw)

        let (framed, framedPort) = try await startTLSEchoServer(
            backend: serverBackend, certificates: certificates,
            extra: ["--mode", "framed", "--tls-client-ca", certificates.path("ca.pem")])
        defer { framed.killIfRunning() }
        let client = try Subprocess(
            try Products.path("echo-client"),
            ["--backend", clientBackend, "--port", String(framedPort), "--mode", "framed", "--count", "100", "--size", "5000",
             "--concurrency", "3", "--tls-cert", certificates.path("client.pem"), "--tls-key", certificates.path("client.key"), "--json"]
                + tlsClient,
            name: "echo-client(\(clientBackend), tls, framed)")
        #expect(await client.wait() == .exit(0), "\(client.report)\n\(framed.report)")
        #expect(client.stdout.contains("\"ok\": true") && client.stdout.contains("\"backend\": \"\(clientBackend)\"") && client.stdout.hasSuffix("\"tls\": true}\n"), "\(client.report)")
        #expect(client.stdout.contains("\"messages\": 300,"), "\(client.report)")
        await expectCleanStop(framed)
    }

    /// TLS over a backend loaded at run time, on both ends.
    @Test("echo-server and echo-client speak TLS over a backend loaded from a library")
    func loadedBackend() async throws {
        let certificates = try TestCertificates.shared()
        let library = try Products.path(BackendLibraryTests.libraryName)
        let (server, port) = try await startTLSEchoServer(
            backend: "bsd-loaded", certificates: certificates, extra: ["--backend-library", library])
        defer { server.killIfRunning() }
        let client = try Subprocess(
            try Products.path("echo-client"),
            ["--backend-library", library, "--backend", "bsd-loaded", "--port", String(port), "--count", "50", "--size", "70000",
             "--concurrency", "2", "--tls", "--tls-ca", certificates.path("ca.pem")],
            name: "echo-client(bsd-loaded, tls)")
        #expect(await client.wait() == .exit(0), "\(client.report)\n\(server.report)")
        expectSummary(client.stdout, messages: 100, bytes: 100 * 70000, backend: "bsd-loaded+tls")
        await expectCleanStop(server)
    }

    /// SIGTERM with a TLS peer that keeps its connection open: the grace period ends, the
    /// server closes the connection with close_notify, so s_client reads a clean end of
    /// stream (exit 0, no "unexpected eof") while it still has input to send.
    @Test("A graceful shutdown ends open TLS connections with close_notify", arguments: socketBackends)
    func shutdownSendsCloseNotify(backend: String) async throws {
        let certificates = try TestCertificates.shared()
        let (server, port) = try await startTLSEchoServer(
            backend: backend, certificates: certificates, extra: ["--grace-period", "0.5"])
        defer { server.killIfRunning() }
        let command = [try TLSPeers.tool("openssl"), "s_client", "-connect", "127.0.0.1:\(port)", "-CAfile", certificates.path("ca.pem"),
                       "-verify_return_error", "-quiet"]
        let peer = try Python.start(TLSPeers.idleDriver, command, name: "openssl s_client (idle)")
        defer { peer.killIfRunning() }
        _ = try await peer.waitForLine(containing: "echoed")
        let ending = await server.stop(with: SIGTERM)
        #expect(server.stdout.contains("echo-server: SIGTERM, shutting down") && server.stdout.contains("echo-server: stopped"), "\(server.report)")
        #expect(ending == .exit(0), "\(server.report)")
        #expect(await peer.wait(timeout: .seconds(30)) == .exit(0), "\(peer.report)")
        #expect(peer.stdout.contains("end of stream with close_notify"), "\(peer.report)")
    }

    /// A name the certificate does not hold fails the connect with the verify result.
    @Test("echo-client --tls-server-name with a wrong name fails with the certificate error")
    func wrongServerName() async throws {
        let certificates = try TestCertificates.shared()
        let (server, port) = try await startTLSEchoServer(backend: "bsd", certificates: certificates)
        defer { server.killIfRunning() }
        let client = try Subprocess(
            try Products.path("echo-client"),
            ["--port", String(port), "--tls", "--tls-ca", certificates.path("ca.pem"), "--tls-server-name", "wrong.example", "--count", "1"],
            name: "echo-client(tls, wrong name)")
        #expect(await client.wait() == .exit(1), "\(client.report)")
        #expect(client.stderr.contains("connect to 127.0.0.1:\(port) failed: unavailable (certificate)"), "\(client.report)")
        #expect(client.stderr.contains("hostname mismatch"), "\(client.report)")
        #expect(!client.stdout.contains("messages "), "\(client.report)")
        await expectCleanStop(server)
    }

    /// A plaintext client's bytes are not a TLS handshake: the server says so on standard
    /// error and closes that connection, the client fails with a hint, and the server
    /// still serves TLS clients.
    @Test("A plaintext echo-client against echo-server --tls-cert fails clearly", arguments: ["raw", "framed"])
    func plaintextClient(mode: String) async throws {
        let certificates = try TestCertificates.shared()
        let (server, port) = try await startTLSEchoServer(backend: "bsd", certificates: certificates, extra: ["--mode", mode])
        defer { server.killIfRunning() }
        let plain = try Subprocess(
            try Products.path("echo-client"), ["--port", String(port), "--count", "3", "--mode", mode], name: "echo-client(plaintext)")
        #expect(await plain.wait() == .exit(1), "\(plain.report)\n\(server.report)")
        #expect(plain.stderr.contains("if it speaks TLS, add --tls"), "\(plain.report)")
        let line = try await server.waitForStandardError(containing: "echo-server: TLS handshake with 127.0.0.1:")
        #expect(line.contains("protocol violation") && line.contains("not valid TLS records"), "\(server.report)")

        let tls = try Subprocess(
            try Products.path("echo-client"),
            ["--port", String(port), "--count", "3", "--mode", mode, "--tls", "--tls-ca", certificates.path("ca.pem")],
            name: "echo-client(tls)")
        #expect(await tls.wait() == .exit(0), "\(tls.report)\n\(server.report)")
        await expectCleanStop(server)
    }

    /// Bad TLS arguments end each tool with the usual bad-input exit (64) and a message
    /// naming the option and the file.
    @Test("Missing or bad PEM files and lone TLS options are bad input", arguments: [
        ("echo-server", ["--tls-cert", "MISSING", "--tls-key", "KEY"], ["--tls-cert", "MISSING", "No such file"]),
        ("echo-server", ["--tls-cert", "GARBAGE", "--tls-key", "KEY"], ["GARBAGE", "certificate chain"]),
        ("echo-server", ["--tls-cert", "CERT", "--tls-key", "OTHERKEY"], ["OTHERKEY"]),
        ("echo-server", ["--tls-cert", "CERT"], ["--tls-cert needs --tls-key"]),
        ("echo-server", ["--tls-client-ca", "CA"], ["--tls-client-ca needs --tls-cert"]),
        ("echo-client", ["--tls", "--tls-ca", "MISSING"], ["--tls-ca", "MISSING", "No such file"]),
        ("echo-client", ["--tls", "--tls-ca", "KEY"], ["KEY", "CA bundle"]),
        ("echo-client", ["--tls-ca", "CA"], ["--tls-ca needs --tls"]),
        ("echo-client", ["--tls", "--tls-cert", "CERT"], ["--tls-cert needs --tls-key"]),
        ("echo-client", ["--tls", "--tls-server-name", ""], ["--tls-server-name"]),
    ])
    func badArguments(tool: String, arguments: [String], mentions: [String]) async throws {
        let certificates = try TestCertificates.shared()
        let work = try TemporaryFolder()
        let names = try work.fixtures().merging([
            "CERT": certificates.path("server.pem"), "KEY": certificates.path("server.key"),
            "OTHERKEY": certificates.path("client.key"), "CA": certificates.path("ca.pem"),
        ]) { $1 }
        let process = try Subprocess(try Products.path(tool), arguments.map { names[$0] ?? $0 } + ["--port", "1"])
        defer { process.killIfRunning() }
        #expect(await process.wait(timeout: .seconds(30)) == .exit(64), "\(process.report)")
        for word in mentions {
            #expect(process.stderr.contains(names[word] ?? word), "the message should mention '\(word)'\n\(process.report)")
        }
    }
}

/// Starts `echo-server` with TLS (the test server certificate) on a free port.
func startTLSEchoServer(backend: String, certificates: TestCertificates, extra: [String] = []) async throws -> (server: Subprocess, port: Int) {
    let server = try Subprocess(
        try Products.path("echo-server"),
        ["--backend", backend, "--host", "127.0.0.1", "--port", "0",
         "--tls-cert", certificates.path("server.pem"), "--tls-key", certificates.path("server.key")] + extra,
        name: "echo-server(\(backend), tls)")
    return (server, try await listeningPort(of: server, tool: "echo-server", backend: "\(backend)+tls"))
}

/// Waits until something accepts TCP connects on 127.0.0.1:`port` (a peer that has no
/// ready line, such as socat).
func waitUntilListening(port: Int, process: Subprocess, timeout: Duration = .seconds(20)) async throws {
    let until = ContinuousClock.now + timeout
    while true {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw SubprocessFailure("socket: \(errno)") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = in_addr_t(UInt32(0x7f00_0001).bigEndian)
        address.sin_port = UInt16(port).bigEndian
        let connected = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
        close(fd)
        if connected { return }
        guard process.isRunning else { throw SubprocessFailure("\(process.name) exited before listening on \(port)\n\(process.report)") }
        guard ContinuousClock.now < until else { throw SubprocessFailure("nothing listened on \(port) within \(timeout)\n\(process.report)") }
        try await Task.sleep(for: .milliseconds(20))
    }
}

/// The test certificates of `scripts/make-test-certs`, made once per test process, as
/// the kit's TLS pairs make theirs.
final class TestCertificates: Sendable {
    let directory: String

    private init() throws {
        do {
            directory = try ConformanceTLS.makeTestCertificates()
        } catch {
            throw SubprocessFailure(error.description)
        }
    }

    private static let made = Mutex<Result<TestCertificates, SubprocessFailure>?>(nil)

    static func shared() throws -> TestCertificates {
        try made.withLock { made in
            if made == nil {
                do {
                    made = .success(try TestCertificates())
                    // The keys go when the test process ends.
                    atexit { try? TestCertificates.shared().remove() }
                } catch {
                    made = .failure(error as? SubprocessFailure ?? SubprocessFailure("\(error)"))
                }
            }
            return try made!.get()
        }
    }

    func path(_ name: String) -> String { directory + "/" + name }

    private func remove() {
        ConformanceTLS.removeTestCertificates(directory)
    }
}

/// TLS peers Switchyard did not write.
enum TLSPeers {
    /// The path of a tool on PATH.
    static func tool(_ name: String) throws -> String {
        let paths = (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":")
        guard let path = paths.map({ "\($0)/\(name)" }).first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            throw SubprocessFailure("\(name) is not on PATH (scripts/ensure-deps installs it); these tests need a TLS peer Switchyard did not write")
        }
        return path
    }

    /// `openssl s_client` to 127.0.0.1:`port`, verifying the chain against `ca` and the
    /// name localhost (-verify_return_error: a failed verification ends the handshake),
    /// driven by Python: it sends `lines` lines of random letters, one at a time, and
    /// reads each back; then it closes s_client's input (s_client sends close_notify) and
    /// expects s_client to exit 0. Prints s_client's standard error (the verify lines),
    /// then "N lines echoed"; exits 1 on any difference or a failed s_client.
    static func sClient(port: Int, ca: String, lines: Int, extra: [String] = []) throws -> Subprocess {
        let command = [try tool("openssl"), "s_client", "-connect", "127.0.0.1:\(port)", "-CAfile", ca,
                       "-verify_return_error", "-verify_hostname", "localhost", "-quiet", "-no_ign_eof"] + extra
        return try Python.start(sClientDriver, [String(lines)] + command, name: "openssl s_client")
    }

    /// Runs s_client (argv), sends one line, reads it back ("echoed"), then keeps its
    /// input open and waits for the server to end the stream; s_client must exit 0 with
    /// no error (it reports a TCP end without close_notify as "unexpected eof").
    static let idleDriver = #"""
        import subprocess, sys, threading
        p = subprocess.Popen(sys.argv[1:], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        errors = []
        reader = threading.Thread(target=lambda: errors.append(p.stderr.read()), daemon=True)
        reader.start()
        p.stdin.write(b"hello\n"); p.stdin.flush()
        if p.stdout.readline() != b"hello\n":
            print("no echo"); sys.exit(1)
        print("echoed", flush=True)
        rest = p.stdout.read()
        status = p.wait(timeout=30)
        reader.join(timeout=10)
        text = b"".join(errors).decode(errors="replace")
        sys.stdout.write(text)
        print("s_client exit %d" % status)
        if status == 0 and not rest and "unexpected eof" not in text and "error" not in text.lower():
            print("end of stream with close_notify")
            sys.exit(0)
        sys.exit(1)
        """#

    static let sClientDriver = #"""
        import random, string, subprocess, sys, threading
        count = int(sys.argv[1])
        p = subprocess.Popen(sys.argv[2:], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        errors = []
        reader = threading.Thread(target=lambda: errors.append(p.stderr.read()), daemon=True)
        reader.start()
        ok = True
        for i in range(count):
            line = ("%d " % i + "".join(random.choice(string.ascii_letters) for _ in range(random.randint(1, 3000))) + "\n").encode()
            try:
                p.stdin.write(line)
                p.stdin.flush()
            except BrokenPipeError:
                print("s_client's input closed at line %d" % i); ok = False; break
            got = p.stdout.readline()
            if got != line:
                print("line %d: sent %d bytes, got %r" % (i, len(line), got[:80])); ok = False; break
        try:
            p.stdin.close()
        except BrokenPipeError:
            pass
        status = p.wait(timeout=30)
        rest = p.stdout.read()
        reader.join(timeout=10)
        if rest:
            print("after the last line s_client printed %r" % rest[:200]); ok = False
        sys.stdout.write(b"".join(errors).decode(errors="replace") if errors else "")
        print("s_client exit %d" % status)
        if ok and status == 0:
            print("%d lines echoed" % count)
            sys.exit(0)
        sys.exit(1)
        """#
}

extension Subprocess {
    /// The first line of standard error that contains `marker`, once it arrives.
    /// - Throws: if `timeout` passes first.
    func waitForStandardError(containing marker: String, timeout: Duration = .seconds(20)) async throws -> String {
        let until = ContinuousClock.now + timeout
        while true {
            let lines = stderr.split(separator: "\n", omittingEmptySubsequences: false).dropLast()
            if let line = lines.first(where: { $0.contains(marker) }) { return String(line) }
            guard ContinuousClock.now < until else {
                throw SubprocessFailure("\(name) printed no line with '\(marker)' on standard error within \(timeout)\n\(report)")
            }
            try await Task.sleep(for: .milliseconds(10))
        }
    }
}
