import Foundation
package import Switchyard
import SwitchyardBackends
package import SwitchyardTLS

/// The transports the interop tools run on: a backend from Switchyard's registry
/// (`--backend`, else `SWITCHYARD_BACKEND`, else `bsd`), with TLS over it made from the
/// files of scripts/make-test-certs, as gRPC's interop programs use them.
package enum InteropTransport {
    /// The environment variable that names the certificates' folder (as for the grpcio peer).
    package static let certificatesVariable = "SWITCHYARD_INTEROP_CERTS"

    /// gRPC runs over HTTP/2, which TLS negotiates by ALPN: gRPC's C core refuses a TLS
    /// connection on which `h2` was not agreed.
    package static let applicationProtocols = ["h2"]

    /// The certificates' folder: `explicit` (`--certs_dir`), else `SWITCHYARD_INTEROP_CERTS`.
    /// - Throws: ``InteropFailure`` naming both when neither is set.
    package static func certificatesDirectory(explicit: String?) throws(InteropFailure) -> String {
        if let explicit, !explicit.isEmpty { return explicit }
        if let value = ProcessInfo.processInfo.environment[certificatesVariable], !value.isEmpty { return value }
        throw InteropFailure(
            "TLS needs the certificates: pass --certs_dir DIR or set \(certificatesVariable) (scripts/make-test-certs DIR makes them)")
    }

    /// The server's TLS: `server1.pem` and `server1.key` of `directory`, ALPN `h2`.
    package static func serverTLS(directory: String) -> TLSConfiguration {
        .server(
            certificateChainFile: "\(directory)/server1.pem", privateKeyFile: "\(directory)/server1.key",
            applicationProtocols: applicationProtocols)
    }

    /// The client's TLS: the server is checked against `ca.pem` of `directory`
    /// (`--use_test_ca`) or the system's trust store, under `serverName`
    /// (`--server_host_override`, else the host connected to), ALPN `h2`.
    package static func clientTLS(directory: String?, serverName: String?) -> TLSConfiguration {
        .client(
            trustRoots: directory.map { .pemFile("\($0)/ca.pem") } ?? .system, serverName: serverName,
            applicationProtocols: applicationProtocols)
    }

    /// Checks that the backend `explicit` (else `SWITCHYARD_BACKEND`, else `bsd`) is
    /// registered, after loading `libraries`.
    /// - Throws: the registry's error, saying where the name came from.
    package static func checkBackend(_ explicit: String?, libraries: [String]) throws(TransportError) {
        try Backends.checkSelection(explicit: explicit, libraries: libraries)
    }

    /// The selected backend's name.
    package static func backendName(_ explicit: String?) -> String { Backends.selectedName(explicit: explicit) }

    /// A transport of the selected backend, with TLS over it when `client` or `server` is
    /// given. `handshakeFailures` hears of every server handshake that failed.
    package static func make(
        backend explicit: String?, client: TLSConfiguration? = nil, server: TLSConfiguration? = nil,
        configuration: TransportConfiguration = TransportConfiguration(),
        handshakeFailures: (@Sendable (TransportError, Endpoint) -> Void)? = nil
    ) async throws(TransportError) -> any Transport {
        let base: any Transport
        do {
            base = try Backends.makeTransport(named: explicit, configuration: configuration)
        } catch let error as TransportError {
            throw error
        } catch {
            throw TransportError(code: .unknown, reason: .ioError, message: "\(error)")
        }
        guard client != nil || server != nil else { return base }
        do {
            return try TLSTransport(wrapping: base, client: client, server: server, handshakeFailures: handshakeFailures)
        } catch {
            await base.shutdownNow()
            throw error
        }
    }
}
