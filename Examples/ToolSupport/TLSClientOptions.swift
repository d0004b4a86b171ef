public import ArgumentParser
public import Switchyard
#if TLS
public import SwitchyardTLS
#endif

/// `--tls` and the client's TLS files and name, for echo-client and transfer-client
/// (`@OptionGroup`): the server's certificate is verified against the system's trust
/// store or `--tls-ca`, and its name against `--tls-server-name`, else `--host`;
/// `--tls-cert` and `--tls-key` answer a server that asks for a client certificate.
/// Built with Switchyard's package trait TLS off, the tool links no OpenSSL and refuses
/// `--tls`.
public struct TLSClientOptions: ParsableArguments, Sendable {
    @Flag(help: "Speak TLS: verify the server's certificate (against the system's trust store, or --tls-ca) and its name (--tls-server-name, else --host).")
    public var tls = false

    @Option(name: .customLong("tls-ca"), help: ArgumentHelp("With --tls: trust only the CA certificates in this PEM file.", valueName: "pem"))
    public var tlsCA: String?

    @Option(name: .customLong("tls-server-name"), help: ArgumentHelp("With --tls: the name sent as SNI and checked against the server's certificate (default: --host).", valueName: "name"))
    public var tlsServerName: String?

    @Option(name: .customLong("tls-cert"), help: ArgumentHelp("With --tls: a client certificate chain (PEM) for a server that asks for one; needs --tls-key.", valueName: "pem"))
    public var tlsCertificate: String?

    @Option(name: .customLong("tls-key"), help: ArgumentHelp("With --tls: the private key of --tls-cert (PEM, not encrypted).", valueName: "pem"))
    public var tlsKey: String?

    public init() {}

    #if TLS
    /// The client's TLS configuration, with `--tls`.
    public var configuration: TLSConfiguration? {
        guard tls else { return nil }
        return .client(
            trustRoots: tlsCA.map { .pemFile($0) } ?? .system, serverName: tlsServerName,
            certificateChainFile: tlsCertificate, privateKeyFile: tlsKey)
    }
    #endif

    public func validate() throws {
        if !tls {
            for (flag, value) in [("--tls-ca", tlsCA), ("--tls-server-name", tlsServerName), ("--tls-cert", tlsCertificate), ("--tls-key", tlsKey)] where value != nil {
                throw ValidationError("\(flag) needs --tls")
            }
        }
        if (tlsCertificate == nil) != (tlsKey == nil) {
            throw ValidationError(tlsCertificate == nil ? "--tls-key needs --tls-cert" : "--tls-cert needs --tls-key")
        }
        if let tlsServerName, tlsServerName.isEmpty || tlsServerName.utf8.count > 253 {
            throw ValidationError("--tls-server-name '\(tlsServerName)' is not a host name (1 to 253 bytes)")
        }
        #if TLS
        // A missing or bad PEM file is a bad argument, named.
        if let problem = TLSConfiguration.problem(withFiles: [("--tls-ca", tlsCA), ("--tls-cert", tlsCertificate), ("--tls-key", tlsKey)], loading: configuration) {
            throw ValidationError(problem)
        }
        #else
        if tls {
            throw ValidationError(ToolValidation.withoutTLS("--tls"))
        }
        #endif
    }

    /// `base`, with TLS over it when `--tls` was given; a failure shuts `base` down and
    /// ends the tool (exit 1) with `cannot set up TLS: ...`.
    public func wrap(_ base: any Transport, tool: String) async -> any Transport {
        #if TLS
        guard let configuration else { return base }
        do {
            return try TLSTransport(wrapping: base, client: configuration)
        } catch {
            await base.shutdownNow()
            ToolOutput.fail(tool: tool, "cannot set up TLS: \(error)")
        }
        #else
        // `validate()` refused `--tls`: plaintext only.
        return base
        #endif
    }
}
