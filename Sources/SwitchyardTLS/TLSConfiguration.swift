public import Switchyard

/// How one side of a TLS connection is set up: its role, its certificate and key, whom it
/// trusts, what it checks, and the application protocols it offers.
///
/// A plain value: nothing is read from disk until a ``TLSContext`` is made from it
/// (``TLSTransport`` makes one for each side when it is made), and that is where a
/// certificate, key or CA bundle that cannot be loaded fails, naming its file.
///
/// ```swift
/// let client = TLSConfiguration.client(trustRoots: .pemFile("ca.pem"), applicationProtocols: ["h2"])
/// let server = TLSConfiguration.server(certificateChain: "server.pem", privateKey: "server.key")
/// ```
///
/// Only TLS 1.2 and TLS 1.3 are spoken (``minimumVersion``, ``maximumVersion``), with
/// OpenSSL's default cipher suites and groups for them. Sessions are not resumed: a
/// server sends no TLS 1.3 session tickets (unasked data after the handshake that a
/// client which never reads would answer, on close, with a TCP reset).
public struct TLSConfiguration: Sendable, Hashable {
    /// Which end of the handshake this side plays.
    public struct Role: Sendable, Hashable, CustomStringConvertible {
        private enum Value: Sendable, Hashable { case client, server }
        private let value: Value
        private init(_ value: Value) { self.value = value }
        /// Starts the handshake; verifies the server's certificate and name.
        public static let client = Role(.client)
        /// Answers the handshake; presents a certificate; may ask for the client's.
        public static let server = Role(.server)
        public var description: String { value == .client ? "client" : "server" }
    }

    /// A TLS protocol version this package speaks.
    public struct Version: Sendable, Hashable, Comparable, CustomStringConvertible {
        let rank: Int
        private init(rank: Int) { self.rank = rank }
        public static let tls12 = Version(rank: 2)
        public static let tls13 = Version(rank: 3)
        public static func < (lhs: Version, rhs: Version) -> Bool { lhs.rank < rhs.rank }
        public var description: String { rank == 2 ? "TLS 1.2" : "TLS 1.3" }
    }

    /// The certificates a peer's chain must lead to.
    public struct TrustRoots: Sendable, Hashable, CustomStringConvertible {
        enum Source: Sendable, Hashable { case system, pemFile(String) }
        let source: Source
        /// The system's trust store (OpenSSL's default paths: on Debian
        /// `/etc/ssl/certs`, from the `ca-certificates` package).
        public static let system = TrustRoots(source: .system)
        /// The certificates in one PEM file (a CA bundle), and no others.
        public static func pemFile(_ path: String) -> TrustRoots { TrustRoots(source: .pemFile(path)) }
        public var description: String {
            switch source {
            case .system: "the system trust store"
            case .pemFile(let path): "'\(path)'"
            }
        }
    }

    /// What a client checks of the server's certificate.
    public struct ServerVerification: Sendable, Hashable, CustomStringConvertible {
        enum Value: Sendable, Hashable { case full, noHostname, none }
        let value: Value
        /// The chain must lead to a trust root, be valid now, and name the server
        /// (``TLSConfiguration/serverName``, or the host connected to). The default.
        public static let full = ServerVerification(value: .full)
        /// The chain must lead to a trust root and be valid now; the name is not checked.
        public static let noHostnameVerification = ServerVerification(value: .noHostname)
        /// Nothing is checked: the connection is encrypted to whoever answered. For
        /// tests and for peers pinned some other way only.
        public static let none = ServerVerification(value: .none)
        public var description: String {
            switch value {
            case .full: "full"
            case .noHostname: "no hostname verification"
            case .none: "none"
            }
        }
    }

    /// Whether a server asks for the client's certificate (mutual TLS).
    public struct ClientAuthentication: Sendable, Hashable, CustomStringConvertible {
        enum Value: Sendable, Hashable { case none, optional, required }
        let value: Value
        /// The server does not ask. The default.
        public static let none = ClientAuthentication(value: .none)
        /// The server asks; a client without a certificate is let in; one with a
        /// certificate that does not lead to a trust root is turned away.
        public static let optional = ClientAuthentication(value: .optional)
        /// The server asks, and a client without a valid certificate is turned away.
        public static let required = ClientAuthentication(value: .required)
        public var description: String {
            switch value {
            case .none: "none"
            case .optional: "optional"
            case .required: "required"
            }
        }
    }

    /// Client or server.
    public var role: Role
    /// The certificate chain this side presents: a PEM file, leaf first. Required for a
    /// server; for a client, the certificate a server that asks is shown.
    public var certificateChainFile: String?
    /// The private key of the chain's leaf: a PEM file (PKCS#8 or traditional, not
    /// encrypted).
    public var privateKeyFile: String?
    /// Whom this side trusts: for a client, the server's chain; for a server that asks
    /// for client certificates, the clients' chains.
    public var trustRoots: TrustRoots
    /// A client's checks of the server's certificate.
    public var serverVerification: ServerVerification
    /// A server's demand for client certificates.
    public var clientAuthentication: ClientAuthentication
    /// The name a client sends as SNI and checks the certificate against; `nil` takes the
    /// host of the endpoint connected to. An IP literal is checked against the
    /// certificate's IP addresses and not sent as SNI (RFC 6066 forbids it).
    public var serverName: String?
    /// Application protocols (ALPN), most preferred first: a client offers them, a
    /// server picks the first of its own list the client offered. Empty: no ALPN. When
    /// both sides have lists and they share none, the handshake fails (RFC 7301).
    public var applicationProtocols: [String]
    /// The oldest version spoken; never below TLS 1.2.
    public var minimumVersion: Version
    /// The newest version spoken.
    public var maximumVersion: Version
    /// How long a handshake may take before it fails with `deadlineExceeded`.
    public var handshakeTimeout: Duration

    /// A client: verifies the server against `trustRoots` (the system's by default), its
    /// name included.
    public static func client(
        trustRoots: TrustRoots = .system,
        serverVerification: ServerVerification = .full,
        serverName: String? = nil,
        certificateChainFile: String? = nil,
        privateKeyFile: String? = nil,
        applicationProtocols: [String] = [],
        handshakeTimeout: Duration = .seconds(10)
    ) -> TLSConfiguration {
        TLSConfiguration(
            role: .client, certificateChainFile: certificateChainFile, privateKeyFile: privateKeyFile,
            trustRoots: trustRoots, serverVerification: serverVerification, clientAuthentication: .none,
            serverName: serverName, applicationProtocols: applicationProtocols,
            minimumVersion: .tls12, maximumVersion: .tls13, handshakeTimeout: handshakeTimeout)
    }

    /// A server presenting `certificateChainFile` with `privateKeyFile`; with
    /// `clientAuthentication`, it checks clients' certificates against `trustRoots`.
    public static func server(
        certificateChainFile: String,
        privateKeyFile: String,
        clientAuthentication: ClientAuthentication = .none,
        trustRoots: TrustRoots = .system,
        applicationProtocols: [String] = [],
        handshakeTimeout: Duration = .seconds(10)
    ) -> TLSConfiguration {
        TLSConfiguration(
            role: .server, certificateChainFile: certificateChainFile, privateKeyFile: privateKeyFile,
            trustRoots: trustRoots, serverVerification: .full, clientAuthentication: clientAuthentication,
            serverName: nil, applicationProtocols: applicationProtocols,
            minimumVersion: .tls12, maximumVersion: .tls13, handshakeTimeout: handshakeTimeout)
    }

    public init(
        role: Role, certificateChainFile: String?, privateKeyFile: String?, trustRoots: TrustRoots,
        serverVerification: ServerVerification, clientAuthentication: ClientAuthentication,
        serverName: String?, applicationProtocols: [String], minimumVersion: Version,
        maximumVersion: Version, handshakeTimeout: Duration
    ) {
        self.role = role
        self.certificateChainFile = certificateChainFile
        self.privateKeyFile = privateKeyFile
        self.trustRoots = trustRoots
        self.serverVerification = serverVerification
        self.clientAuthentication = clientAuthentication
        self.serverName = serverName
        self.applicationProtocols = applicationProtocols
        self.minimumVersion = minimumVersion
        self.maximumVersion = maximumVersion
        self.handshakeTimeout = handshakeTimeout
    }

    /// Checks what can be checked without files: a server has a certificate and key, a
    /// key comes with a chain, the versions are in order, the protocol names fit ALPN
    /// (1 to 255 bytes each), the timeout is positive.
    /// - Throws: `invalidArgument`, reason `invalid option`, saying which.
    public func validate() throws(TransportError) {
        func invalid(_ message: String) -> TransportError {
            TransportError(code: .invalidArgument, reason: .invalidOption, message: "TLS configuration: \(message)")
        }
        if role == .server && (certificateChainFile == nil || privateKeyFile == nil) {
            throw invalid("a server needs a certificate chain and a private key")
        }
        if (certificateChainFile == nil) != (privateKeyFile == nil) {
            throw invalid("a certificate chain and a private key go together (one is missing)")
        }
        if minimumVersion > maximumVersion {
            throw invalid("the minimum version (\(minimumVersion)) is above the maximum (\(maximumVersion))")
        }
        for name in applicationProtocols where name.utf8.isEmpty || name.utf8.count > 255 {
            throw invalid("the application protocol '\(name)' is not 1 to 255 bytes long")
        }
        if handshakeTimeout <= .zero {
            throw invalid("the handshake timeout must be positive, not \(handshakeTimeout)")
        }
        if let serverName, serverName.isEmpty || serverName.utf8.contains(0) {
            throw invalid("the server name '\(serverName)' is empty or holds a NUL byte")
        }
    }
}
