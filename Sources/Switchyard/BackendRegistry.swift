import Synchronization

/// A backend the registry can make: its name, a one-line summary, and a factory.
public struct TransportBackend: Sendable {
    /// The name users pick it by (`--backend`, `SWITCHYARD_BACKEND`, configuration).
    public var name: String
    /// One line for listings.
    public var summary: String
    /// Whether its connections are real sockets. Backends with sockets can be paired
    /// with each other (a client on one, a server on another); an in-memory backend
    /// pairs only with itself.
    public var usesSockets: Bool
    /// The network the backend's connections travel on: backends of one network reach
    /// each other (a client of one, a server of another), backends of different networks
    /// never do. `"tcp"` for the TCP socket backends; the in-memory backend's network is
    /// its own process-wide table (`"memory"`); a backend over another kind of socket
    /// (Unix-domain, say) names its own.
    public var network: String
    /// Where to listen on this backend for a local test, the conformance kit's listeners
    /// among them: an endpoint a client of the same ``network`` in this process reaches.
    /// Called once per listener; by default `127.0.0.1`, port 0 (a free port). A backend
    /// whose addresses are not hosts and ports names its own: a Unix-domain backend, a
    /// fresh socket path in a temporary folder each call.
    public var localEndpoint: @Sendable () -> Endpoint
    /// Makes a transport; may throw a ``TransportError``.
    public var make: @Sendable (TransportConfiguration) throws -> any Transport

    /// A backend on `network`; by default `"tcp"` for a backend with sockets, else a
    /// network of its own named after it. `localEndpoint` by default gives
    /// `127.0.0.1`, port 0.
    public init(
        name: String, summary: String, usesSockets: Bool, network: String? = nil,
        localEndpoint: (@Sendable () -> Endpoint)? = nil,
        make: @escaping @Sendable (TransportConfiguration) throws -> any Transport
    ) {
        self.name = name
        self.summary = summary
        self.usesSockets = usesSockets
        self.network = network ?? (usesSockets ? "tcp" : name)
        self.localEndpoint = localEndpoint ?? { Endpoint(host: "127.0.0.1", port: 0) }
        self.make = make
    }
}

extension TransportError.Reason {
    /// A backend's name is registered already.
    public static let duplicateBackend = TransportError.Reason("duplicate backend")
}

/// Backends by name, chosen at run time.
///
/// Backends register themselves (the `SwitchyardBackends` module registers every backend
/// Switchyard ships); the application picks one by name: a command-line flag, a
/// configuration value, or the `SWITCHYARD_BACKEND` environment variable (see
/// ``selectName(explicit:environment:default:)``). An unknown name is an error that
/// lists the registered backends.
public final class BackendRegistry: Sendable {
    /// The environment variable that names the backend when nothing more explicit does.
    public static let environmentVariable = "SWITCHYARD_BACKEND"

    private let backends = Mutex<[String: TransportBackend]>([:])

    public init() {}

    /// Adds (or replaces) a backend under its name.
    public func register(_ backend: TransportBackend) {
        backends.withLock { $0[backend.name] = backend }
    }

    /// Adds a backend under its name, unless a backend of that name is registered already
    /// (a backend loaded at run time must never replace one silently).
    /// - Throws: `failedPrecondition`, reason `duplicate backend`, naming it; the registry
    ///   is left as it was.
    public func registerNew(_ backend: TransportBackend) throws(TransportError) {
        let added = backends.withLock { backends in
            if backends[backend.name] != nil { return false }
            backends[backend.name] = backend
            return true
        }
        if !added {
            throw TransportError(
                code: .failedPrecondition, reason: .duplicateBackend,
                message: "a backend named '\(backend.name)' is registered already")
        }
    }

    /// The registered names, sorted.
    public var names: [String] { backends.withLock { $0.keys.sorted() } }

    /// Every registered backend, sorted by name.
    public var all: [TransportBackend] { backends.withLock { $0.values.sorted { $0.name < $1.name } } }

    /// The backend registered as `name`.
    /// - Throws: `invalidArgument`, reason `unknown backend`, naming the registered ones.
    public func backend(named name: String) throws(TransportError) -> TransportBackend {
        if let backend = backends.withLock({ $0[name] }) { return backend }
        let known = names
        throw TransportError(
            code: .invalidArgument, reason: .unknownBackend,
            message: "unknown backend '\(name)'; registered backends: \(known.isEmpty ? "(none)" : known.joined(separator: ", "))")
    }

    /// Makes a transport of the backend registered as `name`.
    public func makeTransport(named name: String, configuration: TransportConfiguration = TransportConfiguration()) throws -> any Transport {
        try backend(named: name).make(configuration)
    }

    /// The name to use: `explicit` if given, else `SWITCHYARD_BACKEND` from
    /// `environment` if set and not empty, else `default`.
    public static func selectName(explicit: String?, environment: [String: String], default defaultName: String) -> String {
        if let explicit, !explicit.isEmpty { return explicit }
        if let fromEnvironment = environment[environmentVariable], !fromEnvironment.isEmpty { return fromEnvironment }
        return defaultName
    }
}
