public import Switchyard

/// A client backend and a server backend to run a scenario over.
public struct ConformancePair: Sendable, CustomStringConvertible {
    /// The backend the client transport is made from.
    public var client: TransportBackend
    /// The backend the server transport is made from.
    public var server: TransportBackend

    public init(client: TransportBackend, server: TransportBackend) {
        self.client = client
        self.server = server
    }

    /// `client→server`, for example `bsd→memory`.
    public var description: String { "\(client.name)→\(server.name)" }
}
