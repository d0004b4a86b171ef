// interop-client: runs one of gRPC's interop test cases against a server of
// `grpc.testing.TestService` (interop-server, grpcio's, any gRPC server's) with
// Switchyard's calls, on any backend of the registry, plaintext or TLS.
//
//     interop-client --server_host H --server_port P --test_case NAME
//                    [--use_tls [--use_test_ca] [--server_host_override NAME]]
//                    [--certs_dir DIR] [--backend NAME] [--backend-library PATH ...]
//
// The arguments are those of gRPC's `doc/interop-test-descriptions.md` (`--use_tls=true`
// is taken too); the cases are InteropTesting's `InteropTestCase`. With `--use_tls` the
// server's certificate is checked against ca.pem of the certificates' folder
// (`--use_test_ca`; --certs_dir, else $SWITCHYARD_INTEROP_CERTS) or the system's trust
// store, under the name `--server_host_override` (also sent as SNI), else the host; ALPN
// offers h2.
//
// Prints `PASS NAME` and exits 0, or `FAIL NAME: what differed` and exits 1.
//
// `--grpc-swift` runs the case on grpc-swift 2's GRPCCore instead (its generated stubs,
// InteropGRPCCore's cases), on the transport `--grpc-swift-transport` names:
// `switchyard` (SwitchyardGRPC's, on the backend `--backend` names, with Switchyard's TLS;
// the default) or `nio` (grpc-swift-nio-transport's HTTP/2 Posix transport and its TLS;
// `--server_host_override` is then also the `:authority`).

import ArgumentParser
import Foundation
import Glibc
import InteropGRPCCore
import InteropTesting
import Switchyard
import SwitchyardCalls
import SwitchyardTLS
import Synchronization

extension InteropTestCase: ExpressibleByArgument {}
extension InteropGRPCTransportKind: ExpressibleByArgument {}

@main
struct InteropClientCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "interop-client",
        abstract: "Runs one of gRPC's interop test cases with Switchyard's calls.",
        discussion: "Prints 'PASS NAME' and exits 0, or 'FAIL NAME: what differed' and exits 1.")

    @Option(name: .customLong("server_host"), help: "The server's host.")
    var serverHost = "localhost"

    @Option(name: .customLong("server_port"), parsing: .unconditional, help: "The server's port.")
    var serverPort: Int

    @Option(name: .customLong("test_case"), help: "The test case.")
    var testCase: InteropTestCase

    @Flag(name: .customLong("use_tls"), help: "Connect with TLS (ALPN h2).")
    var useTLS = false

    @Flag(name: .customLong("use_test_ca"), help: "With --use_tls: trust ca.pem of the certificates' folder instead of the system's trust store.")
    var useTestCA = false

    @Option(name: .customLong("server_host_override"), help: "With --use_tls: the name checked in the server's certificate and sent as SNI (default: --server_host). Without TLS it has no effect: the calls API has no way to set :authority.")
    var serverHostOverride: String?

    @Option(name: .customLong("certs_dir"), help: ArgumentHelp("The certificates' folder (default: $\(InteropTransport.certificatesVariable)).", valueName: "dir"))
    var certsDir: String?

    @Option(help: "The backend (default: $SWITCHYARD_BACKEND, else 'bsd').")
    var backend: String?

    @Option(name: .customLong("backend-library"), help: ArgumentHelp("A backend library to load; its backend can then be chosen with --backend. Repeatable.", valueName: "path"))
    var backendLibraries: [String] = []

    @Flag(name: .customLong("grpc-swift"), help: "Run the case on grpc-swift 2's GRPCCore (its generated stubs) instead of Switchyard's calls.")
    var grpcSwift = false

    @Option(name: .customLong("grpc-swift-transport"), help: "With --grpc-swift: the transport, 'switchyard' (SwitchyardGRPC's, on --backend) or 'nio' (grpc-swift-nio-transport's HTTP/2 Posix).")
    var grpcSwiftTransport: InteropGRPCTransportKind = .switchyard

    /// The descriptions' `--use_tls=true` form, rewritten before parsing.
    static func main() async {
        await main(GRPCFlags.normalize(Array(CommandLine.arguments.dropFirst()), flags: ["use_tls", "use_test_ca"]))
    }

    func validate() throws {
        do {
            try Endpoint.validate(port: serverPort)
            try Endpoint.validate(host: serverHost)
            try InteropTransport.checkBackend(backend, libraries: backendLibraries)
        } catch {
            throw ValidationError(error.message)
        }
        if grpcSwift, !grpcSwiftTransport.isAvailable {
            throw ValidationError("--grpc-swift-transport \(grpcSwiftTransport.rawValue) is not in this build (SwitchyardGRPC is not a dependency yet)")
        }
        if let serverHostOverride, serverHostOverride.isEmpty || serverHostOverride.utf8.count > 253 {
            throw ValidationError("--server_host_override '\(serverHostOverride)' is not a host name (1 to 253 bytes)")
        }
        if let tls = try tlsConfiguration() {
            let files: [(option: String, path: String?)] = useTestCA ? [("--use_test_ca", tlsCA)] : []
            if let problem = TLSConfiguration.problem(withFiles: files, loading: tls) { throw ValidationError(problem) }
        }
    }

    /// ca.pem's path, with --use_test_ca.
    private var tlsCA: String? { (try? InteropTransport.certificatesDirectory(explicit: certsDir)).map { "\($0)/ca.pem" } }

    private func tlsConfiguration() throws -> TLSConfiguration? {
        guard useTLS else { return nil }
        var directory: String?
        if useTestCA {
            do {
                directory = try InteropTransport.certificatesDirectory(explicit: certsDir)
            } catch {
                throw ValidationError("\(error)")
            }
        }
        return InteropTransport.clientTLS(directory: directory, serverName: serverHostOverride)
    }

    func run() async throws {
        let transport: any Transport
        if grpcSwift, grpcSwiftTransport == .nio {
            return try await runNIO()
        }
        do {
            transport = try await InteropTransport.make(backend: backend, client: try tlsConfiguration())
        } catch {
            FileHandle.standardError.write(Data("interop-client: cannot start backend '\(InteropTransport.backendName(backend))': \(error)\n".utf8))
            throw ExitCode(1)
        }
        let failure: InteropFailure?
        if grpcSwift {
            do {
                try await testCase.runSwitchyard(host: serverHost, port: serverPort, transport: transport)
                failure = nil
            } catch {
                failure = error
            }
        } else {
            let channel = CallChannel(target: Endpoint(host: serverHost, port: serverPort), transport: transport)
            do {
                try await testCase.run(on: channel)
                failure = nil
            } catch {
                failure = error
            }
            channel.close()
        }
        await transport.shutdownNow()
        try report(failure)
    }

    /// The case on GRPCCore over grpc-swift-nio-transport's HTTP/2 Posix transport; prints
    /// its line. Once the calls have ended the line is printed, and the client leaves at
    /// most 1 s later, whether or not the transport's shutdown is over: against grpcio's
    /// TLS server NIOSSL waits its whole 5 s shutdown timeout (not a setting
    /// grpc-swift-nio-transport passes on) for a close_notify the server never sends.
    private func runNIO() async throws {
        var tls: InteropGRPCTLS?
        if useTLS {
            let directory = useTestCA ? try certificatesDirectory() : ""
            tls = InteropGRPCTLS(directory: directory, serverName: serverHostOverride, useTestCA: useTestCA)
        }
        let testCase = self.testCase
        let printed = PrintedVerdict()
        do throws(InteropFailure) {
            try await testCase.runNIO(host: serverHost, port: serverPort, tls: tls) { failure in
                printed.print(testCase.verdict(failure))
                Thread.detachNewThread {
                    Thread.sleep(forTimeInterval: 1)
                    Glibc.exit(failure == nil ? 0 : 1)
                }
            }
        } catch {
            // A failure before or after the calls (the transport, its shutdown) has no line yet.
            printed.print(testCase.verdict(error))
            throw ExitCode(1)
        }
    }

    private func certificatesDirectory() throws -> String {
        do {
            return try InteropTransport.certificatesDirectory(explicit: certsDir)
        } catch {
            throw ValidationError("\(error)")
        }
    }

    /// Prints the case's line; a failure exits 1.
    private func report(_ failure: InteropFailure?) throws {
        print(testCase.verdict(failure))
        fflush(nil)
        if failure != nil { throw ExitCode(1) }
    }
}

extension InteropTestCase {
    /// The tool's line for the case: `PASS name`, or `FAIL name: what differed`.
    func verdict(_ failure: InteropFailure?) -> String {
        failure.map { "FAIL \(rawValue): \($0)" } ?? "PASS \(rawValue)"
    }
}

/// The case's line, printed once.
final class PrintedVerdict: Sendable {
    private let done = Mutex(false)

    func print(_ line: String) {
        let first = done.withLock { done in
            defer { done = true }
            return !done
        }
        guard first else { return }
        Swift.print(line)
        fflush(nil)
    }
}
