import Foundation
import Testing

/// `connectivity-monitor --reachability-url https://...` against a TLS site Switchyard did
/// not write (Python's http.server behind its ssl module, with the test server
/// certificate), both in a network namespace the test makes, with a default route on a
/// `wlan0-…` link so connectivity exists (the site listens on the namespace's loopback).
@Suite("connectivity-monitor --reachability-url https", .serialized, .timeLimit(.minutes(2)))
struct TLSToolsReachabilityTests {
    static let site = #"""
        import http.server, ssl, sys
        port, cert, key = int(sys.argv[1]), sys.argv[2], sys.argv[3]
        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            def do_HEAD(self):
                print("HEAD %s Host %s" % (self.path, self.headers.get("Host")), flush=True)
                self.send_response(204)
                self.send_header("Connection", "close")
                self.end_headers()
            def log_message(self, *args):
                pass
        server = http.server.HTTPServer(("127.0.0.1", port), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        server.socket = context.wrap_socket(server.socket, server_side=True)
        print("serving https", flush=True)
        server.serve_forever()
        """#

    /// Runs the site and connectivity-monitor in a new namespace; returns the monitor's
    /// output after it printed `until` (and was stopped), or nil when the machine cannot
    /// make namespaces.
    static func run(url: String, ca: String, backend: String, until: String) async throws -> (monitor: Subprocess, site: Subprocess)? {
        guard getuid() == 0, FileManager.default.isExecutableFile(atPath: "/usr/sbin/ip"), let python = Python.path else {
            print("skipping 'connectivity-monitor --reachability-url https': needs root, ip and python3 for a network namespace")
            return nil
        }
        let certificates = try TestCertificates.shared()
        let pid = getpid()
        let namespace = "syrt-ex-\(pid)"
        let link = "wlan0-\(String(pid, radix: 36))"
        let peer = "syrt\(String(pid, radix: 36))"
        defer { _ = ConnectivityMonitorReachabilityTests.ip(["netns", "del", namespace]) }
        for step in [
            ["netns", "add", namespace],
            ["-n", namespace, "link", "set", "lo", "up"],
            ["-n", namespace, "link", "add", link, "type", "veth", "peer", "name", peer],
            ["-n", namespace, "addr", "add", "10.217.1.1/24", "dev", link],
            ["-n", namespace, "link", "set", peer, "up"],
            ["-n", namespace, "link", "set", link, "up"],
            ["-n", namespace, "route", "add", "default", "via", "10.217.1.2", "dev", link],
        ] {
            try #require(ConnectivityMonitorReachabilityTests.ip(step), "`ip \(step.joined(separator: " "))` failed")
        }
        let site = try Subprocess(
            "/usr/sbin/ip",
            ["netns", "exec", namespace, python, "-u", "-c", Self.site, "8443", certificates.path("server.pem"), certificates.path("server.key")],
            name: "python https site")
        _ = try await site.waitForLine(containing: "serving https")
        // --duration is only a backstop: the test stops the monitor with SIGTERM once the
        // line came, and expects to see that stop; long enough that a slow start on a busy
        // machine cannot end the run first (10 s once did, with "stopped (done)").
        let monitor = try Subprocess(
            "/usr/sbin/ip",
            ["netns", "exec", namespace, try Products.path("connectivity-monitor"),
             "--reachability-url", url, "--reachability-ca", certificates.path(ca), "--reachability-timeout", "3",
             "--backend", backend, "--duration", "60"],
            name: "connectivity-monitor(\(backend))")
        _ = try await monitor.waitForLine(containing: until)
        await expectCleanStop(monitor)
        site.killIfRunning()
        await site.wait()
        return (monitor, site)
    }

    @Test("An https site is reachable, its certificate verified for the URL's host", arguments: socketBackends)
    func reachable(backend: String) async throws {
        guard let (monitor, site) = try await Self.run(
            url: "https://localhost:8443/generate_204", ca: "ca.pem", backend: backend, until: "reachability: reachable")
        else { return }
        #expect(monitor.stdout.contains("Z reachability: checking"), "\(monitor.report)")
        #expect(site.stdout.contains("HEAD /generate_204 Host localhost:8443"), "\(site.report)")
        #expect(monitor.stdout.hasSuffix("connectivity-monitor: stopped (SIGTERM)\n"), "\(monitor.report)")
    }

    @Test("An https site whose certificate does not verify is unreachable, saying why")
    func untrusted() async throws {
        guard let (monitor, site) = try await Self.run(
            url: "https://localhost:8443/", ca: "other-ca.pem", backend: "bsd", until: "reachability: unreachable")
        else { return }
        // "…Z reachability: unreachable (connection failed): the peer's certificate did not verify: unable to get local issuer certificate"
        #expect(monitor.stdout.contains("reachability: unreachable (connection failed): the peer's certificate did not verify: unable to get local issuer certificate"), "\(monitor.report)")
        #expect(!site.stdout.contains("HEAD "), "\(site.report)")
    }
}
