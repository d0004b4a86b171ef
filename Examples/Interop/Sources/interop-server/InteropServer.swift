// interop-server: gRPC's interop test server (`grpc.testing.TestService`) on Switchyard's
// calls, on any backend of the registry, plaintext or TLS.
//
//     interop-server --port P [--use_tls] [--bind_host H] [--certs_dir DIR]
//                    [--backend NAME] [--backend-library PATH ...]
//
// The arguments are those of gRPC's `doc/interop-test-descriptions.md` (`--use_tls=true`
// is taken too). What it serves is InteropTesting's `TestService`. With `--use_tls` it
// presents server1.pem and server1.key of the certificates' folder (--certs_dir, else
// $SWITCHYARD_INTEROP_CERTS; scripts/make-test-certs makes them), with ALPN h2.
//
// Once it accepts calls it prints `interop-server (BACKEND, plaintext|tls) listening on
// port N` (`--port 0` takes a free port); the first SIGTERM or SIGINT stops it gracefully
// (open calls get a second to finish), a second one at once.
//
// `--grpc-swift` serves the same service on grpc-swift 2's GRPCCore instead (its generated
// stubs, InteropGRPCCore's `GRPCCoreTestService`), on the transport
// `--grpc-swift-transport` names: `switchyard` (SwitchyardGRPC's, on the backend
// `--backend` names; the default) or `nio` (grpc-swift-nio-transport's HTTP/2 Posix
// transport and its TLS). Its line reads `interop-server (grpc-swift TRANSPORT[ BACKEND],
// plaintext|tls) listening on port N`.

import ArgumentParser
import Foundation
import InteropGRPCCore
import InteropTesting
import Logging
import ServiceLifecycle
import Switchyard
import SwitchyardCalls
import SwitchyardServiceLifecycle
import SwitchyardTLS

@main
struct InteropServer: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "interop-server",
        abstract: "gRPC's interop test server (grpc.testing.TestService) on a Switchyard backend.",
        discussion: """
            Prints 'interop-server (BACKEND, plaintext|tls) listening on port N' once it \
            accepts calls, and runs until SIGTERM or SIGINT.
            """)

    @Option(name: .customLong("port"), parsing: .unconditional, help: "The port to listen on; 0 takes a free one.")
    var port: Int

    @Option(name: .customLong("bind_host"), help: "The address to listen on.")
    var bindHost = "127.0.0.1"

    @Flag(name: .customLong("use_tls"), help: "Serve TLS with server1.pem and server1.key of the certificates' folder (ALPN h2).")
    var useTLS = false

    @Option(name: .customLong("certs_dir"), help: ArgumentHelp("The certificates' folder (default: $\(InteropTransport.certificatesVariable)).", valueName: "dir"))
    var certsDir: String?

    @Option(help: "The backend (default: $SWITCHYARD_BACKEND, else 'bsd').")
    var backend: String?

    @Option(name: .customLong("backend-library"), help: ArgumentHelp("A backend library to load; its backend can then be chosen with --backend. Repeatable.", valueName: "path"))
    var backendLibraries: [String] = []

    @Flag(name: .customLong("grpc-swift"), help: "Serve on grpc-swift 2's GRPCCore (its generated stubs) instead of Switchyard's calls.")
    var grpcSwift = false

    @Option(name: .customLong("grpc-swift-transport"), help: "With --grpc-swift: the transport, 'switchyard' (SwitchyardGRPC's, on --backend) or 'nio' (grpc-swift-nio-transport's HTTP/2 Posix).")
    var grpcSwiftTransport: InteropGRPCTransportKind = .switchyard

    /// The descriptions' `--use_tls=true` form, rewritten before parsing.
    static func main() async {
        await main(GRPCFlags.normalize(Array(CommandLine.arguments.dropFirst()), flags: ["use_tls"]))
    }

    func validate() throws {
        do {
            try Endpoint.validate(port: port)
            try Endpoint.validate(host: bindHost)
            try InteropTransport.checkBackend(backend, libraries: backendLibraries)
        } catch {
            throw ValidationError(error.message)
        }
        if grpcSwift, !grpcSwiftTransport.isAvailable {
            throw ValidationError("--grpc-swift-transport \(grpcSwiftTransport.rawValue) is not in this build (SwitchyardGRPC is not a dependency yet)")
        }
        if useTLS {
            let tls = try tlsConfiguration()
            if let problem = TLSConfiguration.problem(
                withFiles: [("server1.pem", tls?.certificateChainFile), ("server1.key", tls?.privateKeyFile)], loading: tls)
            {
                throw ValidationError(problem)
            }
        }
    }

    private func tlsConfiguration() throws -> TLSConfiguration? {
        guard useTLS else { return nil }
        do {
            return InteropTransport.serverTLS(directory: try InteropTransport.certificatesDirectory(explicit: certsDir))
        } catch {
            throw ValidationError("\(error)")
        }
    }

    func run() async throws {
        if grpcSwift { return try await runGRPCSwift() }
        let transport: any Transport
        do {
            transport = try await InteropTransport.make(
                backend: backend, server: try tlsConfiguration(),
                handshakeFailures: { error, peer in
                    FileHandle.standardError.write(Data("interop-server: TLS handshake with \(peer) failed: \(error)\n".utf8))
                })
        } catch {
            fail("cannot start backend '\(InteropTransport.backendName(backend))': \(error)")
        }
        let service = TestService()
        let server: CallServer
        do {
            server = try await CallServer.start(transport: transport, on: Endpoint(host: bindHost, port: port)) { call in
                try await service.serve(call)
            }
        } catch {
            await transport.shutdownNow()
            fail("cannot listen on \(bindHost):\(port): \(error)")
        }
        let ready = "interop-server (\(InteropTransport.backendName(backend)), \(useTLS ? "tls" : "plaintext")) listening on port \(server.localAddress.port)"
        let signals = ShutdownSignals(
            onReady: {
                print(ready)
                fflush(nil)
            },
            onSignal: { signal, forced in
                print("interop-server: \(ShutdownSignals.name(of: signal))\(forced ? " again, stopping at once" : ", shutting down")")
                fflush(nil)
            })
        let group = ServiceGroup(
            configuration: signals.configuration(
                running: [server], logger: Logger(label: "interop-server"), maximumGracefulShutdownDuration: .seconds(1)))
        var status: Int32 = 0
        do {
            try await group.run()
        } catch let forced as ForcedShutdown {
            status = forced.exitStatus
        } catch {
            await transport.shutdownNow()
            fail("\(error)")
        }
        await transport.shutdownNow()
        if status != 0 { throw ExitCode(status) }
    }

    /// Serves `GRPCCoreTestService` on GRPCCore, on the transport --grpc-swift-transport names.
    private func runGRPCSwift() async throws {
        let server: InteropGRPCServer
        var transport: (any Transport)?
        let label: String
        switch grpcSwiftTransport {
        case .nio:
            let tls = try useTLS ? InteropGRPCTLS(directory: certificatesDirectory()) : nil
            server = .nio(host: bindHost, port: port, tls: tls)
            label = "grpc-swift nio"
        case .switchyard:
            let base: any Transport
            do {
                base = try await InteropTransport.make(
                    backend: backend, server: try tlsConfiguration(),
                    handshakeFailures: { error, peer in
                        FileHandle.standardError.write(Data("interop-server: TLS handshake with \(peer) failed: \(error)\n".utf8))
                    })
            } catch {
                fail("cannot start backend '\(InteropTransport.backendName(backend))': \(error)")
            }
            transport = base
            do {
                server = try InteropGRPCServer.switchyard(host: bindHost, port: port, transport: base)
            } catch {
                await base.shutdownNow()
                fail("\(error)")
            }
            label = "grpc-swift switchyard \(InteropTransport.backendName(backend))"
        }
        let ready = "interop-server (\(label), \(useTLS ? "tls" : "plaintext")) listening on port"
        let signals = ShutdownSignals(onSignal: { signal, forced in
            print("interop-server: \(ShutdownSignals.name(of: signal))\(forced ? " again, stopping at once" : ", shutting down")")
            fflush(nil)
        })
        let service = GRPCServerService(server: server) { port in
            print("\(ready) \(port)")
            fflush(nil)
        }
        let group = ServiceGroup(
            configuration: signals.configuration(
                running: [service], logger: Logger(label: "interop-server"), maximumGracefulShutdownDuration: .seconds(1)))
        var status: Int32 = 0
        do {
            try await group.run()
        } catch let forced as ForcedShutdown {
            status = forced.exitStatus
        } catch {
            await transport?.shutdownNow()
            fail("\(error)")
        }
        await transport?.shutdownNow()
        if status != 0 { throw ExitCode(status) }
    }

    private func certificatesDirectory() throws -> String {
        do {
            return try InteropTransport.certificatesDirectory(explicit: certsDir)
        } catch {
            throw ValidationError("\(error)")
        }
    }

    private func fail(_ message: String) -> Never {
        FileHandle.standardError.write(Data("interop-server: \(message)\n".utf8))
        Foundation.exit(1)
    }
}

extension InteropGRPCTransportKind: ExpressibleByArgument {}

/// A GRPCCore server as a service of the tool's group: it serves until the group's
/// graceful shutdown, and calls `ready` with the port once it listens.
struct GRPCServerService: Service {
    let server: InteropGRPCServer
    let ready: @Sendable (Int) -> Void

    func run() async throws {
        try await withGracefulShutdownHandler {
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await server.serve() }
                ready(try await server.port())
                try await group.waitForAll()
            }
        } onGracefulShutdown: {
            server.beginGracefulShutdown()
        }
    }
}
