import Synchronization
public import Switchyard

/// A client's way to one target: its calls are streams of one HTTP/2 connection,
/// speaking gRPC's wire (PROTOCOL-HTTP2), made with the channel's transport (so its
/// backend) when the first call starts and made again by the first call after it broke.
///
/// A channel connects lazily: nothing happens until a call starts. Calls started while
/// the connection is being made wait for it. Its ``connectivityState`` follows gRPC's
/// (`ChannelConnectionStateMachine` decides, the slot drives it): after a failed attempt
/// the channel is `transientFailure` and tries again on ``ChannelConfiguration/backoff``
/// while a wait-for-ready call (``CallConfiguration/waitForReady``) waits, and with none
/// waiting goes `idle` when the backoff ends (the next call starts the next attempt of
/// the same run); a fail-fast call fails at once with the last attempt's error. After
/// ``ChannelConfiguration/idleTimeout`` without calls the connection closes and the
/// channel is `idle` until the next call. A call to `method` carries it as the
/// request's `:path`: gRPC's `/package.Service/Method` as it is, any other method with a
/// `/` before it (a server sees the method the client gave). Calls above the server's
/// stream limit wait for a stream to end (at most
/// ``ChannelConfiguration/maximumWaitingCalls``).
///
/// A channel follows its `ConnectivityMonitor` (behaviour 2 of the design): when the
/// category changes, its connection is closed and every open call ends with
/// `unavailable`, reason `connectivity changed`; the next call connects afresh over the
/// new path. A path change within one category (the default route on another interface,
/// or an address of the path gone: `PathChange` has the rule) ends the connection on
/// the old path the same way, reason `path changed`, as soon as the monitor reports it.
/// While the category is `ConnectivityCategory/none` a new call fails at once
/// with `unavailable`, reason `no connectivity`. When the connection breaks, every call
/// on it ends `unavailable`, and the next call connects afresh; when the server says
/// GOAWAY, the calls it took go on and new ones use a new connection. A call the server
/// did not process (its stream refused with `REFUSED_STREAM`, or above the GOAWAY's last
/// stream) and that heard nothing from it is retried once, transparently, on the
/// channel's connection of the moment (gRPC's A6; ``ChannelConfiguration/retryBufferSize``).
public final class CallChannel: Sendable {
    public let target: Endpoint
    public let transport: any Transport
    public let connectOptions: ConnectOptions
    /// The monitor the channel follows, if any.
    public let monitor: (any ConnectivityMonitor)?
    public let configuration: ChannelConfiguration
    private let observation: ConnectivityObservation?
    /// Applies the monitor's changes (Channel/ChannelPathFollower.swift).
    private let pathFollower: ChannelPathFollower?

    let calls = CallSet()
    /// Whether a ``Lifecycle`` the channel is registered with is suspended (CallChannel+Lifecycle.swift).
    let suspension = ChannelSuspension()
    /// Counts and logs the calls' ends (``CallObserver``).
    let callObserver = CallObserver(role: "client")
    /// The connection calls use, and the connect under way.
    let slot: ChannelConnectionSlot

    /// A channel with the default ``ChannelConfiguration``.
    public convenience init(
        target: Endpoint, transport: any Transport, connectOptions: ConnectOptions = ConnectOptions(),
        monitor: (any ConnectivityMonitor)? = nil
    ) {
        self.init(target: target, transport: transport, connectOptions: connectOptions, monitor: monitor, configuration: ChannelConfiguration())
    }

    /// A channel to `target` whose connections `transport` makes with `connectOptions`,
    /// following `monitor` if given, using its connection as `configuration` says.
    public init(
        target: Endpoint, transport: any Transport, connectOptions: ConnectOptions = ConnectOptions(),
        monitor: (any ConnectivityMonitor)? = nil, configuration: ChannelConfiguration
    ) {
        self.target = target
        self.transport = transport
        self.connectOptions = connectOptions
        self.monitor = monitor
        self.configuration = configuration
        let slot = ChannelConnectionSlot(target: target, transport: transport, connectOptions: connectOptions, configuration: configuration)
        self.slot = slot
        guard let monitor else {
            observation = nil
            pathFollower = nil
            return
        }
        let follower = ChannelPathFollower(from: monitor.current, calls: calls, slot: slot)
        pathFollower = follower
        observation = monitor.observe { path in follower.apply(path) }
    }

    deinit {
        observation?.cancel()
        // Calls may outlive their channel: its connection closes after the last of them.
        slot.release()
    }

    /// Starts a call to `method` carrying `metadata` (sent first, in the request's
    /// headers; the server has both before its handler is made) whose events go to
    /// `handler`, connecting first if the channel has no connection. With
    /// ``CallConfiguration/timeout`` the call has a deadline from now, connect included
    /// (`CallDeadline`), sent to the server as `grpc-timeout`: past it the call ends
    /// `deadlineExceeded`, reason `timed out`.
    /// - Throws: the connect's `TransportError` (`unavailable`/`refused`, `unavailable`/
    ///   `name resolution`, `deadlineExceeded`/`connect timeout`, ...) for a fail-fast
    ///   call whose attempt failed or that starts in `transientFailure`, and for every call
    ///   when the name does not resolve (wait-for-ready ones too: DESIGN behaviour 4);
    ///   `deadlineExceeded`/`timed out` when the call's deadline passes while it waits for
    ///   a connection; `cancelled`/`task cancelled` when its task is cancelled then;
    ///   `cancelled`/`shutdown` when the channel closes then; `cancelled`/`closed` once the
    ///   channel is closed; `unavailable`/`suspended` while a `Lifecycle` it is
    ///   registered with is suspended; `invalidArgument`/`invalid option` for options out
    ///   of range (``CallConfiguration/validate()``, ``ChannelConfiguration/validate()``),
    ///   before any connect; `invalidArgument`/
    ///   `invalid metadata` for a method name over 65,535 bytes, with a space, or with a
    ///   character that is not printable ASCII, or for metadata gRPC cannot carry (a
    ///   string value that is not printable ASCII, a key gRPC keeps for itself), before
    ///   any connect.
    public func startCall(
        method: String = "", metadata: CallMetadata = CallMetadata(), options: CallConfiguration = CallConfiguration(), handler: any CallHandler
    ) async throws -> Call {
        try options.validate()
        try configuration.validate()
        if let problem = CallMetadata.problem(method: method) {
            throw TransportError(code: .invalidArgument, reason: .invalidMetadata, message: problem)
        }
        try checkOpen()
        try suspension.check()
        if let monitor {
            let path = monitor.current
            if path.category == .none {
                throw TransportError(code: .unavailable, reason: .noConnectivity, message: "no network: no interface carries a default route")
            }
            // A change the channel's observer has not heard yet ends the old path's
            // connection before this call could take it.
            pathFollower?.apply(path)
        }
        let deadline = options.timeout.map { CallDeadline(timeout: $0, clock: transport.clock) }
        // The request's fields, checked before any connect: gRPC's rules for the path
        // and metadata (printable ASCII; binary values in `-bin` keys).
        var head = slot.requestHead
        head.path = CallStreamConnection.path(forMethod: method)
        head.metadata = metadata
        if let timeout = options.timeout { head.timeout = GRPCTimeout(rounding: timeout) }
        head.encoding = options.requestCompression.encoding
        if !options.acceptedResponseCompression.isEmpty {
            var accepted = options.acceptedResponseCompression.map(\.encoding).filter { $0 != .identity }
            accepted.append(.identity)
            head.acceptEncodings = accepted
        }
        let fields = try head.fields()
        let lease = try await slot.connection(waitForReady: options.waitForReady, deadline: deadline)
        // gRPC's A6 (Channel/TransparentRetry.swift): a call the server refused unprocessed
        // starts again once, on the connection the channel has then.
        let retry = configuration.retryBufferSize > 0
            ? TransparentRetry(lease: lease, slot: slot, waitForReady: options.waitForReady, deadline: deadline, bufferSize: configuration.retryBufferSize)
            : nil
        let stream = CallStreamConnection(
            client: lease.connection, requestFields: fields, requestEncoding: head.encoding, maximumMessageSize: options.maximumMessageSize, retry: retry)
        let call = Call(role: .client, connection: stream, options: options, method: method, metadata: metadata)
        let callObserver = self.callObserver
        let slot = self.slot
        let tracked = ForwardingCallHandler(handler) { [weak self] call, status in
            deadline?.disarm()
            callObserver.ended(call, status: status, logger: options.logger)
            self?.forget(call)
            slot.callEnded(on: retry?.leaseID ?? lease.id)
        }
        guard calls.insertIfOpen(call) else {
            slot.callEnded(on: lease.id)
            throw TransportError(code: .cancelled, reason: .closed, message: "the channel to \(target) is closed")
        }
        if let refusal = suspension.refusal {
            // Suspended while connecting: the suspend may have missed this call.
            forget(call)
            slot.callEnded(on: lease.id)
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

    /// Ends every open call and refuses new ones; the connection closes.
    public func close() {
        for call in calls.close() { call.cancel() }
        slot.shutdown()
    }

    /// Where the channel's connection stands now (gRPC's connectivity states): `idle`
    /// until a call starts it and after ``ChannelConfiguration/idleTimeout`` without
    /// calls, `connecting`, `ready`, `transientFailure` after an attempt failed (until the
    /// next attempt, ``ChannelConfiguration/backoff``), `shutdown` after ``close()``.
    public var connectivityState: ChannelConnectivityState { slot.connectivityState }

    /// The channel's state now, then each change, in order (each subscriber gets its
    /// own sequence, starting with the state at the moment it subscribed). The sequence
    /// finishes after `shutdown`, or when the channel is deinitialized.
    public var connectivityStates: AsyncStream<ChannelConnectivityState> { slot.connectivityStates() }

    private func checkOpen() throws {
        if calls.isClosed {
            throw TransportError(code: .cancelled, reason: .closed, message: "the channel to \(target) is closed")
        }
    }

    private func forget(_ call: Call) {
        calls.remove(call)
    }
}
