import CSwitchyardBackendABI
import Glibc
import Switchyard
import SwitchyardBackendKit

/// A backend library's table, checked: the host side of a loaded backend.
///
/// Made from the entry point's result (``init(entry:origin:)``), which reads the version
/// first and refuses anything it cannot trust, so that nothing the host calls later can
/// be a NULL function. The library's file stays mapped for the life of the process.
///
/// Safety of `@unchecked Sendable`: immutable; the table is a copy of plain C data
/// (function pointers and strings the library keeps for the life of the process), and
/// the ABI lets every function be called from any thread.
final class BackendLibrary: @unchecked Sendable {
    /// Where the table came from, for messages: the library's path.
    let origin: String
    /// The library's own table, passed back to `transport_make`.
    let entry: UnsafePointer<sy_backend>
    /// A checked copy of the table: every function pointer is set.
    let table: sy_backend
    let name: String
    let summary: String
    let network: String
    let usesSockets: Bool

    /// Opens the library at `path` and checks its table.
    /// - Throws: `invalidArgument`, naming the file: reason ``TransportError/Reason/cannotLoadLibrary``
    ///   (with the loader's own words), ``TransportError/Reason/noEntryPoint``,
    ///   ``TransportError/Reason/interfaceVersion`` (saying both versions) or
    ///   ``TransportError/Reason/malformedBackend``.
    static func open(path: String) throws(TransportError) -> BackendLibrary {
        guard !path.isEmpty else {
            throw TransportError(code: .invalidArgument, reason: .cannotLoadLibrary, message: "cannot load a backend library from an empty path")
        }
        // A bare file name means the file in the current folder, not a search of the
        // system's library folders.
        let file = path.contains("/") ? path : "./" + path
        _ = dlerror()
        // RTLD_LOCAL: the library's symbols (its own copy of the Swift modules) stay out of
        // the global scope, so they bind neither the host's nor another library's. Never
        // closed: a Swift image cannot be unloaded.
        guard let handle = dlopen(file, RTLD_NOW | RTLD_LOCAL) else {
            throw TransportError(
                code: .invalidArgument, reason: .cannotLoadLibrary,
                message: "cannot load backend library '\(path)': \(lastLoaderError() ?? "dlopen failed")")
        }
        _ = dlerror()
        guard let symbol = dlsym(handle, SY_BACKEND_ENTRY_SYMBOL) else {
            throw TransportError(
                code: .invalidArgument, reason: .noEntryPoint,
                message: "'\(path)' is not a Switchyard backend library: it has no '\(SY_BACKEND_ENTRY_SYMBOL)' entry point (\(lastLoaderError() ?? "not found"))")
        }
        let entry = unsafeBitCast(symbol, to: sy_backend_entry_fn.self)
        guard let table = entry() else {
            throw TransportError(
                code: .invalidArgument, reason: .malformedBackend,
                message: "backend library '\(path)': its entry point returned no table")
        }
        return try BackendLibrary(entry: UnsafeRawPointer(table), origin: path)
    }

    /// Checks the table at `entry`: its version first, then its size, then every field.
    init(entry raw: UnsafeRawPointer, origin: String) throws(TransportError) {
        func malformed(_ why: String) -> TransportError {
            TransportError(code: .invalidArgument, reason: .malformedBackend, message: "backend library '\(origin)': \(why)")
        }
        let version = raw.load(as: UInt32.self)
        guard version == SY_BACKEND_ABI_VERSION else {
            throw TransportError(
                code: .invalidArgument, reason: .interfaceVersion,
                message: "backend library '\(origin)' was built for backend interface version \(version); this program speaks version \(SY_BACKEND_ABI_VERSION). Rebuild the library against this program's Switchyard, with the same Swift toolchain")
        }
        let size = raw.load(fromByteOffset: 4, as: UInt32.self)
        guard size >= Self.requiredSize else {
            throw malformed("its table is \(size) bytes, smaller than the \(Self.requiredSize) bytes of interface version \(SY_BACKEND_ABI_VERSION)")
        }
        let pointer = raw.assumingMemoryBound(to: sy_backend.self)
        // Only what the library's table holds: fields added after it was built stay NULL.
        var table = sy_backend()
        withUnsafeMutableBytes(of: &table) { copy in
            copy.copyMemory(from: UnsafeRawBufferPointer(start: raw, count: min(Int(size), copy.count)))
        }

        func string(_ field: UnsafePointer<CChar>?, _ name: String, mayBeEmpty: Bool = false) throws(TransportError) -> String {
            guard let field else { throw malformed("its \(name) is NULL") }
            guard let value = String(validatingCString: field) else { throw malformed("its \(name) is not UTF-8") }
            if value.isEmpty && !mayBeEmpty { throw malformed("its \(name) is empty") }
            return value
        }
        let name = try string(table.name, "name")
        let summary = try string(table.summary, "summary", mayBeEmpty: true)
        let network = try string(table.network, "network")

        let functions: [(String, Bool)] = [
            ("transport_make", table.transport_make != nil),
            ("transport_release", table.transport_release != nil),
            ("transport_connect", table.transport_connect != nil),
            ("transport_listen", table.transport_listen != nil),
            ("transport_shutdown", table.transport_shutdown != nil),
            ("transport_shutdown_now", table.transport_shutdown_now != nil),
            ("operation_cancel", table.operation_cancel != nil),
            ("operation_release", table.operation_release != nil),
            ("listener_release", table.listener_release != nil),
            ("listener_local_address", table.listener_local_address != nil),
            ("listener_accept", table.listener_accept != nil),
            ("listener_close", table.listener_close != nil),
            ("connection_release", table.connection_release != nil),
            ("connection_event_loop", table.connection_event_loop != nil),
            ("connection_local_address", table.connection_local_address != nil),
            ("connection_remote_address", table.connection_remote_address != nil),
            ("connection_set_handler", table.connection_set_handler != nil),
            ("connection_start_reading", table.connection_start_reading != nil),
            ("connection_stop_reading", table.connection_stop_reading != nil),
            ("connection_write", table.connection_write != nil),
            ("connection_write_now_or_queue", table.connection_write_now_or_queue != nil),
            ("connection_pending_write_bytes", table.connection_pending_write_bytes != nil),
            ("connection_shutdown_output", table.connection_shutdown_output != nil),
            ("connection_close", table.connection_close != nil),
            ("connection_reset", table.connection_reset != nil),
            ("loop_retain", table.loop_retain != nil),
            ("loop_release", table.loop_release != nil),
            ("loop_in_event_loop", table.loop_in_event_loop != nil),
            ("loop_execute", table.loop_execute != nil),
        ]
        let missing = functions.filter { !$0.1 }.map(\.0)
        if !missing.isEmpty {
            throw malformed("backend '\(name)' leaves \(missing.count == 1 ? "a function" : "functions") of its table NULL: \(missing.joined(separator: ", "))")
        }

        self.origin = origin
        self.entry = pointer
        self.table = table
        self.name = name
        self.summary = summary
        self.network = network
        self.usesSockets = table.uses_sockets
    }

    /// The registry entry: a backend whose transports call through the table, and whose
    /// local endpoint is the library's (when its table has one).
    var backend: TransportBackend {
        var localEndpoint: (@Sendable () -> Endpoint)?
        if table.backend_local_endpoint != nil {
            localEndpoint = { [self] in
                Endpoint.reported { result, context in table.backend_local_endpoint!(entry, result, context) }
            }
        }
        return TransportBackend(
            name: name, summary: summary, usesSockets: usesSockets, network: network, localEndpoint: localEndpoint
        ) { [self] configuration in
            try LoadedTransport(library: self, configuration: configuration)
        }
    }

    /// Whether the library reads `kernel_stall_detection` of the configuration it is made
    /// with: its table says the configuration it was built with covers the field.
    var readsKernelStallDetection: Bool {
        table.configuration_size >= ABISize.configurationCovering(\.kernel_stall_detection)
    }

    /// The size of the fields every table of this version has: those before the first
    /// field added later (`backend_local_endpoint`, which may be missing or NULL).
    static let requiredSize = UInt32(MemoryLayout<sy_backend>.offset(of: \.backend_local_endpoint)!)
}

/// The dynamic loader's message for the last failure on this thread.
private func lastLoaderError() -> String? {
    guard let message = dlerror() else { return nil }
    return String(cString: message)
}
