import CSwitchyardBackendABI
import Switchyard
import Synchronization
import SwitchyardBackendKit

/// What a loaded transport's connections and listeners share: the library, the library's
/// transport handle, one host loop per library loop, and the listeners whose sequences
/// end when the transport shuts down.
///
/// Safety of `@unchecked Sendable`: `handle` is immutable and the ABI lets it be used from
/// any thread; the mutable state is behind mutexes.
final class LoadedTransportCore: @unchecked Sendable {
    let library: BackendLibrary
    let handle: OpaquePointer
    /// Logs and counts what the host sees of the library's connections (connects and
    /// ends; see ``TransportLogging``).
    let observer: TransportObserver
    private let loops = Mutex<[ForeignHandle: LoadedEventLoop]>([:])
    private let listeners = Mutex<[ObjectIdentifier: AcceptedConnections]>([:])

    init(library: BackendLibrary, handle: OpaquePointer, observer: TransportObserver) {
        self.library = library
        self.handle = handle
        self.observer = observer
    }

    deinit { library.table.transport_release!(handle) }

    var name: String { library.name }

    /// The host's one loop for the library's loop `handle` (borrowed), so that a loop is
    /// the same object for every connection on it.
    func loop(_ handle: OpaquePointer) -> LoadedEventLoop {
        let key = ForeignHandle(pointer: handle)
        return loops.withLock { loops in
            if let known = loops[key] { return known }
            library.table.loop_retain!(key.pointer)
            let loop = LoadedEventLoop(library: library, handle: key)
            loops[key] = loop
            return loop
        }
    }

    /// Wraps a connection handle the library gave the host.
    func connection(_ handle: OpaquePointer) -> LoadedConnection {
        LoadedConnection(core: self, handle: handle)
    }

    func track(_ connections: AcceptedConnections) {
        listeners.withLock { $0[ObjectIdentifier(connections)] = connections }
    }

    func untrack(_ connections: AcceptedConnections) {
        _ = listeners.withLock { $0.removeValue(forKey: ObjectIdentifier(connections)) }
    }

    /// Ends the accepted-connection sequence of every open listener: at shutdown the
    /// library closes its listeners at once, and no more will be accepted.
    func finishListeners() {
        let open = listeners.withLock { listeners in
            defer { listeners = [:] }
            return Array(listeners.values)
        }
        for connections in open { connections.finish() }
    }
}

/// A transport of a loaded backend: each call goes through the library's table to the
/// library's own transport. See ``Transport`` for the contract; the library's backend
/// keeps it, and this type only carries calls, results and errors across.
final class LoadedTransport: Transport {
    let core: LoadedTransportCore

    init(library: BackendLibrary, configuration: TransportConfiguration) throws(TransportError) {
        // Checked here, where it is whole: across the C boundary a negative loop count
        // would read as "one per core".
        try configuration.validate()
        // A library built before the interface carried the switch would drop it: refuse it
        // there instead.
        if configuration.stallTimeout != nil && !configuration.kernelStallDetection && !library.readsKernelStallDetection {
            throw TransportError(
                code: .invalidArgument, reason: .invalidOption,
                message: "backend library '\(library.origin)' cannot be made with kernelStallDetection off: it was built before the backend library interface carried that setting; rebuild it against this Switchyard")
        }
        var result: Result<OpaquePointer, TransportError>?
        withUnsafeMutablePointer(to: &result) { slot in
            configuration.withABI { configuration in
                library.table.transport_make!(library.entry, configuration, { context, transport, error in
                    let slot = context!.assumingMemoryBound(to: Result<OpaquePointer, TransportError>?.self)
                    slot.pointee = transport.map { .success($0) } ?? .failure(TransportError(abi: error))
                }, UnsafeMutableRawPointer(slot))
            }
        }
        switch result {
        case .success(let handle):
            core = LoadedTransportCore(
                library: library, handle: handle,
                observer: TransportObserver(backend: library.name, logger: configuration.logger))
        case .failure(let error):
            throw error
        case nil:
            throw TransportError(
                code: .internal, reason: .protocolViolation,
                message: "backend library '\(library.origin)': transport_make returned without an answer")
        }
    }

    var name: String { core.name }

    func connect(to endpoint: Endpoint, options: ConnectOptions) async throws -> any Connection {
        let core = core
        return try await core.observer.observingConnect(to: endpoint) {
            let handle = try await LoadedOperation.run(core.library) { context in
                endpoint.withABI { endpoint in
                    options.withABI { options in
                        core.library.table.transport_connect!(core.handle, endpoint, options, { context, connection, error in
                            OnceContext.take(context, as: LoadedOperation.self, what: "a connect's done")?.finish(connection, error)
                        }, context)
                    }
                }
            }
            return core.connection(handle)
        }
    }

    func listen(on endpoint: Endpoint, options: ListenOptions) async throws -> any Listener {
        let core = core
        let handle = try await LoadedOperation.run(core.library) { context in
            endpoint.withABI { endpoint in
                options.withABI { options in
                    core.library.table.transport_listen!(core.handle, endpoint, options, { context, listener, error in
                        OnceContext.take(context, as: LoadedOperation.self, what: "a listen's done")?.finish(listener, error)
                    }, context)
                }
            }
        }
        return LoadedListener(core: core, handle: handle)
    }

    func shutdown(gracePeriod: Duration) async {
        core.finishListeners()
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            core.library.table.transport_shutdown!(
                core.handle, sy_duration(gracePeriod),
                { context, _ in OnceContext.take(context, as: Resumption.self, what: "a shutdown's done")?.continuation.resume() },
                OnceContext.register(Resumption(continuation)))
        }
    }

    func shutdownNow() async {
        core.finishListeners()
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            core.library.table.transport_shutdown_now!(
                core.handle,
                { context, _ in OnceContext.take(context, as: Resumption.self, what: "a shutdown's done")?.continuation.resume() },
                OnceContext.register(Resumption(continuation)))
        }
    }
}

/// A continuation waiting for a `done` with no result.
private final class Resumption {
    let continuation: CheckedContinuation<Void, Never>
    init(_ continuation: CheckedContinuation<Void, Never>) { self.continuation = continuation }
}
