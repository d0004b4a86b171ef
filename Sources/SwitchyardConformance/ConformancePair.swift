public import Switchyard

/// A client backend and a server backend to run a scenario over.
public struct ConformancePair: Sendable, CustomStringConvertible {
    /// The backend the client transport is made from.
    public var client: TransportBackend
    /// The backend the server transport is made from.
    public var server: TransportBackend
    /// For a pair of TLS backends: the certificates and the plaintext backends under them,
    /// which the TLS scenarios need (they skip a pair without it).
    public var tls: ConformanceTLS?

    public init(client: TransportBackend, server: TransportBackend, tls: ConformanceTLS? = nil) {
        self.client = client
        self.server = server
        self.tls = tls
    }

    /// `client→server`, for example `bsd→memory`.
    public var description: String { "\(client.name)→\(server.name)" }
}
