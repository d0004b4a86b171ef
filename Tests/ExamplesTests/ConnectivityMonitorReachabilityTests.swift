import Foundation
import Testing

/// `connectivity-monitor --reachability-url` against Python's http.server, both in a
/// network namespace the test makes, with a default route on a `wlan0-…` link so
/// connectivity exists (the server listens on the namespace's loopback).
@Suite("connectivity-monitor --reachability-url", .serialized, .timeLimit(.minutes(2)))
struct ConnectivityMonitorReachabilityTests {
    static func ip(_ arguments: [String]) -> Bool {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/sbin/ip")
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        do { try process.run() } catch { return false }
        process.waitUntilExit()
        return process.terminationStatus == 0
    }

    @Test("It prints checking, then reachable with a latency, each with a timestamp", arguments: socketBackends)
    func reachable(backend: String) async throws {
        guard getuid() == 0, FileManager.default.isExecutableFile(atPath: "/usr/sbin/ip"), let python = Python.path else {
            print("skipping 'connectivity-monitor --reachability-url': needs root, ip and python3 for a network namespace")
            return
        }
        let pid = getpid()
        let namespace = "syre-ex-\(pid)"
        let link = "wlan0-\(String(pid, radix: 36))"
        let peer = "syrx\(String(pid, radix: 36))"
        defer { _ = Self.ip(["netns", "del", namespace]) }
        for step in [
            ["netns", "add", namespace],
            ["-n", namespace, "link", "set", "lo", "up"],
            ["-n", namespace, "link", "add", link, "type", "veth", "peer", "name", peer],
            ["-n", namespace, "addr", "add", "10.216.1.1/24", "dev", link],
            ["-n", namespace, "link", "set", peer, "up"],
            ["-n", namespace, "link", "set", link, "up"],
            ["-n", namespace, "route", "add", "default", "via", "10.216.1.2", "dev", link],
        ] {
            try #require(Self.ip(step), "`ip \(step.joined(separator: " "))` failed")
        }
        let port = 8000
        let server = try Subprocess(
            "/usr/sbin/ip", ["netns", "exec", namespace, python, "-u", "-m", "http.server", String(port), "--bind", "127.0.0.1"],
            name: "python http.server")
        defer { server.killIfRunning() }
        // Its "Serving HTTP on ..." line comes once it listens.
        _ = try await server.waitForLine(containing: "Serving HTTP")

        let monitor = try Subprocess(
            "/usr/sbin/ip",
            ["netns", "exec", namespace, try Products.path("connectivity-monitor"),
             "--reachability-url", "http://127.0.0.1:\(port)/", "--reachability-timeout", "3", "--backend", backend,
             "--duration", "10"],
            name: "connectivity-monitor(\(backend))")
        defer { monitor.killIfRunning() }
        let line = try await monitor.waitForLine(containing: "reachability: reachable")
        await expectCleanStop(monitor)

        let lines = monitor.stdout.split(separator: "\n").map(String.init)
        // "connectivity-monitor: current wifi (wlan0-…)", then the path's addresses, if shown.
        #expect(lines.first?.hasPrefix("connectivity-monitor: current wifi (\(link))") == true, "\(monitor.report)")
        #expect(lines.contains { $0.hasSuffix("Z reachability: checking") }, "\(monitor.report)")
        // "2025-06-01T12:00:03.530Z reachability: reachable (15.902 ms)"
        let parts = line.split(separator: " ")
        #expect(parts.count == 5 && parts[0].count == "2025-06-01T12:00:03.530Z".count && parts[0].hasSuffix("Z"), "\(line)")
        #expect(line.hasSuffix(" ms)"), "\(line)")
        #expect(lines.last == "connectivity-monitor: stopped (SIGTERM)", "\(monitor.report)")
    }

    /// https is followed over TLS (TLSToolsReachabilityTests); a URL of another scheme,
    /// and --reachability-ca without an https URL, are bad input.
    @Test("A URL that is not http or https, and --reachability-ca for http, are refused with a clear message")
    func refusesOtherSchemes() async throws {
        for (arguments, mention) in [
            (["--reachability-url", "ftp://example.com/"], "use http://host[:port]/path or https://"),
            (["--reachability-url", "http://example.com/", "--reachability-ca", "/etc/hostname"], "--reachability-ca needs an https"),
        ] {
            let monitor = try Subprocess(try Products.path("connectivity-monitor"), arguments)
            defer { monitor.killIfRunning() }
            let ending = await monitor.wait(timeout: .seconds(20))
            #expect(ending == .exit(64), "\(monitor.report)")
            #expect(monitor.stderr.contains(mention), "\(monitor.report)")
        }
    }
}
