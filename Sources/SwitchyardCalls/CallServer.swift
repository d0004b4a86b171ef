import Synchronization
public import Switchyard
import SwitchyardHTTP2

/// Accepts calls on a listener and hands each to a handler.
///
/// Every accepted connection speaks HTTP/2, and each stream a client opens on it is a
/// call (gRPC's PROTOCOL-HTTP2). A stream that breaks gRPC's rules (an oversized or
/// truncated message, a compressed one, malformed metadata) ends its own call; a
/// connection that breaks HTTP/2's ends with GOAWAY; the server keeps serving everyone
/// else.
///
/// A request that carries `grpc-timeout` has a deadline that long after its headers
/// arrived. When it passes before the call ended, the server ends the call: the handler's
/// `didClose` (or the async face's call) has `deadlineExceeded`, reason `timed out`, as
/// for a client's cancel, and the client receives that status in trailers, then RST_STREAM
/// NO_ERROR if its half is still open (ServerDeadline.swift). A request without one has
/// no deadline and no timer.
///
/// ## Lifetime
///
/// - A server serves from the moment ``start(transport:on:options:configuration:makeHandler:)`` (or a
///   sibling) returns.
/// - ``close()`` stops accepting at once: the listener closes, so a new connect is
///   refused, and a connection the listener had accepted but not yet handed over is
///   closed. Every open connection says GOAWAY: its open calls go on, new streams are
///   refused, and it closes once its calls ended.
/// - ``closeNow()`` does the same, then closes every connection and ends every open
///   call at once with `cancelled`, reason `call cancelled` (the client's call ends
///   `unavailable`: its connection closed), and cancels the task of every call that ``start(transport:on:options:configuration:serve:)``
///   runs (so `serve`'s own awaits see the cancellation too).
/// - ``serve()`` waits for the end: it returns once the server was closed, every call
///   ended and every `serve` task returned, so nothing of the server outlives it. If the
///   task that waits in ``serve()`` is cancelled, the server is closed with
///   ``closeNow()`` and ``serve()`` still returns only once the tasks returned.
///   (`SwitchyardServiceLifecycle` makes the server a `Service` on top of this: graceful
///   shutdown is ``close()``, cancellation ``closeNow()``.)
///
/// The async face's tasks are one per call, made on the call's loop (its task executor)
/// as the connection is accepted, and tracked by the server; they are not children of
/// the task in ``serve()``: a task group's child can only be added by the task that
/// owns the group, so each accepted call would first hop from its loop to that task and
/// back, and the server could serve only while someone waits in ``serve()``. Per
/// message nothing changes either way: the call's task runs on the call's loop.
public final class CallServer: Sendable {
    /// The listener's address (its port, when listening on port 0).
    public let localAddress: Endpoint
    private let listener: any Listener
    let calls: CallSet
    /// The clients' connections.
    let connections: ServerConnections
    /// Whether a lifecycle the server is registered with is suspended: new streams are
    /// refused until it resumes (CallServer+Lifecycle.swift).
    let suspension = ServerSuspension()

    /// How each call is served: by a handler on the loop, or by a task running `serve`.
    enum Serving: Sendable {
        case handler(@Sendable (Call) -> any CallHandler)
        case task(@Sendable (AsyncCall) async throws -> CallStatus)
    }

    /// How the server manages its clients' connections.
    public let configuration: CallServerConfiguration

    init(listener: any Listener, options: CallConfiguration, configuration: CallServerConfiguration, serving: Serving) {
        self.configuration = configuration
        self.listener = listener
        self.localAddress = listener.localAddress
        let calls = CallSet()
        self.calls = calls
        let callObserver = CallObserver(role: "server")
        let connections = ServerConnections()
        self.connections = connections
        let suspension = self.suspension
        // Each accepted connection speaks HTTP/2; each of its streams becomes a call on
        // the connection's loop, with no task hop.
        listener.acceptConnections { connection in
            guard !calls.isClosed else {
                // Accepted as the server closed: not served, as a connect after it.
                connection.close()
                return
            }
            let server = ServerConnection(connection: connection, configuration: H2Configuration(), settings: configuration) { stream in
                stream.maximumMessageSize = options.maximumMessageSize
                let call = Call(role: .server, connection: stream, options: options)
                guard !suspension.isSuspended, calls.insertIfOpen(call) else {
                    // The server closed or is suspended (its GOAWAY may not have reached
                    // the client yet): refused, so the client knows the call was not
                    // processed.
                    stream.refuse()
                    return
                }
                // The handler is made once the client's headers are read, so that it
                // sees the call's method and metadata (Call.start(makeHandler:)).
                call.start { call in
                    let handler: any CallHandler
                    switch serving {
                    case .handler(let makeHandler):
                        handler = makeHandler(call)
                    case .task(let serve):
                        let async = AsyncCall()
                        async.attach(call)
                        calls.runTask(on: call.eventLoop) { await CallServer.serveCall(async, with: serve) }
                        handler = async
                    }
                    return ForwardingCallHandler(handler) { call, status in
                        stream.deadline?.disarm()
                        calls.remove(call)
                        callObserver.ended(call, status: status, logger: options.logger)
                    }
                }
                // The request's deadline (ServerDeadline.swift); none, and no timer, without
                // a `grpc-timeout`.
                stream.deadline?.arm(call)
            } onClose: { closed in
                connections.remove(closed)
            }
            guard connections.insertIfOpen(server) else {
                connection.close()
                return
            }
            server.start()
        }
    }

    /// Listens on `endpoint` with `transport` and the default ``CallServerConfiguration``;
    /// each call's events go to the handler `makeHandler` returns for it.
    public static func start(
        transport: any Transport, on endpoint: Endpoint, options: CallConfiguration = CallConfiguration(),
        makeHandler: @escaping @Sendable (Call) -> any CallHandler
    ) async throws -> CallServer {
        try await start(transport: transport, on: endpoint, options: options, configuration: CallServerConfiguration(), makeHandler: makeHandler)
    }

    /// Listens on `endpoint` with the default ``CallServerConfiguration``; each call runs
    /// `serve` in a task of its own on the call's event loop.
    public static func start(
        transport: any Transport, on endpoint: Endpoint, options: CallConfiguration = CallConfiguration(),
        serve: @escaping @Sendable (AsyncCall) async throws -> CallStatus
    ) async throws -> CallServer {
        try await start(transport: transport, on: endpoint, options: options, configuration: CallServerConfiguration(), serve: serve)
    }

    /// Listens on `endpoint` with `transport`; each call's events go to the handler
    /// `makeHandler` returns for it. `options` apply to each call, `configuration` to
    /// each client's connection (keepalive, maximum age and idle time).
    /// - Throws: `invalidArgument`, reason `invalid option`, for options or a
    ///   configuration out of range (``CallServerConfiguration/validate()``); what the
    ///   transport's `listen(on:)` throws.
    public static func start(
        transport: any Transport, on endpoint: Endpoint, options: CallConfiguration = CallConfiguration(),
        configuration: CallServerConfiguration,
        makeHandler: @escaping @Sendable (Call) -> any CallHandler
    ) async throws -> CallServer {
        try options.validate()
        try configuration.validate()
        let listener = try await transport.listen(on: endpoint)
        return CallServer(listener: listener, options: options, configuration: configuration, serving: .handler(makeHandler))
    }

    /// Listens on `endpoint`; each call runs `serve` in a task of its own on the call's
    /// event loop (its task executor). The call ends with the status `serve` returns, or
    /// with the `TransportError` it throws (any other error ends it with `unknown`).
    /// The tasks belong to the server: see Lifetime above. `configuration` applies to
    /// each client's connection, as in ``start(transport:on:options:configuration:makeHandler:)``.
    public static func start(
        transport: any Transport, on endpoint: Endpoint, options: CallConfiguration = CallConfiguration(),
        configuration: CallServerConfiguration,
        serve: @escaping @Sendable (AsyncCall) async throws -> CallStatus
    ) async throws -> CallServer {
        try options.validate()
        try configuration.validate()
        let listener = try await transport.listen(on: endpoint)
        return CallServer(listener: listener, options: options, configuration: configuration, serving: .task(serve))
    }

    /// One call's task: runs `serve` and ends the call with what it gave.
    static func serveCall(_ async: AsyncCall, with serve: @Sendable (AsyncCall) async throws -> CallStatus) async {
        let status: CallStatus
        do {
            status = try await serve(async)
        } catch let error as TransportError {
            status = CallStatus(error: error)
        } catch {
            status = CallStatus(error: TransportError(code: .unknown, reason: .ioError, message: "the call's handler threw \(error)"))
        }
        async.call.finish(status)
    }

    /// Calls accepted and not yet ended.
    public var openCalls: Int { calls.count }

    /// Stops accepting (new connects are refused); open calls go on. ``serve()`` returns
    /// once they ended. Idempotent.
    public func close() {
        listener.close()
        calls.stopAccepting()
        for connection in connections.close() { connection.beginGracefulShutdown() }
    }

    /// Stops accepting and ends every open call now with `cancelled`, cancelling the
    /// calls' tasks. Idempotent.
    public func closeNow() {
        listener.close()
        let (open, tasks) = calls.stopAll()
        // The connections first: their calls end `cancelled` here and `unavailable` at
        // the clients (the connection closed), not `cancelled` there by RST_STREAM.
        let cancelled = TransportError(code: .cancelled, reason: .callCancelled, message: "the call was cancelled: the server closed now")
        for connection in connections.close() { connection.close(with: cancelled) }
        for call in open { call.cancel() }
        for task in tasks { task.cancel() }
    }

    /// Waits until the server stopped: closed, every call ended, every call's task
    /// returned. Cancelling the waiting task closes the server with ``closeNow()`` (and
    /// the wait still ends only once the tasks returned).
    public func serve() async {
        await withTaskCancellationHandler {
            await calls.waitUntilStopped()
        } onCancel: {
            self.closeNow()
        }
    }
}

/// A server's open client connections.
final class ServerConnections: Sendable {
    private struct State {
        var open: [ObjectIdentifier: ServerConnection] = [:]
        var closed = false
    }
    private let state = Mutex(State())

    /// Adds `connection` unless the server closed.
    func insertIfOpen(_ connection: ServerConnection) -> Bool {
        state.withLock { state in
            if state.closed { return false }
            state.open[ObjectIdentifier(connection)] = connection
            return true
        }
    }

    func remove(_ connection: ServerConnection) {
        _ = state.withLock { $0.open.removeValue(forKey: ObjectIdentifier(connection)) }
    }

    /// Refuses new connections; returns the open ones.
    func close() -> [ServerConnection] {
        state.withLock { state in
            state.closed = true
            return Array(state.open.values)
        }
    }

    var count: Int { state.withLock { $0.open.count } }
    var all: [ServerConnection] { state.withLock { Array($0.open.values) } }
}

/// The open calls of a server or a channel, and a server's call tasks.
final class CallSet: Sendable {
    private struct State {
        var calls: [ObjectIdentifier: Call] = [:]
        var closed = false
        /// The call tasks that have not returned, by number; nil until the task is made.
        var tasks: [UInt64: Task<Void, Never>?] = [:]
        var nextTask: UInt64 = 0
        /// Whether the tasks were cancelled (a task made after that is cancelled at once).
        var cancelled = false
        /// Waiting in ``waitUntilStopped()``.
        var waiters: [CheckedContinuation<Void, Never>] = []

        var stopped: Bool { closed && calls.isEmpty && tasks.isEmpty }

        /// The waiters to resume, if the set just stopped.
        mutating func takeWaitersIfStopped() -> [CheckedContinuation<Void, Never>] {
            guard stopped, !waiters.isEmpty else { return [] }
            defer { waiters = [] }
            return waiters
        }
    }
    private let state = Mutex(State())
    func insert(_ call: Call) { state.withLock { $0.calls[ObjectIdentifier(call)] = call } }
    /// Adds `call` unless the set was closed.
    func insertIfOpen(_ call: Call) -> Bool {
        state.withLock { state in
            if state.closed { return false }
            state.calls[ObjectIdentifier(call)] = call
            return true
        }
    }
    func remove(_ call: Call) {
        let waiters = state.withLock { state in
            state.calls.removeValue(forKey: ObjectIdentifier(call))
            return state.takeWaitersIfStopped()
        }
        for waiter in waiters { waiter.resume() }
    }
    var count: Int { state.withLock { $0.calls.count } }
    var all: [Call] { state.withLock { Array($0.calls.values) } }
    var isClosed: Bool { state.withLock { $0.closed } }
    /// Refuses new calls; returns the open ones.
    func close() -> [Call] {
        let (open, waiters) = state.withLock { state in
            state.closed = true
            return (Array(state.calls.values), state.takeWaitersIfStopped())
        }
        for waiter in waiters { waiter.resume() }
        return open
    }

    /// Refuses new calls (a server's graceful close).
    func stopAccepting() { _ = close() }

    /// Refuses new calls and marks the tasks cancelled; returns the open calls and the
    /// tasks made so far (for the caller to cancel).
    func stopAll() -> ([Call], [Task<Void, Never>]) {
        let (open, tasks, waiters) = state.withLock { state in
            state.closed = true
            state.cancelled = true
            return (Array(state.calls.values), state.tasks.values.compactMap { $0 }, state.takeWaitersIfStopped())
        }
        for waiter in waiters { waiter.resume() }
        return (open, tasks)
    }

    /// Runs `body` in a task on `executor`, tracked until it returns.
    func runTask(on executor: any TaskExecutor, _ body: @escaping @Sendable () async -> Void) {
        // Counted before the task exists, so that its end cannot come before its start.
        let number = state.withLock { state in
            state.nextTask += 1
            state.tasks[state.nextTask] = .some(nil)
            return state.nextTask
        }
        let task = Task(executorPreference: executor) {
            await body()
            self.taskReturned(number)
        }
        let cancel = state.withLock { state -> Bool in
            guard state.tasks[number] != nil else { return false }  // returned already
            state.tasks[number] = task
            return state.cancelled
        }
        if cancel { task.cancel() }
    }

    private func taskReturned(_ number: UInt64) {
        let waiters = state.withLock { state in
            state.tasks.removeValue(forKey: number)
            return state.takeWaitersIfStopped()
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Call tasks that have not returned yet.
    var runningTasks: Int { state.withLock { $0.tasks.count } }

    /// Returns once the set is closed, empty, and every task returned.
    func waitUntilStopped() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let stopped = state.withLock { state in
                if state.stopped { return true }
                state.waiters.append(continuation)
                return false
            }
            if stopped { continuation.resume() }
        }
    }
}

/// Forwards a call's events to a handler and runs `onClose` first when the call ends
/// (servers and channels use it to forget their ended calls).
final class ForwardingCallHandler: CallHandler {
    let inner: any CallHandler
    let onClose: @Sendable (Call, CallStatus) -> Void
    init(_ inner: any CallHandler, onClose: @escaping @Sendable (Call, CallStatus) -> Void) {
        self.inner = inner
        self.onClose = onClose
    }
    func call(_ call: Call, didReceive message: [UInt8]) { inner.call(call, didReceive: message) }
    func callDidReceiveEnd(_ call: Call) { inner.callDidReceiveEnd(call) }
    func callDidWriteData(_ call: Call) { inner.callDidWriteData(call) }
    func call(_ call: Call, didCloseWith status: CallStatus) {
        onClose(call, status)
        inner.call(call, didCloseWith: status)
    }
}
