import Switchyard
import Testing

@Suite("Endpoint")
struct EndpointTests {
    @Test("IP literals and names are told apart", arguments: [
        ("127.0.0.1", "IPv4"), ("0.0.0.0", "IPv4"), ("::1", "IPv6"), ("::", "IPv6"),
        ("fe80::1%eth0", "IPv6"), ("::ffff:10.0.0.1", "IPv6"), ("2001:db8::8:800:200c:417a", "IPv6"),
        ("localhost", "name"), ("example.com", "name"), ("1.2.3", "name"), ("256.1.1.1", "name"),
    ])
    func hostKind(host: String, kind: String) {
        #expect(Endpoint(host: host, port: 1).hostKind.description == kind)
    }

    @Test("Parsing accepts host:port and [v6]:port")
    func parsing() throws {
        #expect(try Endpoint(parsing: "127.0.0.1:80") == Endpoint(host: "127.0.0.1", port: 80))
        #expect(try Endpoint(parsing: "[::1]:8080") == Endpoint(host: "::1", port: 8080))
        #expect(try Endpoint(parsing: "localhost:0").port == 0)
        #expect(Endpoint(host: "[::1]", port: 1).host == "::1")
        #expect(Endpoint(host: "::1", port: 443).description == "[::1]:443")
        // A host named unix is written in brackets: unix:80 is a path (found by the endpoint fuzzer).
        #expect(try Endpoint(parsing: "[unix]:80") == Endpoint(host: "unix", port: 80))
        #expect(Endpoint(host: "unix", port: 80).description == "[unix]:80")
        #expect(try Endpoint(parsing: Endpoint(host: "unix", port: 80).description) == Endpoint(host: "unix", port: 80))
    }

    @Test("Malformed endpoints fail with invalidArgument", arguments: [
        "127.0.0.1", "127.0.0.1:", "host:65536", "host:-1", "::1:80", "[::1:80", "[::1]80", ":80", "bad host:1", "a..b:1",
        // A sign or a space in the port (found by the endpoint fuzzer: Int(_:) takes a sign).
        "host:+80", "host:-0", "[::1]:+1", "host: 80",
    ])
    func malformed(text: String) {
        #expect {
            try Endpoint(parsing: text)
        } throws: { error in
            let error = error as? TransportError
            return error?.code == .invalidArgument && error?.reason == .invalidAddress
        }
    }

    @Test("IPv6 parsing and formatting round-trip")
    func ipv6RoundTrip() throws {
        let cases = [
            ("::1", "::1"), ("0:0:0:0:0:0:0:1", "::1"), ("2001:DB8:0:0:8:800:200C:417A", "2001:db8::8:800:200c:417a"),
            ("::", "::"), ("1::", "1::"), ("::ffff:1.2.3.4", "::ffff:1.2.3.4"), ("1:0:0:1:0:0:0:1", "1:0:0:1::1"),
        ]
        for (input, formatted) in cases {
            let parsed = try #require(IPAddress.parseIPv6(input))
            #expect(parsed.bytes.count == 16)
            #expect(IPAddress.formatIPv6(parsed.bytes) == formatted)
        }
        // "+1" and "-0": UInt16(_:radix:) takes a sign (found by the endpoint fuzzer).
        for bad in ["1:2:3:4:5:6:7:8:9", "1::2::3", "12345::", ":::", "1:2", "g::1", "::1%", "::+1", "-0::1", "1:2:3:4:5:6:7:+8"] {
            #expect(IPAddress.parseIPv6(bad) == nil, "\(bad) should not parse")
        }
        #expect(IPAddress.parseIPv6("fe80::1%eth0")?.zone == "eth0")
    }

    @Test("IPv4 parsing rejects leading zeros and out-of-range parts")
    func ipv4() {
        #expect(IPAddress.parseIPv4("10.0.0.255") == [10, 0, 0, 255])
        for bad in ["01.0.0.1", "1.2.3.256", "1.2.3", "1.2.3.4.5", "", "a.b.c.d", "1..2.3"] {
            #expect(IPAddress.parseIPv4(bad) == nil, "\(bad) should not parse")
        }
    }

    @Test("A path endpoint parses from unix:PATH, prints as it parses, and keeps host and port empty")
    func pathEndpoint() throws {
        let endpoint = try Endpoint(parsing: "unix:/run/app.sock")
        #expect(endpoint == Endpoint(unixPath: "/run/app.sock"))
        #expect(endpoint.path == "/run/app.sock")
        #expect(endpoint.host == "" && endpoint.port == 0)
        #expect(endpoint.hostKind == .path)
        #expect(endpoint.description == "unix:/run/app.sock")
        #expect(try Endpoint(parsing: endpoint.description) == endpoint)
        #expect(try Endpoint(parsing: "unix:@switchyard").path == "@switchyard")
        #expect(try Endpoint(parsing: "unix:relative.sock").path == "relative.sock")
        #expect(Endpoint(host: "127.0.0.1", port: 80).path == nil)
        #expect(Endpoint(unixPath: "/a") != Endpoint(unixPath: "/b"))
        let longest = "/" + String(repeating: "x", count: Endpoint.maximumPathLength - 1)
        #expect(try Endpoint(parsing: "unix:" + longest).path == longest)
    }

    @Test("An empty, NUL-holding or too long path fails with invalidArgument naming it", arguments: [
        "unix:", "unix:@", "unix:/a\u{0}b", "unix:/" + String(repeating: "x", count: Endpoint.maximumPathLength),
    ])
    func badPath(text: String) {
        #expect {
            try Endpoint(parsing: text)
        } throws: { error in
            guard let error = error as? TransportError else { return false }
            return error.code == .invalidArgument && error.reason == .invalidAddress && error.message.contains(text)
        }
    }
}

@Suite("Backend registry")
struct BackendRegistryTests {
    final class NoTransport: Transport {
        var name: String { "x" }
        func connect(to endpoint: Endpoint, options: ConnectOptions) async throws -> any Connection { throw TransportError.transportShutdown() }
        func listen(on endpoint: Endpoint, options: ListenOptions) async throws -> any Listener { throw TransportError.transportShutdown() }
        func shutdown(gracePeriod: Duration) async {}
        func shutdownNow() async {}
    }

    @Test("An unknown name fails with a message that lists the registered backends")
    func unknownName() {
        let registry = BackendRegistry()
        registry.register(TransportBackend(name: "beta", summary: "", usesSockets: true) { _ in NoTransport() })
        registry.register(TransportBackend(name: "alpha", summary: "", usesSockets: true) { _ in NoTransport() })
        #expect(registry.names == ["alpha", "beta"])
        do {
            _ = try registry.makeTransport(named: "gamma")
            Issue.record("expected an error")
        } catch let error as TransportError {
            #expect(error.code == .invalidArgument)
            #expect(error.reason == .unknownBackend)
            #expect(error.message.contains("alpha, beta"))
            #expect(error.message.contains("gamma"))
        } catch {
            Issue.record("unexpected \(error)")
        }
    }

    @Test("The explicit name wins over SWITCHYARD_BACKEND, which wins over the default")
    func selection() {
        let env = [BackendRegistry.environmentVariable: "memory"]
        #expect(BackendRegistry.selectName(explicit: "bsd", environment: env, default: "d") == "bsd")
        #expect(BackendRegistry.selectName(explicit: nil, environment: env, default: "d") == "memory")
        #expect(BackendRegistry.selectName(explicit: "", environment: [:], default: "d") == "d")
        #expect(BackendRegistry.selectName(explicit: nil, environment: [BackendRegistry.environmentVariable: ""], default: "d") == "d")
    }

    @Test("A backend listens on 127.0.0.1, port 0, unless it names its own local endpoint")
    func localEndpoint() {
        // The initializer of before localEndpoint, trailing closure included, still compiles.
        let tcp = TransportBackend(name: "t", summary: "", usesSockets: true) { _ in NoTransport() }
        #expect(tcp.localEndpoint() == Endpoint(host: "127.0.0.1", port: 0))
        #expect(tcp.network == "tcp")
        let unix = TransportBackend(
            name: "u", summary: "", usesSockets: true, network: "unix",
            localEndpoint: { Endpoint(unixPath: "/tmp/u.sock") }, make: { _ in NoTransport() })
        #expect(unix.localEndpoint().path == "/tmp/u.sock")
    }
}

@Suite("TransportError")
struct TransportErrorTests {
    @Test("Codes and reasons compare by value and print plainly")
    func values() {
        let error = TransportError(code: .unavailable, reason: .refused, message: "no one there",
                                   native: .init(domain: .errno, code: 111, name: "ECONNREFUSED"))
        #expect(error.description == "unavailable (refused): no one there [errno ECONNREFUSED (111)]")
        #expect(TransportError.Reason("refused") == .refused)
        #expect(TransportError.Code.unavailable != .cancelled)
    }
}
