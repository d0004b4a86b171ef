import Foundation
import Subprocess
import Switchyard
import SwitchyardBSD
import SwitchyardConformance
import SwitchyardConformanceTLS
import SwitchyardTLS
import Testing

@testable import SwitchyardHTTP2

/// HTTP/2 over SwitchyardTLS with ALPN `h2`: Switchyard's server against h2load (which
/// negotiates h2 by ALPN and refuses a server that does not) and against Switchyard's
/// own client.
@Suite(.serialized, .timeLimit(.minutes(2)))
struct H2TLSTests {
    /// Throwaway certificates, made as the kit's TLS pairs make theirs
    /// (`ConformanceTLS.makeTestCertificates()`: scripts/make-test-certs into a temporary
    /// directory, no key committed); removed when the test process ends.
    static let certificates: String = {
        do {
            let directory = try ConformanceTLS.makeTestCertificates()
            atexit { ConformanceTLS.removeTestCertificates(H2TLSTests.certificates) }
            return directory
        } catch {
            preconditionFailure("the test certificates could not be made: \(error)")
        }
    }()

    static func transport() throws -> TLSTransport {
        try TLSTransport(
            wrapping: BSDTransport(configuration: .init(eventLoopCount: 1)),
            client: .client(trustRoots: .pemFile(certificates + "/ca.pem"), applicationProtocols: ["h2"]),
            server: .server(
                certificateChainFile: certificates + "/server.pem", privateKeyFile: certificates + "/server.key",
                applicationProtocols: ["h2"]))
    }

    @Test("h2load over TLS: ALPN settles on h2 and 1,000 requests are echoed")
    func h2loadOverTLS() async throws {
        let server = try await H2EchoServer(transport: Self.transport())
        defer { server.close() }
        let body = try H2PeerTests.bodyFile((0..<512).map { UInt8(truncatingIfNeeded: $0) })
        defer { try? FileManager.default.removeItem(at: body) }
        let result = try await run(
            .name("h2load"), arguments: ["-n", "1000", "-c", "1", "-m", "16", "-d", body.path, "https://127.0.0.1:\(server.port)/echo"],
            output: .string(limit: 1 << 20), error: .string(limit: 1 << 16))
        let report = result.standardOutput
        #expect(report.contains("Application protocol: h2"), "h2load said:\n\(report)")
        #expect(report.contains("requests: 1000 total, 1000 started, 1000 done, 1000 succeeded, 0 failed, 0 errored"), "h2load said:\n\(report)")
    }

    @Test("Switchyard's client and server over TLS: a 1 MiB body echoed on a stream")
    func switchyardOverTLS() async throws {
        let transport = try Self.transport()
        let server = try await H2EchoServer(transport: transport)
        defer { server.close() }
        let client = try await H2TestClient(transport: transport, port: server.port, host: "localhost")
        defer { client.close() }
        let body = (0..<(1 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        #expect(try await client.request(body: body) == body)
    }
}
