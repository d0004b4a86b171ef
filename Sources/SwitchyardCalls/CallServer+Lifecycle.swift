import Synchronization
public import Switchyard

extension CallServer {
    /// ``start(transport:on:options:configuration:lifecycle:policy:makeHandler:)`` with the
    /// default ``CallServerConfiguration``.
    public static func start(
        transport: any Transport, on endpoint: Endpoint, options: CallConfiguration = CallConfiguration(),
        lifecycle: Lifecycle, policy: SuspendPolicy,
        makeHandler: @escaping @Sendable (Call) -> any CallHandler
    ) async throws -> CallServer {
        try await start(
            transport: transport, on: endpoint, options: options, configuration: CallServerConfiguration(), lifecycle: lifecycle,
            policy: policy, makeHandler: makeHandler)
    }

    /// ``start(transport:on:options:configuration:lifecycle:policy:serve:)`` with the
    /// default ``CallServerConfiguration``.
    public static func start(
        transport: any Transport, on endpoint: Endpoint, options: CallConfiguration = CallConfiguration(),
        lifecycle: Lifecycle, policy: SuspendPolicy,
        serve: @escaping @Sendable (AsyncCall) async throws -> CallStatus
    ) async throws -> CallServer {
        try await start(
            transport: transport, on: endpoint, options: options, configuration: CallServerConfiguration(), lifecycle: lifecycle,
            policy: policy, serve: serve)
    }

    /// Listens on `endpoint` with `transport` on a listener `lifecycle` closes on suspend
    /// and reopens on resume (`Lifecycle/listen(on:using:options:)`); each call's events
    /// go to the handler `makeHandler` returns for it. Under `policy` `SuspendPolicy/close`
    /// the calls open after a suspend's grace phase end with `unavailable`, reason
    /// `suspended`, and the clients' connections are closed (their calls end
    /// `unavailable`); under `SuspendPolicy/keep` the calls go on, and the connections
    /// say GOAWAY, so that a new call needs a new connection, which is refused until
    /// the resume. The registration ends with ``close()``.
    /// - Throws: what `Lifecycle/listen(on:using:options:)` throws.
    public static func start(
        transport: any Transport, on endpoint: Endpoint, options: CallConfiguration = CallConfiguration(),
        configuration: CallServerConfiguration,
        lifecycle: Lifecycle, policy: SuspendPolicy,
        makeHandler: @escaping @Sendable (Call) -> any CallHandler
    ) async throws -> CallServer {
        try await start(
            transport: transport, on: endpoint, options: options, configuration: configuration, lifecycle: lifecycle, policy: policy,
            serving: .handler(makeHandler))
    }

    /// Listens as ``start(transport:on:options:configuration:lifecycle:policy:makeHandler:)`` does; each
    /// call runs `serve` on the call's event loop, as in
    /// ``start(transport:on:options:configuration:serve:)``.
    public static func start(
        transport: any Transport, on endpoint: Endpoint, options: CallConfiguration = CallConfiguration(),
        configuration: CallServerConfiguration,
        lifecycle: Lifecycle, policy: SuspendPolicy,
        serve: @escaping @Sendable (AsyncCall) async throws -> CallStatus
    ) async throws -> CallServer {
        try await start(
            transport: transport, on: endpoint, options: options, configuration: configuration, lifecycle: lifecycle, policy: policy,
            serving: .task(serve))
    }

    private static func start(
        transport: any Transport, on endpoint: Endpoint, options: CallConfiguration, configuration: CallServerConfiguration,
        lifecycle: Lifecycle, policy: SuspendPolicy, serving: Serving
    ) async throws -> CallServer {
        try options.validate()
        try configuration.validate()
        let listener = try await lifecycle.listen(on: endpoint, using: transport)
        let server = CallServer(listener: listener, options: options, configuration: configuration, serving: serving)
        lifecycle.add(CallServerParticipant(server, policy: policy, listener: listener))
        return server
    }
}

/// Whether a call server's lifecycle is suspended: it refuses new streams meanwhile.
final class ServerSuspension: Sendable {
    private let state = Mutex(false)
    var isSuspended: Bool { state.withLock { $0 } }
    func set(_ suspended: Bool) { state.withLock { $0 = suspended } }
}

/// A call server as a lifecycle participant: ends its calls under `.close`. Holds the
/// server weakly; gone once its listener closed for good.
final class CallServerParticipant: LifecycleParticipant {
    private struct State { weak var server: CallServer? }
    private let state: Mutex<State>
    private let policy: SuspendPolicy
    private let listener: SuspendableListener

    init(_ server: CallServer, policy: SuspendPolicy, listener: SuspendableListener) {
        self.state = Mutex(State(server: server))
        self.policy = policy
        self.listener = listener
    }

    func lifecycleSuspend(_ error: TransportError) -> Bool {
        guard let server = state.withLock({ $0.server }) else { return true }
        server.suspension.set(true)
        guard policy.closes else {
            // The calls go on; new ones must wait for the resume: GOAWAY sends them to a
            // new connection, which the closed listener refuses.
            for connection in server.connections.all { connection.beginGracefulShutdown() }
            return true
        }
        var error = error
        error.message = "the call ended: \(error.message)"
        // The connections first: their calls end with `error` here, and `unavailable` at
        // the clients (the connection closed), not `cancelled` by RST_STREAM.
        for connection in server.connections.all { connection.close(with: error) }
        for call in server.calls.all { call.terminate(with: error) }
        return true
    }

    func lifecycleDidResume() async {
        state.withLock { $0.server }?.suspension.set(false)
    }

    func lifecycleUnregistered() {
        state.withLock { $0.server }?.suspension.set(false)
    }

    var lifecycleIsGone: Bool { state.withLock { $0.server == nil } || listener.lifecycleIsGone }
}
