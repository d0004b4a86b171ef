import Glibc
public import Switchyard
import SwitchyardBackendKit
import SwitchyardBSD
import SwitchyardBackendLoader
import SwitchyardMemory
import SwitchyardSimulation
#if LibUV
import SwitchyardUV
#endif

/// Every backend Switchyard ships, registered by name, and the run-time choice among them.
///
/// ```swift
/// let transport = try Backends.makeTransport()          // SWITCHYARD_BACKEND, else "bsd"
/// let transport = try Backends.makeTransport(named: "memory")
/// ```
///
/// Backends built as shared libraries join the registry at run time: by path
/// (``loadLibrary(at:into:)``, what a `--backend-library` flag does) or from the folders
/// in `SWITCHYARD_BACKEND_PATH` (``loadLibraries(_:searchPath:into:)`` does both).
public enum Backends {
    /// The backend used when neither a name nor `SWITCHYARD_BACKEND` picks one.
    public static let defaultName = "bsd"

    /// A registry with `bsd`, `memory`, `simulation` and, with the package trait `LibUV` (on
    /// by default), `libuv` registered. Register your own backends here (or in a registry of your own) to
    /// make them selectable by name.
    public static let registry: BackendRegistry = {
        let registry = BackendRegistry()
        registry.register(BSDTransport.backend)
        registry.register(MemoryTransport.backend)
        registry.register(SimulationTransport.backend)
        #if LibUV
        registry.register(UVTransport.backend)
        #endif
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

    /// Where ``selectedName(explicit:)`` took the name from, for error messages:
    /// `--backend` for `explicit`, `$SWITCHYARD_BACKEND` for the environment, else
    /// `the default`.
    public static func selectionSource(explicit: String? = nil) -> String {
        if let explicit, !explicit.isEmpty { return "--backend" }
        if let value = getenv(BackendRegistry.environmentVariable), value.pointee != 0 {
            return "$\(BackendRegistry.environmentVariable)"
        }
        return "the default"
    }

    /// Makes the chosen backend's transport.
    /// - Throws: `invalidArgument`/`unknown backend`, listing the registered backends,
    ///   when the name is not registered (saying so when the name came from
    ///   `SWITCHYARD_BACKEND`).
    public static func makeTransport(named explicit: String? = nil, configuration: TransportConfiguration = TransportConfiguration()) throws -> any Transport {
        let backend: TransportBackend
        do {
            backend = try registry.backend(named: selectedName(explicit: explicit))
        } catch {
            var error = error
            if selectionSource(explicit: explicit) != "--backend" { error.message = "\(selectionSource(explicit: explicit)): \(error.message)" }
            throw error
        }
        return try backend.make(configuration)
    }

    /// The environment variable that lists folders of backend libraries, colon-separated.
    public static let searchPathVariable = LoadableBackend.searchPathVariable

    /// The help text of a tool's `--backend-library PATH` option, one wording for every
    /// tool that takes it (pass the paths to ``loadLibraries(_:searchPath:into:)``).
    public static let libraryOptionHelp =
        "A backend library to load (a shared library exporting switchyard_backend_entry); its backend can then be chosen with --backend. Repeatable. The lib*.so files in the folders of $\(searchPathVariable) (colon-separated) are loaded too."

    /// Loads the backend library at `path` and registers its backend in `registry`.
    /// - Returns: the loaded backend, under the name the library gave it.
    /// - Throws: a ``TransportError`` naming the file: what `LoadableBackend.load(path:)`
    ///   throws (`invalidArgument`: cannot load library, no entry point, interface
    ///   version, malformed backend), or `failedPrecondition`, reason `duplicate backend`,
    ///   when its name is registered already.
    @discardableResult
    public static func loadLibrary(at path: String, into registry: BackendRegistry = registry) throws(TransportError) -> TransportBackend {
        let backend = try LoadableBackend.load(path: path)
        do {
            try registry.registerNew(backend)
        } catch {
            throw TransportError(
                code: error.code, reason: error.reason,
                message: "backend library '\(path)': \(error.message); registered backends: \(registry.names.joined(separator: ", "))")
        }
        return backend
    }

    /// Loads the backend libraries a program was given: each of `paths` (its
    /// `--backend-library` flags), then every `lib*.so` in the folders of `searchPath`
    /// (by default `SWITCHYARD_BACKEND_PATH` from the environment; see
    /// `LoadableBackend.libraries(inSearchPath:)`), and registers their backends in
    /// `registry`. One call for a tool:
    ///
    /// ```swift
    /// try Backends.loadLibraries(backendLibraryFlags)
    /// let transport = try Backends.makeTransport(named: backendFlag)
    /// ```
    ///
    /// - Returns: the backends loaded, in that order.
    /// - Throws: the first error, naming its file (see ``loadLibrary(at:into:)``);
    ///   libraries loaded before it stay registered.
    @discardableResult
    public static func loadLibraries(
        _ paths: [String] = [], searchPath: String? = environmentSearchPath, into registry: BackendRegistry = registry
    ) throws(TransportError) -> [TransportBackend] {
        var files = paths
        if let searchPath { files += try LoadableBackend.libraries(inSearchPath: searchPath) }
        var loaded: [TransportBackend] = []
        for file in files { loaded.append(try loadLibrary(at: file, into: registry)) }
        return loaded
    }

    /// What a tool checks before it starts: loads the backend libraries (`--backend-library`
    /// files, then `SWITCHYARD_BACKEND_PATH`) and checks that the backend `explicit` (else
    /// `SWITCHYARD_BACKEND`, else ``defaultName``) is registered.
    /// - Throws: the failure, its message saying which option or variable it came from
    ///   (`--backend: unknown backend 'x'; ...` or `$SWITCHYARD_BACKEND: unknown backend 'x'; ...`).
    public static func checkSelection(explicit: String?, libraries: [String]) throws(TransportError) {
        do {
            try loadLibraries(libraries)
        } catch {
            var error = error
            error.message = "loading backend libraries (--backend-library, $\(searchPathVariable)): \(error.message)"
            throw error
        }
        do {
            _ = try registry.backend(named: selectedName(explicit: explicit))
        } catch {
            var error = error
            error.message = "\(selectionSource(explicit: explicit)): \(error.message)"
            throw error
        }
    }

    /// `SWITCHYARD_BACKEND_PATH` from the environment, if set.
    public static var environmentSearchPath: String? {
        getenv(searchPathVariable).map { String(cString: $0) }
    }
}
