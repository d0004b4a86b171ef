import CSwitchyardBackendABI
import Glibc
import Switchyard
import Synchronization
import SwitchyardBackendKit

// The library side of a loaded backend: the objects behind the handles it gives the host,
// and the host's callbacks wrapped as the Swift closures and handlers its backend calls.
// Everything here lives in the library's own copy of the Swift modules.

/// A transport behind a `sy_transport *`. It keeps one ``ExportedLoop`` per event loop
/// of its backend, so the host sees one loop handle per loop (and makes one wrapper).
final class ExportedTransport: Sendable {
    let transport: any Transport
    private let loops = Mutex<[ObjectIdentifier: ExportedLoop]>([:])

    init(_ transport: any Transport) { self.transport = transport }

    /// The one handle object for `loop`.
    func exported(_ loop: any TransportEventLoop) -> ExportedLoop {
        loops.withLock { loops in
            if let known = loops[ObjectIdentifier(loop)] { return known }
            let exported = ExportedLoop(loop)
            loops[ObjectIdentifier(loop)] = exported
            return exported
        }
    }
}

/// A connection behind a `sy_connection *`, with its loop's handle object.
final class ExportedConnection: Sendable {
    let connection: any Connection
    let loop: ExportedLoop
    /// Keeps the transport (and so the loop handles) alive as long as the connection.
    let transport: ExportedTransport

    init(_ connection: any Connection, of transport: ExportedTransport) {
        self.connection = connection
        self.transport = transport
        loop = transport.exported(connection.eventLoop)
    }
}

/// A listener behind a `sy_listener *`.
final class ExportedListener: Sendable {
    let listener: any Listener
    let transport: ExportedTransport

    init(_ listener: any Listener, of transport: ExportedTransport) {
        self.listener = listener
        self.transport = transport
    }
}

/// An event loop behind a `sy_loop *`.
final class ExportedLoop: Sendable {
    let loop: any TransportEventLoop
    init(_ loop: any TransportEventLoop) { self.loop = loop }
}

/// A connect or listen in progress behind a `sy_operation *`: the task that runs it.
final class ExportedOperation: Sendable {
    let task: Task<Void, Never>
    init(_ task: Task<Void, Never>) { self.task = task }
}

/// A host callback with its context, called at most once.
///
/// Safety of `@unchecked Sendable`: both fields are immutable; the context is the host's,
/// and the ABI lets its callbacks run on any thread.
struct ForeignCallback<Function>: @unchecked Sendable {
    let function: Function
    let context: UnsafeMutableRawPointer?
}

extension ForeignCallback where Function == sy_done_fn {
    /// The host's `done` as a write completion (nil for no callback).
    static func completion(_ done: sy_done_fn?, _ context: UnsafeMutableRawPointer?) -> WriteCompletion? {
        guard let done else { return nil }
        let callback = ForeignCallback(function: done, context: context)
        return { error in callback.call(error) }
    }

    func call(_ error: TransportError?) {
        if let error {
            error.withABI { function(context, $0) }
        } else {
            function(context, nil)
        }
    }
}

/// Copies a callbacks struct the host passed, reading no more than its `size` covers
/// (fields past it stay NULL).
func copyCallbacks<T>(_ pointer: UnsafePointer<T>?, empty: T) -> T {
    var copy = empty
    guard let pointer else { return copy }
    let size = UnsafeRawPointer(pointer).load(as: UInt32.self)
    withUnsafeMutableBytes(of: &copy) { destination in
        let count = min(Int(size), destination.count)
        destination.copyMemory(from: UnsafeRawBufferPointer(start: UnsafeRawPointer(pointer), count: count))
    }
    return copy
}

/// The host's handler, as the library's backend sees it: each event calls the host's
/// callback on the connection's loop. Its `release` runs when the backend drops it.
///
/// Safety of `@unchecked Sendable`: immutable; the callbacks are the host's and run on
/// the connection's loop, as the backend calls a handler.
final class ForeignHandler: ConnectionHandler, @unchecked Sendable {
    private let callbacks: sy_handler_callbacks
    private let context: UnsafeMutableRawPointer?

    init(_ callbacks: UnsafePointer<sy_handler_callbacks>?, context: UnsafeMutableRawPointer?) {
        self.callbacks = copyCallbacks(callbacks, empty: sy_handler_callbacks())
        self.context = context
    }

    deinit { callbacks.release?(context) }

    func connectionDidRead(_ bytes: UnsafeRawBufferPointer) {
        callbacks.did_read?(context, bytes.baseAddress, bytes.count)
    }

    func connectionDidReadEnd() { callbacks.did_read_end?(context) }

    func connectionDidDrainWrites() { callbacks.did_drain_writes?(context) }

    func connectionDidClose(error: TransportError?) {
        if let error {
            error.withABI { callbacks.did_close?(context, $0) }
        } else {
            callbacks.did_close?(context, nil)
        }
    }
}

/// The host's accept callbacks; `release` runs when the listener drops them.
///
/// Safety of `@unchecked Sendable`: immutable; `accepted` runs on each connection's loop.
final class ForeignAcceptor: @unchecked Sendable {
    private let callbacks: sy_accept_callbacks
    private let context: UnsafeMutableRawPointer?

    init(_ callbacks: UnsafePointer<sy_accept_callbacks>?, context: UnsafeMutableRawPointer?) {
        self.callbacks = copyCallbacks(callbacks, empty: sy_accept_callbacks())
        self.context = context
    }

    deinit { callbacks.release?(context) }

    func accepted(_ connection: OpaquePointer) { callbacks.accepted?(context, connection) }
}

/// Work the host handed to a loop: runs once, or, if the loop drops it unrun (it has
/// stopped), tells the host so when it is freed.
///
/// Safety of `@unchecked Sendable`: the functions and context are immutable; `ran` is
/// atomic.
final class ForeignWork: @unchecked Sendable {
    private let run: sy_work_fn
    private let drop: sy_work_fn
    private let context: UnsafeMutableRawPointer?
    private let ran = Atomic(false)

    init(run: sy_work_fn, drop: sy_work_fn, context: UnsafeMutableRawPointer?) {
        self.run = run
        self.drop = drop
        self.context = context
    }

    func callAsFunction() {
        guard !ran.exchange(true, ordering: .acquiringAndReleasing) else { return }
        run(context)
    }

    deinit {
        if !ran.load(ordering: .acquiring) { drop(context) }
    }
}
