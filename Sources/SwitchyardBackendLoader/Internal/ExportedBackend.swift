import CSwitchyardBackendABI
import Glibc
import Switchyard
import Synchronization
import SwitchyardBackendKit

/// A ``TransportBackend`` behind a `sy_backend` table: what a backend library's entry
/// point returns. The table and its strings live as long as the process (a library is
/// never unloaded), and every call through it lands in the functions below, which run
/// the backend's Swift objects in the library's own copy of the modules.
final class ExportedBackend: Sendable {
    let backend: TransportBackend
    /// The table handed to hosts. `nonisolated(unsafe)`: a pointer is not `Sendable`, but
    /// the table is written once, in `init`, before anyone can see it, and only read after.
    nonisolated(unsafe) let table: UnsafeMutablePointer<sy_backend>

    /// Tables already made, by backend name: an entry point may be called more than once.
    private static let exported = Mutex<[String: ExportedBackend]>([:])

    /// The table for `backend`, made on the first call for its name.
    static func table(for backend: TransportBackend) -> UnsafeRawPointer {
        exported.withLock { exported in
            if let known = exported[backend.name] { return UnsafeRawPointer(known.table) }
            let made = ExportedBackend(backend)
            exported[backend.name] = made
            return UnsafeRawPointer(made.table)
        }
    }

    private init(_ backend: TransportBackend) {
        self.backend = backend
        table = .allocate(capacity: 1)
        table.initialize(to: Self.functions())
        table.pointee.context = Unmanaged.passUnretained(self).toOpaque()
        table.pointee.name = UnsafePointer(strdup(backend.name))
        table.pointee.summary = UnsafePointer(strdup(backend.summary))
        table.pointee.network = UnsafePointer(strdup(backend.network))
        table.pointee.uses_sockets = backend.usesSockets
    }

    /// Every function of the table; the registration is filled in per backend.
    private static func functions() -> sy_backend {
        var table = sy_backend()
        table.abi_version = SY_BACKEND_ABI_VERSION
        table.size = ABISize.backend
        table.configuration_size = ABISize.configuration

        // Transport.
        table.transport_make = { backend, configuration, done, context in
            ExportedBackend.make(backend, configuration, done, context)
        }
        table.transport_release = { Handle.release($0, as: ExportedTransport.self) }
        table.transport_connect = { transport, endpoint, options, done, context in
            ExportedBackend.connect(Handle.object(transport), endpoint, options, done, context)
        }
        table.transport_listen = { transport, endpoint, options, done, context in
            ExportedBackend.listen(Handle.object(transport), endpoint, options, done, context)
        }
        table.transport_shutdown = { transport, gracePeriod, done, context in
            let exported: ExportedTransport = Handle.object(transport)
            let callback = done.map { ForeignCallback(function: $0, context: context) }
            Task {
                await exported.transport.shutdown(gracePeriod: Duration(abi: gracePeriod))
                callback?.call(nil)
            }
        }
        table.transport_shutdown_now = { transport, done, context in
            let exported: ExportedTransport = Handle.object(transport)
            let callback = done.map { ForeignCallback(function: $0, context: context) }
            Task {
                await exported.transport.shutdownNow()
                callback?.call(nil)
            }
        }
        table.operation_cancel = { operation in
            Handle.object(operation, as: ExportedOperation.self).task.cancel()
        }
        table.operation_release = { Handle.release($0, as: ExportedOperation.self) }

        // Listener.
        table.listener_release = { Handle.release($0, as: ExportedListener.self) }
        table.listener_local_address = { listener, result, context in
            Handle.object(listener, as: ExportedListener.self).listener.localAddress.withABI { result?(context, $0) }
        }
        table.listener_accept = { listener, callbacks, context in
            let exported: ExportedListener = Handle.object(listener)
            let acceptor = ForeignAcceptor(callbacks, context: context)
            let transport = exported.transport
            exported.listener.acceptConnections { connection in
                acceptor.accepted(Handle.retained(ExportedConnection(connection, of: transport)))
            }
        }
        table.listener_close = { Handle.object($0, as: ExportedListener.self).listener.close() }

        // Connection.
        table.connection_release = { Handle.release($0, as: ExportedConnection.self) }
        table.connection_event_loop = { Handle.unretained(Handle.object($0, as: ExportedConnection.self).loop) }
        table.connection_local_address = { connection, result, context in
            Handle.object(connection, as: ExportedConnection.self).connection.localAddress.withABI { result?(context, $0) }
        }
        table.connection_remote_address = { connection, result, context in
            Handle.object(connection, as: ExportedConnection.self).connection.remoteAddress.withABI { result?(context, $0) }
        }
        table.connection_set_handler = { connection, callbacks, context in
            Handle.object(connection, as: ExportedConnection.self).connection
                .setHandler(ForeignHandler(callbacks, context: context))
        }
        table.connection_start_reading = { Handle.object($0, as: ExportedConnection.self).connection.startReading() }
        table.connection_stop_reading = { Handle.object($0, as: ExportedConnection.self).connection.stopReading() }
        table.connection_write = { connection, bytes, count, done, context in
            Handle.object(connection, as: ExportedConnection.self).connection.write(
                borrowing: UnsafeRawBufferPointer(start: count == 0 ? nil : bytes, count: count),
                completion: ForeignCallback.completion(done, context))
        }
        table.connection_write_now_or_queue = { connection, header, headerCount, payload, payloadCount, done, context in
            let header = UnsafeRawBufferPointer(start: headerCount == 0 ? nil : header, count: headerCount)
            // The payload is borrowed too, and the backend may keep it: it becomes an array
            // only when there is one (a plain write passes its bytes as the header).
            let payload = payloadCount == 0 ? [] : Array(UnsafeRawBufferPointer(start: payload, count: payloadCount))
            return Handle.object(connection, as: ExportedConnection.self).connection.writeNowOrQueue(
                header: header, payload: payload, completion: ForeignCallback.completion(done, context))
        }
        table.connection_pending_write_bytes = {
            Int64(Handle.object($0, as: ExportedConnection.self).connection.pendingWriteBytes)
        }
        table.connection_shutdown_output = { connection, done, context in
            Handle.object(connection, as: ExportedConnection.self).connection
                .shutdownOutput(completion: ForeignCallback.completion(done, context))
        }
        table.connection_close = { Handle.object($0, as: ExportedConnection.self).connection.close() }
        table.connection_reset = { Handle.object($0, as: ExportedConnection.self).connection.reset() }

        // Event loop.
        table.loop_retain = { _ = Unmanaged<ExportedLoop>.fromOpaque(UnsafeRawPointer($0!)).retain() }
        table.loop_release = { Handle.release($0, as: ExportedLoop.self) }
        table.loop_in_event_loop = { Handle.object($0, as: ExportedLoop.self).loop.inEventLoop }
        table.loop_execute = { loop, run, drop, context in
            guard let run, let drop else { return }
            let work = ForeignWork(run: run, drop: drop, context: context)
            Handle.object(loop, as: ExportedLoop.self).loop.execute { work() }
        }
        table.backend_local_endpoint = { backend, result, context in
            guard let own = backend?.pointee.context, let result else { return }
            Unmanaged<ExportedBackend>.fromOpaque(own).takeUnretainedValue()
                .backend.localEndpoint().withABI { result(context, $0) }
        }
        return table
    }

    // MARK: - The transport's calls

    private static func make(
        _ table: UnsafePointer<sy_backend>?, _ configuration: UnsafePointer<sy_configuration>?,
        _ done: sy_transport_fn?, _ context: UnsafeMutableRawPointer?
    ) {
        guard let done else { return }
        guard let own = table?.pointee.context else {
            TransportError(code: .invalidArgument, reason: .misuse, message: "transport_make was passed no backend table")
                .withABI { done(context, nil, $0) }
            return
        }
        let exported = Unmanaged<ExportedBackend>.fromOpaque(own).takeUnretainedValue()
        do {
            let transport = try exported.backend.make(try TransportConfiguration(abi: configuration))
            done(context, Handle.retained(ExportedTransport(transport)), nil)
        } catch {
            TransportError.withABI(error) { done(context, nil, $0) }
        }
    }

    private static func connect(
        _ exported: ExportedTransport, _ endpoint: UnsafePointer<sy_endpoint>?,
        _ options: UnsafePointer<sy_connect_options>?, _ done: sy_connection_fn?, _ context: UnsafeMutableRawPointer?
    ) -> OpaquePointer? {
        guard let done else { return nil }
        let callback = ForeignCallback(function: done, context: context)
        let target: Endpoint
        let connectOptions: ConnectOptions
        do {
            // Read now: the strings are borrowed for this call only.
            target = try Endpoint(abi: endpoint)
            connectOptions = try ConnectOptions(abi: options)
        } catch {
            error.withABI { done(context, nil, $0) }
            return nil
        }
        return Handle.retained(ExportedOperation(Task {
            do {
                let connection = try await exported.transport.connect(to: target, options: connectOptions)
                callback.function(callback.context, Handle.retained(ExportedConnection(connection, of: exported)), nil)
            } catch {
                TransportError.withABI(error) { callback.function(callback.context, nil, $0) }
            }
        }))
    }

    private static func listen(
        _ exported: ExportedTransport, _ endpoint: UnsafePointer<sy_endpoint>?,
        _ options: UnsafePointer<sy_listen_options>?, _ done: sy_listener_fn?, _ context: UnsafeMutableRawPointer?
    ) -> OpaquePointer? {
        guard let done else { return nil }
        let callback = ForeignCallback(function: done, context: context)
        let target: Endpoint
        let listenOptions: ListenOptions
        do {
            target = try Endpoint(abi: endpoint)
            listenOptions = try ListenOptions(abi: options)
        } catch {
            error.withABI { done(context, nil, $0) }
            return nil
        }
        return Handle.retained(ExportedOperation(Task {
            do {
                let listener = try await exported.transport.listen(on: target, options: listenOptions)
                callback.function(callback.context, Handle.retained(ExportedListener(listener, of: exported)), nil)
            } catch {
                TransportError.withABI(error) { callback.function(callback.context, nil, $0) }
            }
        }))
    }
}
