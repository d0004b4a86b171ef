import CSwitchyardBackendABI
import Glibc
public import Switchyard
import SwitchyardBackendKit

/// Backends in shared libraries loaded at run time, through one versioned C entry point.
///
/// **In a backend library** (a SwiftPM `.dynamic` library product that depends on this
/// toolkit), export the backend from the one entry point:
///
/// ```swift
/// import SwitchyardBackendKit
///
/// @_cdecl("switchyard_backend_entry")
/// public func switchyardBackendEntry() -> UnsafeRawPointer {
///     LoadableBackend.export(UnixTransport.backend)
/// }
/// ```
///
/// **In a host**, load it by path and register what it hands over (`SwitchyardBackends`
/// does both: `Backends.loadLibrary(at:)`, `Backends.loadLibraries(_:)`):
///
/// ```swift
/// let backend = try LoadableBackend.load(path: "/opt/backends/libUnixBackend.so")
/// try registry.registerNew(backend)
/// ```
///
/// ## Why a C boundary
///
/// A `.dynamic` product embeds its whole dependency graph: the library carries its own
/// copy of `Switchyard` and of this toolkit, and a Swift value, type or protocol
/// conformance of one copy is not one of the other (casts fail or crash). So nothing
/// Swift crosses: the entry point returns a table of C functions
/// (`Sources/CSwitchyardBackendABI/include/switchyard_backend.h`) whose first field is
/// the interface version, checked before anything else is read. The library's Swift
/// objects stay in the library, behind opaque handles; the host gets a
/// `TransportBackend` whose transports, connections, listeners and event loops call
/// through the table and keep the core's contracts, because the library's backend keeps
/// them. Errors cross field for field (code, reason, message, native error), endpoints
/// and options as plain structs, read bytes borrowed from the library's buffer, written
/// bytes borrowed for the call.
///
/// ## Rules for a library
///
/// - Build it with the same Swift toolchain as the host, and without
///   `--static-swift-stdlib`: the library and the host share the process's one Swift
///   runtime, and a second, static runtime in the library breaks it.
/// - One backend per library; its name must not be registered already.
/// - The library is never unloaded.
///
/// A host must not export its own Switchyard symbols to the libraries it loads (for
/// example by linking with `--export-dynamic`): a library's references to its own copy
/// would then bind to the host's. SwiftPM's executables and test bundles export none.
public enum LoadableBackend {
    /// The symbol every backend library exports: `switchyard_backend_entry`.
    public static let entryPointName = SY_BACKEND_ENTRY_SYMBOL

    /// The interface version this build speaks; a library must speak the same.
    public static let interfaceVersion = Int(SY_BACKEND_ABI_VERSION)

    /// The table a backend library's entry point returns for `backend`: make it the
    /// entry point's whole body. Calls for the same name return the same table.
    public static func export(_ backend: TransportBackend) -> UnsafeRawPointer {
        ExportedBackend.table(for: backend)
    }

    /// Loads the backend library at `path` (a bare file name means the file in the
    /// current folder) and returns its backend, ready to register.
    ///
    /// The library is opened with `RTLD_NOW | RTLD_LOCAL` and never closed.
    /// - Throws: a `TransportError` naming the file, code `invalidArgument`:
    ///   - the file cannot be loaded (missing, not a shared library, an unresolved
    ///     symbol): reason `TransportError.Reason.cannotLoadLibrary`, with the dynamic
    ///     loader's words;
    ///   - it has no `switchyard_backend_entry`: `TransportError.Reason.noEntryPoint`;
    ///   - it was built for another interface version:
    ///     `TransportError.Reason.interfaceVersion`, saying both versions;
    ///   - its table cannot be used (too small, no name, a NULL function):
    ///     `TransportError.Reason.malformedBackend`.
    public static func load(path: String) throws(TransportError) -> TransportBackend {
        try BackendLibrary.open(path: path).backend
    }

    /// The backend behind a table that is already in the process (what an entry point
    /// returned), checked as ``load(path:)`` checks a library's. `origin` names it in
    /// errors. For a host that links a backend library's code itself, and for tests of
    /// the boundary.
    public static func load(entry: UnsafeRawPointer, origin: String) throws(TransportError) -> TransportBackend {
        try BackendLibrary(entry: entry, origin: origin).backend
    }

    /// What loaded libraries did against the interface's contract since the last call
    /// (oldest first), and forgets them: a callback that must run once and ran again
    /// (a write's completion twice, say). The host drops such a call rather than crash on
    /// it; the conformance kit fails the scenario during which one was recorded.
    public static func takeContractViolations() -> [String] {
        OnceContext.takeViolations()
    }

    /// The backend libraries in the folders of `searchPath`, a colon-separated list as in
    /// `SWITCHYARD_BACKEND_PATH`: in each folder, in the list's order, the files whose
    /// names start with `lib` and end with `.so` (what a SwiftPM `.dynamic` product is
    /// called), sorted by name. Empty entries, and folders that do not exist, are
    /// skipped, as the shell does with `PATH`.
    /// - Throws: `invalidArgument`, reason `TransportError.Reason.cannotLoadLibrary`,
    ///   naming the folder, for an entry that exists but cannot be listed.
    public static func libraries(inSearchPath searchPath: String) throws(TransportError) -> [String] {
        var found: [String] = []
        for folder in searchPath.split(separator: ":", omittingEmptySubsequences: true).map(String.init) {
            guard let directory = opendir(folder) else {
                let error = errno
                if error == ENOENT { continue }
                throw TransportError(
                    code: .invalidArgument, reason: .cannotLoadLibrary,
                    message: "cannot list the backend folder '\(folder)' (from \(searchPathVariable)): \(String(cString: strerror(error)))",
                    native: TransportError.NativeError(domain: .errno, code: error, name: ErrnoTable.name(of: error)))
            }
            var names: [String] = []
            while let entry = readdir(directory) {
                let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                    String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
                }
                guard name.hasPrefix("lib"), name.hasSuffix(".so") else { continue }
                let path = folder.hasSuffix("/") ? folder + name : folder + "/" + name
                var status = stat()
                guard stat(path, &status) == 0, status.st_mode & S_IFMT == S_IFREG else { continue }
                names.append(path)
            }
            closedir(directory)
            found += names.sorted()
        }
        return found
    }

    /// The environment variable that lists folders of backend libraries.
    public static let searchPathVariable = "SWITCHYARD_BACKEND_PATH"
}

extension TransportError.Reason {
    /// A backend library could not be loaded: no such file, not a shared library, a
    /// library the dynamic loader refused (the message carries its words), or a folder of
    /// libraries that cannot be listed.
    public static let cannotLoadLibrary = TransportError.Reason("cannot load library")
    /// A shared library has no `switchyard_backend_entry`: it is not a backend library.
    public static let noEntryPoint = TransportError.Reason("no entry point")
    /// A backend library was built for another version of the backend interface.
    public static let interfaceVersion = TransportError.Reason("interface version")
    /// A backend library's table cannot be used: too small, a NULL, empty or non-UTF-8
    /// name or network, a NULL function.
    public static let malformedBackend = TransportError.Reason("malformed backend")
}
