import Foundation
public import Switchyard
public import SwitchyardConformance
import SwitchyardTLS

/// The kit's TLS pairs: its backends with `TransportBackend.tls(wrapping:client:server:)`
/// over them, paired as the plain ones are, each pair carrying the ``ConformanceTLS`` its
/// TLS scenarios need.
///
/// A module of its own, so that the kit (`SwitchyardConformance`) does not need
/// `libssl-dev`: a backend author who runs the kit without TLS never builds this; the
/// `switchyard-conformance-tls` tool (which `switchyard-conformance --tls` runs) and the
/// kit's own tests do.
extension ConformanceTLS {
    /// `scripts/make-test-certs` of the Switchyard checkout this module was built from.
    public static var certificateScript: String {
        URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("scripts/make-test-certs").path
    }

    /// Makes throwaway test certificates (`scripts/make-test-certs`, with the `openssl`
    /// tool) into a new temporary directory and returns its path. No key is committed:
    /// they are made at run time.
    /// - Throws: ``ConformanceSelectionError`` when the script cannot run or fails.
    public static func makeTestCertificates(script: String = certificateScript) throws(ConformanceSelectionError) -> String {
        let directory = NSTemporaryDirectory() + "switchyard-conformance-tls-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let process = Process()
        process.executableURL = URL(fileURLWithPath: script)
        process.arguments = [directory]
        do {
            try process.run()
        } catch {
            throw ConformanceSelectionError("cannot run \(script) to make the TLS test certificates: \(error)")
        }
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw ConformanceSelectionError("\(script) \(directory) failed with status \(process.terminationStatus) (is the openssl tool installed? scripts/ensure-deps installs it)")
        }
        return directory
    }

    /// Removes a directory ``makeTestCertificates(script:)`` made.
    public static func removeTestCertificates(_ directory: String) {
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// The TLS pairs of `backends`: each of ``ConformanceKit/pairs(of:)`` with TLS over
    /// both sides (`bsd+tls→libuv+tls`), clients trusting the test CA of
    /// `certificateDirectory` and checking the name `localhost` (also over Unix-domain
    /// paths and inside network namespaces, where the host connected to is no name),
    /// servers presenting its `server.pem`.
    public static func pairs(of backends: [TransportBackend], certificateDirectory: String) throws(TransportError) -> [ConformancePair] {
        var pairs: [ConformancePair] = []
        for plain in ConformanceKit.pairs(of: backends) {
            pairs.append(try pair(client: plain.client, server: plain.server, certificateDirectory: certificateDirectory))
        }
        return pairs
    }

    /// The TLS pair over `client` and `server` (plaintext backends).
    public static func pair(
        client: TransportBackend, server: TransportBackend, certificateDirectory: String
    ) throws(TransportError) -> ConformancePair {
        let tls = ConformanceTLS(certificateDirectory: certificateDirectory, clientBase: client, serverBase: server) { base, setup in
            try Self.backend(over: base, setup, certificateDirectory: certificateDirectory)
        }
        // Both sides can connect and listen, as plaintext transports can (scenarios connect
        // from the server's transport too, for example once it is shut down).
        let clientSide = clientConfiguration(.init(), certificateDirectory)
        let serverSide = serverConfiguration(.init(), certificateDirectory)
        return ConformancePair(
            client: try .tls(wrapping: client, client: clientSide, server: serverSide),
            server: try .tls(wrapping: server, client: clientSide, server: serverSide),
            tls: tls)
    }

    /// The pairs `--pair` names with `+tls` on both sides (`bsd+tls:libuv+tls`); the
    /// other names are left to ``ConformanceRunner/selectPairs(registry:backends:pairs:)``.
    /// - Returns: the TLS pairs, and the names without `+tls`.
    public static func selectPairs(
        registry: BackendRegistry, pairs names: [String], certificateDirectory: () throws(ConformanceSelectionError) -> String
    ) throws(ConformanceSelectionError) -> (tls: [ConformancePair], plain: [String]) {
        var tls: [ConformancePair] = []
        var plain: [String] = []
        for text in names {
            let separator: Character = text.contains("→") ? "→" : ":"
            let parts = text.split(separator: separator, omittingEmptySubsequences: false).map(String.init)
            guard parts.count == 2, parts.allSatisfy({ $0.hasSuffix("+tls") }) else {
                if parts.contains(where: { $0.hasSuffix("+tls") }) {
                    throw ConformanceSelectionError("--pair '\(text)': a TLS client reaches only a TLS server: name both with +tls, for example bsd+tls:libuv+tls")
                }
                plain.append(text)
                continue
            }
            let bases = parts.map { String($0.dropLast(4)) }
            let selected = try ConformanceRunner.selectPairs(registry: registry, backends: [], pairs: [bases.joined(separator: ":")])
            let directory = try certificateDirectory()
            for pair in selected {
                do {
                    tls.append(try Self.pair(client: pair.client, server: pair.server, certificateDirectory: directory))
                } catch {
                    throw ConformanceSelectionError("--pair '\(text)': \(error)")
                }
            }
        }
        return (tls, plain)
    }

    /// A TLS backend over `base` set up as `setup` says (the kit's TLS scenarios ask).
    static func backend(over base: TransportBackend, _ setup: Setup, certificateDirectory: String) throws(TransportError) -> TransportBackend {
        let clientContext = try TLSContext(configuration: clientConfiguration(setup, certificateDirectory))
        let serverContext = try TLSContext(configuration: serverConfiguration(setup, certificateDirectory))
        let failures = setup.serverHandshakeFailures.map { report in { @Sendable (error: TransportError, _: Endpoint) in report(error) } }
        return TransportBackend(
            name: base.name + "+tls", summary: "TLS over \(base.name), as a TLS scenario sets it up",
            usesSockets: base.usesSockets, network: base.network + "+tls", localEndpoint: base.localEndpoint,
            make: { configuration in
                TLSTransport(
                    wrapping: try base.make(configuration), clientContext: clientContext, serverContext: serverContext,
                    handshakeFailures: failures)
            })
    }

    static func clientConfiguration(_ setup: Setup, _ directory: String) -> TLSConfiguration {
        .client(
            trustRoots: .pemFile(directory + "/ca.pem"), serverVerification: setup.verifiesServer ? .full : .none,
            serverName: "localhost",
            certificateChainFile: setup.presentsClientCertificate ? directory + "/client.pem" : nil,
            privateKeyFile: setup.presentsClientCertificate ? directory + "/client.key" : nil)
    }

    static func serverConfiguration(_ setup: Setup, _ directory: String) -> TLSConfiguration {
        .server(
            certificateChainFile: directory + "/\(setup.serverCertificate).pem", privateKeyFile: directory + "/\(setup.serverCertificate).key",
            clientAuthentication: setup.requiresClientCertificate ? .required : .none, trustRoots: .pemFile(directory + "/ca.pem"))
    }
}
