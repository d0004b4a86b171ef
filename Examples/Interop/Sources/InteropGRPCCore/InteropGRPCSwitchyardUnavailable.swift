package import Switchyard
package import InteropTesting

// The switchyard transport of the GRPCCore tools while this package does not depend on
// SwitchyardGRPC: it says so. InteropGRPCSwitchyard.swift replaces this file (with the
// SwitchyardGRPC dependency in Package.swift) once SwitchyardGRPC is in Switchyard.

extension InteropGRPCTransportKind {
    /// Whether this build has the transport (SwitchyardGRPC's is not in this build).
    package var isAvailable: Bool { self != .switchyard }
}

extension InteropGRPCServer {
    /// The server on SwitchyardGRPC's `SwitchyardServerTransport` over `transport`.
    /// - Throws: ``InteropFailure``: this build has no SwitchyardGRPC.
    package static func switchyard(host: String, port: Int, transport: any Transport) throws(InteropFailure) -> InteropGRPCServer {
        throw InteropFailure(InteropGRPCTransportKind.unavailableMessage)
    }
}

extension InteropTestCase {
    /// Runs the case on SwitchyardGRPC's `SwitchyardClientTransport` over `transport`.
    /// - Throws: ``InteropFailure``: this build has no SwitchyardGRPC.
    package func runSwitchyard(host: String, port: Int, transport: any Transport) async throws(InteropFailure) {
        throw InteropFailure(InteropGRPCTransportKind.unavailableMessage)
    }
}

extension InteropGRPCTransportKind {
    static let unavailableMessage =
        "--grpc-swift-transport switchyard needs SwitchyardGRPC, which this build does not have (use --grpc-swift-transport nio)"
}
