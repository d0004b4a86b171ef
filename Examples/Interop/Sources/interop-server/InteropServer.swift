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

import ArgumentParser
import Foundation
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

    private func fail(_ message: String) -> Never {
        FileHandle.standardError.write(Data("interop-server: \(message)\n".utf8))
        Foundation.exit(1)
    }
}
