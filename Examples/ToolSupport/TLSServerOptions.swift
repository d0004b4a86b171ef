public import ArgumentParser
public import Switchyard
#if TLS
public import SwitchyardTLS
#endif

/// `--tls-cert`, `--tls-key` and `--tls-client-ca`, for echo-server and transfer-server
/// (`@OptionGroup`): with a certificate and its key the server speaks TLS; with a client
/// CA it requires a client certificate that leads to it (mutual TLS). Built with
/// Switchyard's package trait TLS off, the tool links no OpenSSL and refuses these options.
public struct TLSServerOptions: ParsableArguments, Sendable {
    @Option(name: .customLong("tls-cert"), help: ArgumentHelp("Speak TLS, presenting this certificate chain (a PEM file, leaf first); needs --tls-key.", valueName: "pem"))
    public var tlsCertificate: String?

    @Option(name: .customLong("tls-key"), help: ArgumentHelp("The private key of --tls-cert (a PEM file, not encrypted).", valueName: "pem"))
    public var tlsKey: String?

    @Option(name: .customLong("tls-client-ca"), help: ArgumentHelp("With --tls-cert: require a client certificate that leads to a CA in this PEM file (mutual TLS).", valueName: "pem"))
    public var tlsClientCA: String?

    public init() {}

    #if TLS
    /// The server's TLS configuration, when `--tls-cert` is given.
    public var configuration: TLSConfiguration? {
        guard let tlsCertificate, let tlsKey else { return nil }
        return .server(
            certificateChainFile: tlsCertificate, privateKeyFile: tlsKey,
            clientAuthentication: tlsClientCA == nil ? .none : .required,
            trustRoots: tlsClientCA.map { .pemFile($0) } ?? .system)
    }
    #endif

    public func validate() throws {
        if (tlsCertificate == nil) != (tlsKey == nil) {
            throw ValidationError(tlsCertificate == nil ? "--tls-key needs --tls-cert" : "--tls-cert needs --tls-key")
        }
        if tlsClientCA != nil, tlsCertificate == nil {
            throw ValidationError("--tls-client-ca needs --tls-cert and --tls-key")
        }
        #if TLS
        // A missing or bad PEM file is a bad argument, named.
        if let problem = TLSConfiguration.problem(withFiles: [("--tls-cert", tlsCertificate), ("--tls-key", tlsKey), ("--tls-client-ca", tlsClientCA)], loading: configuration) {
            throw ValidationError(problem)
        }
        #else
        if tlsCertificate != nil {
            throw ValidationError(ToolValidation.withoutTLS("--tls-cert"))
        }
        #endif
    }

    /// `base`, with TLS over it when `--tls-cert` was given; a handshake that fails is
    /// said on standard error (it has no caller to tell but the operator). A failure to
    /// set up shuts `base` down and ends the tool (exit 1) with `cannot set up TLS: ...`.
    public func wrap(_ base: any Transport, tool: String) async -> any Transport {
        #if TLS
        guard let configuration else { return base }
        do {
            return try TLSTransport(wrapping: base, server: configuration) { error, peer in
                ToolOutput.writeStandardError("\(tool): TLS handshake with \(peer) failed: \(error)\n")
            }
        } catch {
            await base.shutdownNow()
            ToolOutput.fail(tool: tool, "cannot set up TLS: \(error)")
        }
        #else
        // `validate()` refused every TLS option: plaintext only.
        return base
        #endif
    }
}
