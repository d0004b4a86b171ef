package import GRPCCore
import GRPCNIOTransportHTTP2Posix
package import InteropTesting

/// The GRPCCore transport the tools run on under `--grpc-swift`
/// (`--grpc-swift-transport`).
package enum InteropGRPCTransportKind: String, CaseIterable, Sendable {
    /// SwitchyardGRPC's `SwitchyardServerTransport` and `SwitchyardClientTransport`, over
    /// a backend of Switchyard's registry (`--backend`), with Switchyard's TLS.
    case switchyard
    /// grpc-swift-nio-transport's `HTTP2ServerTransport.Posix` and
    /// `HTTP2ClientTransport.Posix`, with its own TLS (NIOSSL): the reference peer.
    case nio
}

/// The TLS files of the interop tests (scripts/make-test-certs), as the GRPCCore tools use them.
package struct InteropGRPCTLS: Sendable {
    /// The certificates' folder.
    package var directory: String
    /// A client's name for the server (`--server_host_override`): checked in the server's
    /// certificate, sent as SNI and as `:authority`.
    package var serverName: String?
    /// A client trusts `ca.pem` of ``directory`` (`--use_test_ca`), else the system's roots.
    package var useTestCA: Bool

    package init(directory: String, serverName: String? = nil, useTestCA: Bool = false) {
        self.directory = directory
        self.serverName = serverName
        self.useTestCA = useTestCA
    }

    package var certificateChain: String { "\(directory)/server1.pem" }
    package var privateKey: String { "\(directory)/server1.key" }
    package var trustRoots: String { "\(directory)/ca.pem" }
}

/// A GRPCCore server of the interop test service on one transport, as the server tool
/// runs it: ``serve()`` until ``beginGracefulShutdown()``, ``port()`` once it listens.
package struct InteropGRPCServer: Sendable {
    private let serveBody: @Sendable () async throws -> Void
    private let shutdownBody: @Sendable () -> Void
    private let portBody: @Sendable () async throws -> Int

    /// A server of ``GRPCCoreTestService`` on `transport`; `port` reads the port it listens on.
    package init<Transport: ServerTransport>(
        transport: Transport, port: @escaping @Sendable (Transport) async throws -> Int
    ) {
        let server = GRPCServer(transport: transport, services: [GRPCCoreTestService()])
        serveBody = { try await server.serve() }
        shutdownBody = { server.beginGracefulShutdown() }
        portBody = { try await port(transport) }
    }

    /// Runs the server until it has shut down.
    package func serve() async throws { try await serveBody() }

    /// Stops accepting calls; ``serve()`` returns once the open calls have ended.
    package func beginGracefulShutdown() { shutdownBody() }

    /// The port the server listens on, once it does.
    package func port() async throws -> Int { try await portBody() }

    /// The server on grpc-swift-nio-transport's `HTTP2ServerTransport.Posix`, listening on
    /// `host`:`port`, TLS with server1.pem and server1.key when `tls` is given.
    package static func nio(host: String, port: Int, tls: InteropGRPCTLS?) -> InteropGRPCServer {
        let security: HTTP2ServerTransport.Posix.TransportSecurity =
            if let tls {
                .tls(
                    certificateChain: [.file(path: tls.certificateChain, format: .pem)],
                    privateKey: .file(path: tls.privateKey, format: .pem))
            } else {
                .plaintext
            }
        let address: GRPCNIOTransportCore.SocketAddress =
            host.contains(":") ? .ipv6(host: host, port: port) : .ipv4(host: host, port: port)
        let transport = HTTP2ServerTransport.Posix(address: address, transportSecurity: security)
        return InteropGRPCServer(transport: transport) { transport in
            let address = try await transport.listeningAddress
            if let ipv4 = address.ipv4 { return ipv4.port }
            if let ipv6 = address.ipv6 { return ipv6.port }
            throw InteropFailure("the server listens on \(address), which has no port")
        }
    }
}

extension InteropTestCase {
    /// Runs the case with a `GRPCClient` on `transport`, which it runs for the case's
    /// calls and shuts down after them. `decided`, if given, gets the case's outcome as
    /// soon as its calls have ended, before that shutdown.
    /// - Throws: ``InteropFailure`` saying what differed, or that the client failed.
    package func run(
        transport: some ClientTransport, decided: (@Sendable (InteropFailure?) -> Void)? = nil
    ) async throws(InteropFailure) {
        do {
            try await withGRPCClient(transport: transport) { client in
                do throws(InteropFailure) {
                    try await run(on: client)
                } catch {
                    decided?(error)
                    throw error
                }
                decided?(nil)
            }
        } catch let failure as InteropFailure {
            throw failure
        } catch {
            throw InteropFailure("the client failed: \(error)")
        }
    }

    /// Runs the case on grpc-swift-nio-transport's `HTTP2ClientTransport.Posix` to
    /// `host`:`port`, TLS when `tls` is given: the server's certificate is checked against
    /// ca.pem (`useTestCA`) or the system's roots, under `serverName` (also the SNI and
    /// the `:authority`), else `host`.
    package func runNIO(
        host: String, port: Int, tls: InteropGRPCTLS?, decided: (@Sendable (InteropFailure?) -> Void)? = nil
    ) async throws(InteropFailure) {
        var config = HTTP2ClientTransport.Posix.Config.defaults
        let security: HTTP2ClientTransport.Posix.TransportSecurity
        if let tls {
            security = .tls { configuration in
                if tls.useTestCA {
                    configuration.trustRoots = .certificates([.file(path: tls.trustRoots, format: .pem)])
                }
            }
            if let name = tls.serverName { config.http2.authority = name }
        } else {
            security = .plaintext
        }
        let transport: HTTP2ClientTransport.Posix
        do {
            transport = try HTTP2ClientTransport.Posix(
                target: .dns(host: host, port: port), transportSecurity: security, config: config)
        } catch {
            throw InteropFailure("cannot make the NIO client transport: \(error)")
        }
        try await run(transport: transport, decided: decided)
    }
}
