import Switchyard

/// The network under a fault scenario (`withFaultNetwork`): a client's host and a
/// server's joined by one path the scenario breaks. Two kinds:
///
/// - `FaultNetwork`: real network namespaces joined by veth, faults made with `ip` and
///   nft, for the backends with TCP sockets; needs root.
/// - `SimulatedFaultNetwork`: a simulated network of its own on a virtual clock, for the
///   `simulation` backend; needs nothing, and its scenarios pass in virtual time.
///
/// A scenario states its steps once, against this protocol; each network makes them
/// happen its own way.
protocol FaultPath: Sendable {
    /// The client's address on the path (the source of its connections).
    var clientAddress: String { get }
    /// Where the server listens.
    var serverAddress: String { get }
    /// The addresses' family.
    var family: FaultNetwork.Family { get }

    /// Makes a transport of `backend` on the server's side of the path.
    func makeServerTransport(_ backend: TransportBackend, configuration: TransportConfiguration) async throws -> any Transport
    /// Makes a transport of `backend` on the client's side of the path.
    func makeClientTransport(_ backend: TransportBackend, configuration: TransportConfiguration) async throws -> any Transport

    /// Runs a scenario's steps on this network: now, or in the network's own time.
    func run(_ body: @escaping @Sendable () async throws -> Void) async throws

    /// Takes the client's end of the path down.
    func takeClientLinkDown() throws
    /// Drops every packet to and from TCP `port` on the server's side, carrier up.
    func blackHole(port: Int) throws
    /// Lets packets through again (undoes `blackHole(port:)` and `injectReset(port:)`).
    func liftBlackHole() throws
    /// Answers every packet to TCP `port` on the server's side with a reset.
    func injectReset(port: Int) throws
    /// Removes what the network made. Idempotent.
    func remove()
}

extension FaultNetwork: FaultPath {
    func makeServerTransport(_ backend: TransportBackend, configuration: TransportConfiguration) async throws -> any Transport {
        try await makeTransport(backend, in: serverNamespace, configuration: configuration)
    }

    func makeClientTransport(_ backend: TransportBackend, configuration: TransportConfiguration) async throws -> any Transport {
        try await makeTransport(backend, in: clientNamespace, configuration: configuration)
    }

    func run(_ body: @escaping @Sendable () async throws -> Void) async throws {
        try await body()
    }
}
