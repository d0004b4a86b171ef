import Switchyard
import SwitchyardBackendKit
import SwitchyardBackends
import Testing

/// Bad input at every backend's `connect(to:)`, `listen(on:)` and configuration, the
/// backend loaded from a library included: each is a thrown `invalidArgument` naming the
/// value, at once, never a trap and never a name lookup.
@Suite("Bad input at the backends", .timeLimit(.minutes(1)))
struct BackendsBadInputTests {
    static let shipped = ["bsd", "libuv", "memory", "simulation"]

    static func transport(_ name: String, stallTimeout: Duration? = nil) throws -> any Transport {
        let configuration = TransportConfiguration(eventLoopCount: 1, stallTimeout: stallTimeout)
        if name == "bsd-loaded" { return try Fixtures.bsdLoaded.get().make(configuration) }
        return try Backends.registry.makeTransport(named: name, configuration: configuration)
    }

    /// An endpoint whose port a program set out of range after making it (`port` is a `var`).
    static func endpoint(_ host: String, port: Int) -> Endpoint {
        var endpoint = Endpoint(host: host, port: 1)
        endpoint.port = port
        return endpoint
    }

    /// Expects `operation` to throw `invalidArgument`/`invalid address` naming every word.
    static func expectRefused(
        _ words: [String], _ what: String, sourceLocation: SourceLocation = #_sourceLocation,
        _ operation: () async throws -> Void
    ) async {
        do {
            try await operation()
            Issue.record("\(what) succeeded", sourceLocation: sourceLocation)
        } catch let error as TransportError {
            #expect(error.code == .invalidArgument && error.reason == .invalidAddress, "\(what): \(error)", sourceLocation: sourceLocation)
            for word in words {
                #expect(error.message.contains(word), "\(what): '\(error.message)' should mention '\(word)'", sourceLocation: sourceLocation)
            }
        } catch {
            Issue.record("\(what): \(error) is not a TransportError", sourceLocation: sourceLocation)
        }
    }

    @Test("A port set out of range is refused at connect and listen, naming it", arguments: shipped + ["bsd-loaded"])
    func portOutOfRange(backend: String) async throws {
        let transport = try Self.transport(backend)
        for port in [70000, -1] {
            let endpoint = Self.endpoint("127.0.0.1", port: port)
            await Self.expectRefused(["invalid port \"\(port)\""], "\(backend) connect to port \(port)") {
                _ = try await transport.connect(to: endpoint)
            }
            await Self.expectRefused(["invalid port \"\(port)\""], "\(backend) listen on port \(port)") {
                _ = try await transport.listen(on: endpoint)
            }
        }
        await transport.shutdownNow()
    }

    @Test("A malformed literal is refused as one, never sent to the resolver", arguments: shipped)
    func malformedLiteral(backend: String) async throws {
        let transport = try Self.transport(backend)
        let clock = ContinuousClock()
        for (host, words) in [
            ("1.2.3.256", ["invalid IPv4 literal \"1.2.3.256\"", "over 255"]),
            ("fe80::1%", ["invalid IPv6 literal \"fe80::1%\"", "zone"]),
            ("bad host", ["invalid host name \"bad host\""]),
        ] {
            let started = clock.now
            await Self.expectRefused(words, "\(backend) connect to \(host)") {
                _ = try await transport.connect(to: Endpoint(host: host, port: 80))
            }
            #expect(clock.now - started < .milliseconds(100), "\(backend): \(host) should be refused at once")
        }
        await transport.shutdownNow()
    }

    @Test("An IPv6 zone that names no interface is refused naming it", arguments: ["bsd", "libuv"])
    func unknownZone(backend: String) async throws {
        let transport = try Self.transport(backend)
        await Self.expectRefused(["invalid IPv6 zone \"nosuchif0\""], "\(backend) connect") {
            _ = try await transport.connect(to: Endpoint(host: "fe80::1%nosuchif0", port: 80))
        }
        await transport.shutdownNow()
    }

    @Test("A stall timeout over the bound is an invalid option naming it", arguments: ["bsd", "libuv"])
    func stallTimeoutTooLong(backend: String) throws {
        let error = #expect(throws: TransportError.self) {
            _ = try Self.transport(backend, stallTimeout: .seconds(30 * 86_400))
        }
        #expect(error?.code == .invalidArgument && error?.reason == .invalidOption, "\(String(describing: error))")
        #expect(error?.message.contains("invalid stall timeout 2592000.0 seconds") == true, "\(String(describing: error))")
    }

    @Test("A connect timeout of centuries means no timeout: the connect works, nothing overflows", arguments: shipped)
    func hugeConnectTimeout(backend: String) async throws {
        let transport = try Self.transport(backend)
        let listener = try await transport.listen(on: Backends.registry.backend(named: backend).localEndpoint())
        let connection = try await transport.connect(to: listener.localAddress, options: ConnectOptions(timeout: .seconds(Int64.max)))
        connection.close()
        listener.close()
        await transport.shutdownNow()
    }
}

extension BackendsBadInputTests {
    @Test("Settings out of range are refused when the transport is made, naming the setting and value", arguments: shipped + ["bsd-loaded"])
    func configurationOutOfRange(backend: String) throws {
        let make: (TransportConfiguration) throws -> any Transport = { configuration in
            if backend == "bsd-loaded" { return try Fixtures.bsdLoaded.get().make(configuration) }
            return try Backends.registry.makeTransport(named: backend, configuration: configuration)
        }
        for (configuration, words) in [
            (TransportConfiguration(eventLoopCount: 0), ["invalid event loop count 0", "1...1024"]),
            (TransportConfiguration(eventLoopCount: -3), ["invalid event loop count -3"]),
            (TransportConfiguration(eventLoopCount: 1_000_000), ["invalid event loop count 1000000"]),
            (TransportConfiguration(eventLoopCount: 1, reservedDescriptors: -1), ["invalid reservedDescriptors -1"]),
            (TransportConfiguration(eventLoopCount: 1, stallTimeout: .seconds(-2)), ["invalid stall timeout -2.0 seconds"]),
        ] {
            do {
                let transport = try make(configuration)
                Issue.record("\(backend) was made with \(configuration)")
                Task { await transport.shutdownNow() }
            } catch let error as TransportError {
                #expect(error.code == .invalidArgument && error.reason == .invalidOption, "\(backend): \(error)")
                for word in words {
                    #expect(error.message.contains(word), "\(backend): '\(error.message)' should mention '\(word)'")
                }
            }
        }
    }
}
