import Foundation
import Switchyard
import SwitchyardBSD
import SwitchyardConformance
import SwitchyardConformanceTLS
import SwitchyardMemory
import SwitchyardTLS
import SwitchyardUV
import Synchronization
import Testing

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

    /// A server presenting `name`.pem (default: the good localhost certificate).
    static func server(
        _ name: String = "server", clientAuthentication: TLSConfiguration.ClientAuthentication = .none,
        applicationProtocols: [String] = []
    ) -> TLSConfiguration {
        .server(
            certificateChainFile: path("\(name).pem"), privateKeyFile: path("\(name).key"),
            clientAuthentication: clientAuthentication, trustRoots: .pemFile(path("ca.pem")),
            applicationProtocols: applicationProtocols)
    }

    /// A client trusting the test CA, optionally with the test client certificate.
    static func client(withCertificate: Bool = false, applicationProtocols: [String] = [], serverName: String? = nil) -> TLSConfiguration {
        .client(
            trustRoots: .pemFile(path("ca.pem")), serverName: serverName,
            certificateChainFile: withCertificate ? path("client.pem") : nil,
            privateKeyFile: withCertificate ? path("client.key") : nil,
            applicationProtocols: applicationProtocols)
    }
}

enum Backend: String, CaseIterable, CustomStringConvertible {
    case memory, bsd, libuv
    var description: String { rawValue }

    func transport() throws -> any Transport {
        let configuration = TransportConfiguration(eventLoopCount: 1)
        switch self {
        case .memory: return try MemoryTransport(configuration: configuration)
        case .bsd: return try BSDTransport(configuration: configuration)
        case .libuv: return try UVTransport(configuration: configuration)
        }
    }
}

let loopback = Endpoint(host: "127.0.0.1", port: 0)

/// Echoes what it reads; shuts its output down at the end of stream. Runs on the loop.
final class EchoHandler: ConnectionHandler, @unchecked Sendable {
    let connection: any Connection
    init(_ connection: any Connection) { self.connection = connection }
    func connectionDidRead(_ bytes: UnsafeRawBufferPointer) { connection.write(Array(bytes), completion: nil) }
    func connectionDidReadEnd() { connection.shutdownOutput(completion: nil) }
    func connectionDidClose(error: TransportError?) {}
}

/// Serves every accepted connection with an ``EchoHandler``.
func serveEcho(_ listener: any Listener) {
    listener.acceptConnections { connection in
        connection.setHandler(EchoHandler(connection))
        connection.startReading()
    }
}

/// Collects server handshake failures.
final class FailureLog: Sendable {
    private let errors = Mutex<[TransportError]>([])
    var report: @Sendable (TransportError, Endpoint) -> Void { { error, _ in self.errors.withLock { $0.append(error) } } }

    var count: Int { errors.withLock { $0.count } }
    var all: [TransportError] { errors.withLock { $0 } }

    /// Waits (up to 5 s) for the first failure.
    func first() async throws -> TransportError? {
        for _ in 0..<500 {
            if let error = errors.withLock({ $0.first }) { return error }
            try await Task.sleep(for: .milliseconds(10))
        }
        return nil
    }
}

func testBytes(_ count: Int, seed: UInt64) -> [UInt8] {
    var state = seed &* 0x9E37_79B9_7F4A_7C15 | 1
    return (0..<count).map { _ in
        state ^= state << 13
        state ^= state >> 7
        state ^= state << 17
        return UInt8(truncatingIfNeeded: state)
    }
}

/// Runs `body` with a TLS transport over a fresh `backend`, shut down afterwards.
func withTLS<T>(
    _ backend: Backend, client: TLSConfiguration? = TestCertificates.client(), server: TLSConfiguration? = TestCertificates.server(),
    handshakeFailures: (@Sendable (TransportError, Endpoint) -> Void)? = nil,
    _ body: (TLSTransport) async throws -> T
) async throws -> T {
    let base = try backend.transport()
    let tls: TLSTransport
    do {
        tls = try TLSTransport(wrapping: base, client: client, server: server, handshakeFailures: handshakeFailures)
    } catch {
        await base.shutdownNow()
        throw error
    }
    do {
        let result = try await body(tls)
        await tls.shutdownNow()
        return result
    } catch {
        await tls.shutdownNow()
        throw error
    }
}

/// Expects `body` to throw a ``TransportError`` and returns it.
func transportError(_ body: () async throws -> Void) async -> TransportError? {
    do {
        try await body()
        return nil
    } catch let error as TransportError {
        return error
    } catch {
        Issue.record("not a TransportError: \(error)")
        return nil
    }
}
