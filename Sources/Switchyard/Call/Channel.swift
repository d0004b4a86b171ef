import Synchronization

/// A client's way to one target: it makes calls, each on a fresh connection of its own,
/// made with the channel's transport (so its backend) when the call starts.
///
/// A channel connects lazily: nothing happens until a call starts. Because each call
/// connects afresh, a call that starts after a broken connection (or after the network
/// changed) uses a new one.
///
/// A channel follows its ``ConnectivityMonitor`` (behaviour 2 of the design): when the
/// category changes, every open call ends with `unavailable`, reason `connectivity
/// changed`, and its connection is reset; the next call connects afresh over the new
/// path. A path change within one category (the default route on another interface, or
/// an address of the path gone: ``PathChange`` has the rule) ends the calls on the old
/// path the same way, reason `path changed`, as soon as the monitor reports it.
/// While the category is ``ConnectivityCategory/none`` a new call fails at once
/// with `unavailable`, reason `no connectivity`. When one call's connection breaks
/// (it ends `unavailable` without a status), the network under the channel is suspect
/// and its other open calls end the same way.
public final class CallChannel: Sendable {
    public let target: Endpoint
    public let transport: any Transport
    public let connectOptions: ConnectOptions
    /// The monitor the channel follows, if any.
    public let monitor: (any ConnectivityMonitor)?
    private let observation: ConnectivityObservation?

    let calls = CallSet()
    /// Whether a ``Lifecycle`` the channel is registered with is suspended (CallChannel+Lifecycle.swift).
    let suspension = ChannelSuspension()
    /// Counts and logs the calls' ends (``CallObserver``).
    let callObserver = CallObserver(role: "client")

    public init(
        target: Endpoint, transport: any Transport, connectOptions: ConnectOptions = ConnectOptions(),
        monitor: (any ConnectivityMonitor)? = nil
    ) {
        self.target = target
        self.transport = transport
        self.connectOptions = connectOptions
        self.monitor = monitor
        guard let monitor else {
            observation = nil
            return
        }
        let calls = self.calls
        let last = Mutex(monitor.current)
        observation = monitor.observe { path in
            let change = last.withLock { last in
                defer { last = path }
                return PathChange(from: last, to: path)
            }
            guard let error = change.error else { return }
            for call in calls.all where change.ends(connectionFrom: call.connection.localAddress) {
                call.terminate(with: error)
            }
        }
    }

    deinit {
        observation?.cancel()
    }

    /// Connects and starts a call to `method` carrying `metadata` (sent first, in one
    /// headers frame; the server has both before its handler is made) whose events go to
    /// `handler`. With
    /// ``CallConfiguration/timeout`` the call has a deadline from now, connect included
    /// (`CallDeadline`): past it the call ends `deadlineExceeded`, reason `timed out`.
    /// - Throws: the connect's ``TransportError`` (`unavailable`/`refused`, `unavailable`/
    ///   `name resolution`, `deadlineExceeded`, ...); `cancelled`/`closed` once the
    ///   channel is closed; `unavailable`/`suspended` while a ``Lifecycle`` it is
    ///   registered with is suspended; `invalidArgument`/`invalid option` for options out
    ///   of range (``CallConfiguration/validate()``), before any connect; `invalidArgument`/
    ///   `invalid metadata` for a method name over 65,535 bytes or with a control
    ///   character, before any connect.
    public func startCall(
        method: String = "", metadata: CallMetadata = CallMetadata(), options: CallConfiguration = CallConfiguration(), handler: any CallHandler
    ) async throws -> Call {
        try options.validate()
        if let problem = CallMetadata.problem(method: method) {
            throw TransportError(code: .invalidArgument, reason: .invalidMetadata, message: problem)
        }
        try checkOpen()
        try suspension.check()
        if let monitor, monitor.current.category == .none {
            throw TransportError(code: .unavailable, reason: .noConnectivity, message: "no network: no interface carries a default route")
        }
        let deadline = options.timeout.map { CallDeadline(timeout: $0) }
        let connection: any Connection
        if let deadline {
            var bounded = connectOptions
            bounded.timeout = deadline.connectTimeout(within: connectOptions.timeout)
            do {
                connection = try await transport.connect(to: target, options: bounded)
            } catch let error as TransportError where deadline.hasPassed && error.code == .deadlineExceeded {
                throw deadline.error
            }
        } else {
            connection = try await transport.connect(to: target, options: connectOptions)
        }
        let call = Call(role: .client, connection: connection, options: options, method: method, metadata: metadata)
        let callObserver = self.callObserver
        let tracked = ForwardingCallHandler(handler) { [weak self] call, status in
            deadline?.disarm()
            callObserver.ended(call, status: status, logger: options.logger)
            guard let self else { return }
            self.forget(call)
            if call.endedByBrokenConnection, let error = status.error { self.connectionBroke(error) }
        }
        guard calls.insertIfOpen(call) else {
            connection.close()
            throw TransportError(code: .cancelled, reason: .closed, message: "the channel to \(target) is closed")
        }
        if let refusal = suspension.refusal {
            // Suspended while connecting: the suspend may have missed this call.
            forget(call)
            connection.close()
            throw refusal
        }
        call.start(handler: tracked)
        deadline?.arm(call)
        return call
    }

    /// Runs `body` with an async call to `method` carrying `metadata`, on the call's event loop (it is the task's
    /// executor, so awaiting a message or a write does not hop to the global pool). The
    /// call is cancelled if `body` throws or returns before the call ended.
    public func withCall<Result: Sendable>(
        method: String = "", metadata: CallMetadata = CallMetadata(), options: CallConfiguration = CallConfiguration(),
        _ body: (AsyncCall) async throws -> Result
    ) async throws -> Result {
        let async = AsyncCall()
        let call = try await startCall(method: method, metadata: metadata, options: options, handler: async)
        async.attach(call)
        return try await withTaskExecutorPreference(call.eventLoop) {
            do {
                let result = try await body(async)
                call.cancel()
                return result
            } catch {
                call.cancel()
                throw error
            }
        }
    }

    /// Calls that have started and not yet ended.
    public var openCalls: Int { calls.count }

    /// Ends every open call with `cancelled`.
    public func cancelAll() {
        for call in calls.all { call.cancel() }
    }

    /// Ends every open call and refuses new ones.
    public func close() {
        for call in calls.close() { call.cancel() }
    }

    private func checkOpen() throws {
        if calls.isClosed {
            throw TransportError(code: .cancelled, reason: .closed, message: "the channel to \(target) is closed")
        }
    }

    /// One call's connection broke: end the others the same way.
    private func connectionBroke(_ error: TransportError) {
        for call in calls.all { call.terminate(with: error) }
    }

    private func forget(_ call: Call) {
        calls.remove(call)
    }
}
