import Synchronization

/// Accepts calls on a listener and hands each to a handler.
///
/// Every accepted connection carries one call. A connection that breaks the protocol
/// (an oversized, truncated or garbage frame) ends its own call and is closed; the
/// server keeps serving everyone else.
public final class CallServer: Sendable {
    /// The listener's address (its port, when listening on port 0).
    public let localAddress: Endpoint
    private let listener: any Listener
    let calls: CallSet

    init(listener: any Listener, options: CallOptions, makeHandler: @escaping @Sendable (Call) -> any CallHandler) {
        self.listener = listener
        self.localAddress = listener.localAddress
        let calls = CallSet()
        self.calls = calls
        let callObserver = CallObserver(role: "server")
        // Each accepted connection becomes a call on its own loop, with no task hop.
        listener.acceptConnections { connection in
            let call = Call(role: .server, connection: connection, options: options)
            calls.insert(call)
            call.start(handler: ForwardingCallHandler(makeHandler(call)) { call, status in
                calls.remove(call)
                callObserver.ended(call, status: status, logger: options.logger)
            })
        }
    }

    /// Listens on `endpoint` with `transport`; each call's events go to the handler
    /// `makeHandler` returns for it.
    public static func start(
        transport: any Transport, on endpoint: Endpoint, options: CallOptions = CallOptions(),
        makeHandler: @escaping @Sendable (Call) -> any CallHandler
    ) async throws -> CallServer {
        try options.validate()
        let listener = try await transport.listen(on: endpoint)
        return CallServer(listener: listener, options: options, makeHandler: makeHandler)
    }

    /// Listens on `endpoint`; each call runs `serve` on the call's event loop (its task
    /// executor). The call ends with the status `serve` returns, or with the
    /// ``TransportError`` it throws (any other error ends it with `unknown`).
    public static func start(
        transport: any Transport, on endpoint: Endpoint, options: CallOptions = CallOptions(),
        serve: @escaping @Sendable (AsyncCall) async throws -> CallStatus
    ) async throws -> CallServer {
        try await start(transport: transport, on: endpoint, options: options, makeHandler: asyncHandler(serve))
    }

    /// The handler maker that runs `serve` for each call on the call's event loop.
    static func asyncHandler(
        _ serve: @escaping @Sendable (AsyncCall) async throws -> CallStatus
    ) -> @Sendable (Call) -> any CallHandler {
        { call in
            let async = AsyncCall()
            async.attach(call)
            Task(executorPreference: call.eventLoop) {
                let status: CallStatus
                do {
                    status = try await serve(async)
                } catch let error as TransportError {
                    status = CallStatus(error: error)
                } catch {
                    status = CallStatus(error: TransportError(code: .unknown, reason: .ioError, message: "the call's handler threw \(error)"))
                }
                call.finish(status)
            }
            return async
        }
    }

    /// Calls accepted and not yet ended.
    public var openCalls: Int { calls.count }

    /// Stops accepting (new connects are refused); open calls go on.
    public func close() {
        listener.close()
    }

    /// Stops accepting and cancels every open call.
    public func closeNow() {
        close()
        for call in calls.all { call.cancel() }
    }
}

/// The open calls of a server or a channel.
final class CallSet: Sendable {
    private struct State {
        var calls: [ObjectIdentifier: Call] = [:]
        var closed = false
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
    func remove(_ call: Call) { _ = state.withLock { $0.calls.removeValue(forKey: ObjectIdentifier(call)) } }
    var count: Int { state.withLock { $0.calls.count } }
    var all: [Call] { state.withLock { Array($0.calls.values) } }
    var isClosed: Bool { state.withLock { $0.closed } }
    /// Refuses new calls; returns the open ones.
    func close() -> [Call] {
        state.withLock { state in
            state.closed = true
            return Array(state.calls.values)
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
