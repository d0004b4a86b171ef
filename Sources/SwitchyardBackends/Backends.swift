import Glibc
public import Switchyard
import SwitchyardBSD
import SwitchyardMemory
import SwitchyardUV

/// Every backend Switchyard ships, registered by name, and the run-time choice among them.
///
/// ```swift
/// let transport = try Backends.makeTransport()          // SWITCHYARD_BACKEND, else "bsd"
/// let transport = try Backends.makeTransport(named: "memory")
/// ```
public enum Backends {
    /// The backend used when neither a name nor `SWITCHYARD_BACKEND` picks one.
    public static let defaultName = "bsd"

    /// A registry with `bsd`, `libuv` and `memory` registered. Register your own backends here
    /// (or in a registry of your own) to make them selectable by name.
    public static let registry: BackendRegistry = {
        let registry = BackendRegistry()
        registry.register(BSDTransport.backend)
        registry.register(MemoryTransport.backend)
        registry.register(UVTransport.backend)
        return registry
    }()

    /// The name chosen by `explicit` (a flag or a configuration value), else
    /// `SWITCHYARD_BACKEND`, else ``defaultName``.
    public static func selectedName(explicit: String? = nil) -> String {
        var environment: [String: String] = [:]
        if let value = getenv(BackendRegistry.environmentVariable) {
            environment[BackendRegistry.environmentVariable] = String(cString: value)
        }
        return BackendRegistry.selectName(explicit: explicit, environment: environment, default: defaultName)
    }

    /// Makes the chosen backend's transport.
    /// - Throws: `invalidArgument`/`unknown backend`, listing the registered backends,
    ///   when the name is not registered.
    public static func makeTransport(named explicit: String? = nil, configuration: TransportConfiguration = TransportConfiguration()) throws -> any Transport {
        try registry.makeTransport(named: selectedName(explicit: explicit), configuration: configuration)
    }
}
