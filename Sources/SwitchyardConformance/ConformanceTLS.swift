public import Switchyard

/// What the kit needs to run its TLS scenarios over a pair of TLS backends: the test
/// certificates, the plaintext backends under the TLS ones, and a way to make TLS
/// backends over them with other certificates and checks.
///
/// The kit does not import `SwitchyardTLS` (a backend author who does not want TLS does
/// not need `libssl-dev` to run the kit); the runner that makes the TLS pairs does, and
/// hands the kit this value in ``ConformancePair/tls`` (the `SwitchyardConformanceTLS`
/// module makes both, as the `switchyard-conformance --tls` tool and the kit's tests use
/// them). A pair without it is not a TLS pair, and the TLS scenarios skip it.
///
/// The certificate directory holds what `scripts/make-test-certs` makes: `ca.pem` (the
/// CA clients trust), `server.pem` (localhost, 127.0.0.1, ::1), `expired.pem`,
/// `wronghost.pem` (not-this-host.example), `untrusted.pem` (from a CA nobody trusts),
/// `client.pem` (a client certificate from the CA), each with its `.key`.
public struct ConformanceTLS: Sendable {
    /// How one side of a TLS backend the kit asks for is set up.
    public struct Setup: Sendable {
        /// The certificate a server presents: the stem of its `.pem` and `.key` files in
        /// the certificate directory (`server`, `expired`, `wronghost`, `untrusted`).
        public var serverCertificate: String
        /// Whether a server requires a client certificate from the test CA (mutual TLS).
        public var requiresClientCertificate: Bool
        /// Whether a client presents `client.pem`.
        public var presentsClientCertificate: Bool
        /// Whether a client checks the server's certificate (chain, dates and the name
        /// `localhost`); `false` accepts any, for the client that shows a server still
        /// serves after a handshake it failed.
        public var verifiesServer: Bool
        /// Told of every accepted connection whose server handshake failed, with its error
        /// (a TLS listener accepts only connections whose handshake succeeded).
        public var serverHandshakeFailures: (@Sendable (TransportError) -> Void)?

        public init(
            serverCertificate: String = "server", requiresClientCertificate: Bool = false,
            presentsClientCertificate: Bool = false, verifiesServer: Bool = true,
            serverHandshakeFailures: (@Sendable (TransportError) -> Void)? = nil
        ) {
            self.serverCertificate = serverCertificate
            self.requiresClientCertificate = requiresClientCertificate
            self.presentsClientCertificate = presentsClientCertificate
            self.verifiesServer = verifiesServer
            self.serverHandshakeFailures = serverHandshakeFailures
        }
    }

    /// The directory of the test certificates (see the type's documentation).
    public var certificateDirectory: String
    /// The plaintext backend under the client's TLS (`bsd` under `bsd+tls`).
    public var clientBase: TransportBackend
    /// The plaintext backend under the server's TLS.
    public var serverBase: TransportBackend
    /// Makes a TLS backend over a plaintext one, set up as asked.
    let wrap: @Sendable (TransportBackend, Setup) throws -> TransportBackend

    /// - Parameters:
    ///   - certificateDirectory: the test certificates (see the type's documentation).
    ///   - clientBase: the plaintext backend under the client's TLS.
    ///   - serverBase: the plaintext backend under the server's TLS.
    ///   - wrap: makes a TLS backend over the given plaintext backend whose clients and
    ///     servers are set up as the ``Setup`` says, with the certificates of
    ///     `certificateDirectory`; clients send and check the name `localhost`.
    public init(
        certificateDirectory: String, clientBase: TransportBackend, serverBase: TransportBackend,
        wrap: @escaping @Sendable (TransportBackend, Setup) throws -> TransportBackend
    ) {
        self.certificateDirectory = certificateDirectory
        self.clientBase = clientBase
        self.serverBase = serverBase
        self.wrap = wrap
    }

    /// A TLS backend over `base`, set up as `setup` says.
    public func backend(over base: TransportBackend, _ setup: Setup) throws -> TransportBackend {
        try wrap(base, setup)
    }

    /// The path of `name` in the certificate directory.
    public func path(_ name: String) -> String { certificateDirectory + "/" + name }
}

extension TransportError.Reason {
    /// SwitchyardTLS's reasons (docs/ERRORS.md, TLS), named here so that the kit can
    /// expect them without importing SwitchyardTLS: two reasons are equal when their
    /// names are.
    static let tlsHandshake = TransportError.Reason("tls handshake")
    static let certificate = TransportError.Reason("certificate")
    static let truncated = TransportError.Reason("truncated")
}

extension TransportBackend {
    /// Whether the backend's connections are TCP connections, with or without TLS over
    /// them (network `tcp` or `tcp+tls`): what network-namespace scenarios need.
    var travelsOverTCP: Bool { network == "tcp" || network == "tcp+tls" }

    /// Whether the backend speaks TLS over another (its network ends in `+tls`, as
    /// `TransportBackend.tls(wrapping:client:server:)` names it).
    var speaksTLS: Bool { network.hasSuffix("+tls") }
}
