import GRPCCore
package import InteropTesting
package import Switchyard
import SwitchyardGRPC

// The switchyard transport of the GRPCCore tools: SwitchyardGRPC's
// `SwitchyardServerTransport` and `SwitchyardClientTransport` over a transport of
// Switchyard's registry (TLS, when the tools asked for it, is Switchyard's TLSTransport
// around it: InteropTransport.make).

extension InteropGRPCTransportKind {
    /// Whether this build has the transport: both are.
    package var isAvailable: Bool { true }
}

extension InteropGRPCServer {
    /// The server on SwitchyardGRPC's `SwitchyardServerTransport`, listening on
    /// `host`:`port` over `transport` (which the caller keeps alive, and shuts down after
    /// the server has stopped).
    package static func switchyard(host: String, port: Int, transport: any Transport) throws(InteropFailure) -> InteropGRPCServer {
        let serverTransport = SwitchyardServerTransport.switchyard(
            address: Endpoint(host: host, port: port), transport: transport)
        return InteropGRPCServer(transport: serverTransport) { transport in
            try await transport.listeningAddress.port
        }
    }
}

extension InteropTestCase {
    /// Runs the case on SwitchyardGRPC's `SwitchyardClientTransport` to `host`:`port`
    /// over `transport` (which the caller shuts down afterwards).
    package func runSwitchyard(host: String, port: Int, transport: any Transport) async throws(InteropFailure) {
        let clientTransport = SwitchyardClientTransport.switchyard(
            target: Endpoint(host: host, port: port), transport: transport)
        try await run(transport: clientTransport)
    }
}
