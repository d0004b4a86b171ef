import CSwitchyardBackendABI
import Switchyard
import SwitchyardBackendKit

/// A connection of a loaded backend: every method goes through the library's table to
/// the library's own connection, which keeps the ``Connection`` contract (threading, call
/// order, completions, termination); this type carries calls, bytes, completions and
/// errors across and adds no state of its own. Its ``eventLoop`` is the host's one
/// wrapper of the library's loop, so the handler's callbacks, which run on the library's
/// loop thread, run "on the connection's loop" as the host sees it.
///
/// Bytes cross borrowed both ways: reads are the library's read buffer, and a write
/// hands the library a pointer for the call (its backend copies only what it must keep,
/// as `write(borrowing:completion:)` does).
///
/// Safety of `@unchecked Sendable`: immutable; the handle may be used from any thread.
final class LoadedConnection: Connection, @unchecked Sendable {
    let core: LoadedTransportCore
    /// `core.library`, one hop nearer: every call reads a function from its table.
    private let library: BackendLibrary
    private let handle: OpaquePointer
    private let loop: LoadedEventLoop

    init(core: LoadedTransportCore, handle: OpaquePointer) {
        self.core = core
        self.library = core.library
        self.handle = handle
        // Unwrapped, not checked: loading refused a table without the function, and a
        // connection without a loop is a broken backend library (its author's bug, no
        // input's), which the process cannot go on with.
        loop = core.loop(core.library.table.connection_event_loop!(handle)!)
    }

    deinit { library.table.connection_release!(handle) }

    var backendName: String { core.name }

    var eventLoop: any TransportEventLoop { loop }

    var localAddress: Endpoint {
        Endpoint.reported { result, context in library.table.connection_local_address!(handle, result, context) }
    }

    var remoteAddress: Endpoint {
        Endpoint.reported { result, context in library.table.connection_remote_address!(handle, result, context) }
    }

    func setHandler(_ handler: any ConnectionHandler) {
        var callbacks = sy_handler_callbacks(
            size: ABISize.handlerCallbacks,
            did_read: { context, bytes, count in
                CallbackContext.borrow(context, as: HandlerBox.self).handler
                    .connectionDidRead(UnsafeRawBufferPointer(start: count == 0 ? nil : bytes, count: count))
            },
            did_read_end: { CallbackContext.borrow($0, as: HandlerBox.self).handler.connectionDidReadEnd() },
            did_drain_writes: { CallbackContext.borrow($0, as: HandlerBox.self).handler.connectionDidDrainWrites() },
            did_close: { context, error in
                let box = CallbackContext.borrow(context, as: HandlerBox.self)
                let error = error.map { TransportError(abi: $0) }
                if let connection = box.connection { connection.core.observer.endedAcrossInterface(connection, error: error) }
                box.handler.connectionDidClose(error: error)
            },
            release: { _ = CallbackContext.take($0, as: HandlerBox.self) })
        library.table.connection_set_handler!(handle, &callbacks, CallbackContext.retained(HandlerBox(handler, connection: self)))
    }

    func startReading() { library.table.connection_start_reading!(handle) }

    func stopReading() { library.table.connection_stop_reading!(handle) }

    func write(_ bytes: [UInt8], completion: WriteCompletion?) {
        bytes.withUnsafeBytes { write(borrowing: $0, completion: completion) }
    }

    func write(borrowing bytes: UnsafeRawBufferPointer, completion: WriteCompletion?) {
        let (done, context) = CompletionBox.callback(completion)
        library.table.connection_write!(handle, bytes.baseAddress, bytes.count, done, context)
    }

    func writeNowOrQueue(_ bytes: [UInt8], completion: WriteCompletion?) -> Bool {
        bytes.withUnsafeBytes { bytes in
            let (done, context) = CompletionBox.callback(completion)
            let written = library.table.connection_write_now_or_queue!(handle, bytes.baseAddress, bytes.count, nil, 0, done, context)
            if written { CompletionBox.discard(context) }
            return written
        }
    }

    func writeNowOrQueue(header: UnsafeRawBufferPointer, payload: [UInt8], completion: WriteCompletion?) -> Bool {
        payload.withUnsafeBytes { payload in
            let (done, context) = CompletionBox.callback(completion)
            let written = library.table.connection_write_now_or_queue!(
                handle, header.baseAddress, header.count, payload.baseAddress, payload.count, done, context)
            if written { CompletionBox.discard(context) }
            return written
        }
    }

    var pendingWriteBytes: Int { Int(library.table.connection_pending_write_bytes!(handle)) }

    func shutdownOutput(completion: WriteCompletion?) {
        let (done, context) = CompletionBox.callback(completion)
        library.table.connection_shutdown_output!(handle, done, context)
    }

    func close() { library.table.connection_close!(handle) }

    func reset() { library.table.connection_reset!(handle) }
}

/// The host's handler, held for the library until it releases it.
private final class HandlerBox {
    let handler: any ConnectionHandler
    /// The connection, for the host's close log line (weak: the box lives as long as the
    /// library holds the handler).
    weak var connection: LoadedConnection?
    init(_ handler: any ConnectionHandler, connection: LoadedConnection) {
        self.handler = handler
        self.connection = connection
    }
}

/// A write completion, held for the library until its `done` runs.
private final class CompletionBox {
    let completion: WriteCompletion
    init(_ completion: @escaping WriteCompletion) { self.completion = completion }

    /// The `done` and context to pass for `completion` (NULL, NULL for none).
    static func callback(_ completion: WriteCompletion?) -> (sy_done_fn?, UnsafeMutableRawPointer?) {
        guard let completion else { return (nil, nil) }
        let done: sy_done_fn = { context, error in
            OnceContext.take(context, as: CompletionBox.self, what: "a write's done")?.completion(error.map { TransportError(abi: $0) })
        }
        return (done, OnceContext.register(CompletionBox(completion)))
    }

    /// Frees a context whose `done` will never run (the write went out at once).
    static func discard(_ context: UnsafeMutableRawPointer?) {
        guard let context else { return }
        _ = OnceContext.take(context, as: CompletionBox.self, what: "a write's done")
    }
}
