import Switchyard
import SwitchyardReachability
import SwitchyardTLS
import Synchronization
import Testing

/// `https` reachability: SiteReachability probes through a `TLSTransport` (a
/// `SecureTransport`) a Switchyard TLS listener over loopback that answers every `HEAD`
/// with `204 No Content`; the certificate is checked for the URL's host; a transport
/// that is not TLS is refused for `https`.
@Suite("SiteReachability over TLS", .serialized, .timeLimit(.minutes(2)))
struct SiteReachabilityTLSTests {
    /// A TLS site on 127.0.0.1 answering HEAD with 204; records each request head.
    final class Site: Sendable {
        let transport: TLSTransport
        let listener: any Listener
        private let requests = Mutex<[String]>([])

        init(backend: Backend) async throws {
            transport = try TLSTransport(wrapping: try backend.transport(), server: TestCertificates.server())
            listener = try await transport.listen(on: loopback, options: ListenOptions())
            listener.acceptConnections { [self] connection in
                Task {
                    let connection = AsyncConnection(connection)
                    defer { connection.close() }
                    var head: [UInt8] = []
                    while !head.ends(with: Array("\r\n\r\n".utf8)) {
                        guard let bytes = try? await connection.read() else { return }
                        head += bytes
                    }
                    self.requests.withLock { $0.append(String(decoding: head, as: UTF8.self)) }
                    try? await connection.write(Array("HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n".utf8))
                    try? await connection.shutdownOutput()
                }
            }
        }

        var port: Int { listener.localAddress.port }
        var heads: [String] { requests.withLock { $0 } }

        func stop() async { await transport.shutdownNow() }
    }

    /// The first state that is not `checking`.
    static func answer(of reachability: SiteReachability) async -> ReachabilityState? {
        for await state in reachability.updates where state != .checking { return state }
        return nil
    }

    static func reachability(url: String, transport: any Transport) throws(TransportError) -> SiteReachability {
        try SiteReachability(
            configuration: SiteReachabilityConfiguration(url: url, timeout: .seconds(5), backoff: .init(initial: .seconds(60))),
            monitor: ManualConnectivityMonitor(initial: ConnectivityPath(category: .wifi)), transport: transport)
    }

    @Test("An https URL is reachable through a TLS transport, its HEAD encrypted", arguments: Backend.allCases)
    func reachable(backend: Backend) async throws {
        let site = try await Site(backend: backend)
        let client = try TLSTransport(wrapping: try backend.transport(), client: TestCertificates.client())
        // A host name (SNI and the certificate's DNS name) and an IP literal (its IP address).
        for host in backend == .memory ? ["127.0.0.1"] : ["localhost", "127.0.0.1"] {
            let reachability = try Self.reachability(url: "https://\(host):\(site.port)/generate_204", transport: client)
            reachability.start()
            let state = await Self.answer(of: reachability)
            await reachability.stop()
            guard case .reachable = state else {
                Issue.record("https://\(host): expected reachable, got \(String(describing: state))")
                continue
            }
        }
        #expect(site.heads.count == (backend == .memory ? 1 : 2))
        #expect(site.heads.allSatisfy { $0.hasPrefix("HEAD /generate_204 HTTP/1.1\r\n") && $0.contains("\r\nHost: ") }, "\(site.heads)")
        await client.shutdownNow()
        await site.stop()
    }

    @Test("A certificate that does not verify makes an https site unreachable, saying why")
    func untrusted() async throws {
        let site = try await Site(backend: .bsd)
        // Trusts another CA: the site's chain does not lead to it.
        let client = try TLSTransport(
            wrapping: try Backend.bsd.transport(), client: .client(trustRoots: .pemFile(TestCertificates.path("other-ca.pem"))))
        let reachability = try Self.reachability(url: "https://localhost:\(site.port)/", transport: client)
        reachability.start()
        let state = await Self.answer(of: reachability)
        await reachability.stop()
        guard case .unreachable(let failure) = state else {
            Issue.record("expected unreachable, got \(String(describing: state))")
            return
        }
        #expect(failure.reason == .connectionFailed)
        #expect(failure.error?.reason == .certificate, "\(failure)")
        #expect(failure.message.contains("did not verify"), "\(failure.message)")
        #expect(site.heads.isEmpty)
        await client.shutdownNow()
        await site.stop()
    }

    @Test("An https URL over a transport that is not TLS is refused when the checker is made")
    func plaintextTransportRefused() async throws {
        let plain = try Backend.bsd.transport()
        do {
            _ = try Self.reachability(url: "https://localhost:8443/", transport: plain)
            Issue.record("accepted https over \(plain.name)")
        } catch {
            #expect(error.code == .invalidArgument && error.reason == .invalidOption)
            #expect(error.message.contains("needs a TLS transport") && error.message.contains("'bsd' would send plaintext"), "\(error.message)")
        }
        // http stays fine over either.
        _ = try Self.reachability(url: "http://localhost:8080/", transport: plain)
        let tls = try TLSTransport(wrapping: plain, client: TestCertificates.client())
        _ = try Self.reachability(url: "http://localhost:8080/", transport: tls)
        await tls.shutdownNow()
    }

    @Test("https URLs default to port 443 and keep their scheme")
    func httpsURL() throws {
        let url = try ReachabilityURL(parsing: "HTTPS://Example.com/generate_204")
        #expect(url.scheme == "https" && url.isSecure)
        #expect(url.port == 443 && url.host == "Example.com" && url.authority == "Example.com")
        #expect(url.description == "https://Example.com/generate_204")
        let withPort = try ReachabilityURL(parsing: "https://[::1]:8443")
        #expect(withPort.port == 8443 && withPort.host == "::1" && withPort.target == "/")
        #expect(try ReachabilityURL(parsing: "http://example.com/").scheme == "http")
    }
}

extension Array where Element == UInt8 {
    func ends(with suffix: [UInt8]) -> Bool { count >= suffix.count && Array(self[(count - suffix.count)...]) == suffix }
}
