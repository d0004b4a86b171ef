import Foundation
import GRPCCore
import Switchyard
import SwitchyardBSD
import SwitchyardConformance
import SwitchyardConformanceTLS
import SwitchyardGRPC
import SwitchyardMemory
import SwitchyardTLS
import SwitchyardUV
import Testing

enum Backend: String, CaseIterable, CustomStringConvertible {
    case bsd, libuv, memory
    var description: String { rawValue }

    func transport(stallTimeout: Duration? = nil) throws -> any Transport {
        let configuration = TransportConfiguration(eventLoopCount: 2, stallTimeout: stallTimeout)
        switch self {
        case .memory: return try MemoryTransport(configuration: configuration)
        case .bsd: return try BSDTransport(configuration: configuration)
        case .libuv: return try UVTransport(configuration: configuration)
        }
    }
}

/// Throwaway certificates, made once per test process by `scripts/make-test-certs` into
/// a temporary directory (no key is committed), as the kit's TLS pairs make theirs.
enum TestCertificates {
    static let directory: String = {
        do {
            let directory = try ConformanceTLS.makeTestCertificates()
            // The keys go when the test process ends.
            atexit { ConformanceTLS.removeTestCertificates(TestCertificates.directory) }
            return directory
        } catch {
            preconditionFailure("the test certificates could not be made: \(error)")
        }
    }()

    static func path(_ name: String) -> String { directory + "/" + name }

    static func server() -> TLSConfiguration {
        .server(certificateChainFile: path("server.pem"), privateKeyFile: path("server.key"), trustRoots: .pemFile(path("ca.pem")))
    }

    static func client() -> TLSConfiguration {
        .client(trustRoots: .pemFile(path("ca.pem")))
    }
}

/// A GRPCServer with the echo service on `serverTransport` (listening on 127.0.0.1, a port
/// the system picks, or on `address`), and a GRPCClient to it over `clientTransport`;
/// runs `body`, then shuts both down and the transports with them.
func withEcho<Result: Sendable>(
    server serverTransport: any Transport, client clientTransport: any Transport,
    address: Endpoint = Endpoint(host: "127.0.0.1", port: 0), monitor: (any ConnectivityMonitor)? = nil,
    clientConfig: SwitchyardClientTransport.Config = .defaults, serverConfig: SwitchyardServerTransport.Config = .defaults,
    _ body: (GRPCClient<SwitchyardClientTransport>, Probe, SwitchyardServerTransport) async throws -> Result
) async throws -> Result {
    let probe = Probe()
    let transport = SwitchyardServerTransport(address: address, transport: serverTransport, config: serverConfig)
    let server = GRPCServer(transport: transport, services: [EchoService(probe: probe)])
    let result: Result = try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask { try await server.serve() }
        let bound = try await transport.listeningAddress
        let target = Endpoint(host: address.host, port: bound.port)
        let result = try await withGRPCClient(
            transport: .switchyard(target: target, transport: clientTransport, monitor: monitor, config: clientConfig)
        ) { client in
            try await body(client, probe, transport)
        }
        probe.release()
        server.beginGracefulShutdown()
        try await group.waitForAll()
        return result
    }
    await clientTransport.shutdownNow()
    await serverTransport.shutdownNow()
    return result
}

extension GRPCClient {
    /// `Get` with `message` and `metadata`: the reply, the response's metadata and trailers.
    func get(_ message: [UInt8], metadata: Metadata = [:], options: CallOptions = .defaults) async throws -> ClientResponse<[UInt8]> {
        try await unary(
            request: ClientRequest(message: message, metadata: metadata), descriptor: EchoService.get, serializer: BytesCoder(),
            deserializer: BytesCoder(), options: options
        ) { $0 }
    }
}

func bytes(_ count: Int, seed: UInt8 = 1) -> [UInt8] {
    (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ Int(seed)) }
}
