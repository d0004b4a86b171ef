public import GRPCCore
public import Switchyard
public import SwitchyardCalls
import Synchronization

/// GRPCCore's `ClientTransport` on a Switchyard `CallChannel`: a `GRPCClient`'s RPCs are
/// streams of one HTTP/2 connection to `target`, made with the `Transport` it was given
/// (any backend's, or a `TLSTransport` over one).
///
/// ```swift
/// let transport = try Backends.makeTransport(named: "bsd")
/// try await withGRPCClient(
///     transport: .switchyard(target: Endpoint(host: "127.0.0.1", port: 50051), transport: transport)
/// ) { client in
///     // stubs over `client`
/// }
/// ```
///
/// The channel connects when the first RPC starts and again after its connection broke,
/// with gRPC's backoff and keepalive (``Config/channel``). It follows `monitor`: when
/// the network's category changes (Wi-Fi to cellular), or the path within it, its
/// connection is closed, and every open RPC ends with `RPCError` `unavailable`, its
/// message naming the change (`connectivity changed: ...`, `path changed: ...`); the
/// next RPC connects afresh over the new path (and a retry policy for `unavailable`
/// retries the RPC that the change ended).
///
/// Each RPC's error is the call's status (``Config`` and the status mapping): the code
/// a server sent, or the code of what Switchyard saw (`unavailable` when the connection
/// broke, stalled or the connectivity changed; `deadlineExceeded` past the RPC's
/// `CallOptions.timeout`; `cancelled` when the caller's task was cancelled, which resets
/// the RPC's HTTP/2 stream), with the reason before the message. A name that does not
/// resolve fails the RPC at once with `unavailable`, wait-for-ready or not.
///
/// Compression (``Config/compression``, off by default): an RPC's requests are compressed
/// with its `CallOptions.compression`, or the config's algorithm, when that is gzip and
/// enabled (`grpc-encoding: gzip`; a message that would not get smaller goes as it is,
/// with the compressed flag 0); the enabled algorithms are listed in
/// `grpc-accept-encoding` for the server's responses. gzip responses are inflated
/// whatever the config says; other algorithms (`deflate`) are not used.
///
/// With a `Lifecycle`, the channel is registered with it: after a suspend's grace phase
/// its open RPCs end with `unavailable` (message `... suspended ...`), new ones fail with
/// `unavailable` at once until the resume ends, and the first RPC after it connects
/// afresh.
///
/// Stalls: a connection that stops making progress ends its RPCs with `unavailable`
/// (`stalled: ...`) once the `Transport` given detects it, within its
/// `TransportConfiguration.stallTimeout` (set it on the transport; without one the kernel
/// notices after about 15 minutes). Keepalive (``Config/channel``) finds a silent peer
/// on an idle connection as well.
///
/// ``connect()`` runs until ``beginGracefulShutdown()``, then returns once the open RPCs
/// ended; after that the channel is closed. Cancelling the task that runs ``connect()``
/// ends every open RPC (`cancelled`) and closes the channel.
public struct SwitchyardClientTransport: ClientTransport {
    public typealias Bytes = [UInt8]

    private let core: ClientTransportCore

    /// A transport whose RPCs go to `target` over connections that `transport` makes with
    /// `connectOptions`, following `monitor` and registered with `lifecycle` if given,
    /// configured by `config`.
    public init(
        target: Endpoint, transport: any Transport, connectOptions: ConnectOptions = ConnectOptions(),
        monitor: (any ConnectivityMonitor)? = nil, lifecycle: Lifecycle? = nil,
        config: SwitchyardClientTransport.Config = .defaults
    ) {
        var channelConfiguration = config.channel
        if transport is any SecureTransport, channelConfiguration.scheme == "http" {
            channelConfiguration.scheme = "https"
        }
        let channel = CallChannel(
            target: target, transport: transport, connectOptions: connectOptions, monitor: monitor, configuration: channelConfiguration)
        core = ClientTransportCore(channel: channel, config: config, lifecycle: lifecycle)
    }

    /// The channel the RPCs run on (its connectivity state, its open calls).
    public var channel: CallChannel { core.channel }

    public var retryThrottle: RetryThrottle? { core.retryThrottle }

    /// Runs until ``beginGracefulShutdown()`` and the open RPCs ended, then closes the
    /// channel. The channel connects on demand, not here. Cancelling the task ends
    /// every open RPC and closes the channel at once.
    public func connect() async throws {
        await core.run()
    }

    /// Refuses new RPCs (`RPCError` `failedPrecondition`); open ones go on, and
    /// ``connect()`` returns once they ended.
    public func beginGracefulShutdown() {
        core.beginGracefulShutdown()
    }

    /// Opens a stream for `descriptor` with `options` and runs `closure` with it; the
    /// stream's call is cancelled when `closure` returns before it ended, and when the
    /// task is cancelled.
    /// - Throws: `RPCError` `failedPrecondition` after ``beginGracefulShutdown()``; what
    ///   `closure` throws.
    public func withStream<T: Sendable>(
        descriptor: MethodDescriptor, options: CallOptions,
        _ closure: (_ stream: RPCStream<Inbound, Outbound>, _ context: ClientContext) async throws -> T
    ) async throws -> T {
        try core.open()
        defer { core.close() }
        var callOptions = core.config.call
        callOptions.enableFlowControl = true
        callOptions.flowController = nil
        if let timeout = options.timeout { callOptions.timeout = timeout }
        if let waitForReady = options.waitForReady { callOptions.waitForReady = waitForReady }
        if let maximum = options.maxResponseMessageBytes { callOptions.maximumMessageSize = maximum }
        callOptions.requestCompression = core.config.compression.requestCompression(options.compression)
        callOptions.acceptedResponseCompression = core.config.compression.acceptedResponseCompression
        let stream = ClientStream(
            channel: core.channel, method: "/" + descriptor.fullyQualifiedMethod, options: callOptions,
            maximumRequestMessageBytes: options.maxRequestMessageBytes)
        let rpcStream = RPCStream(
            descriptor: descriptor, inbound: RPCAsyncSequence(wrapping: ClientInbound(stream: stream)),
            outbound: RPCWriter.Closable(wrapping: ClientOutbound(stream: stream)))
        let context = ClientContext(descriptor: descriptor, remotePeer: core.remotePeer, localPeer: "unknown")
        defer { stream.cancel() }
        return try await withTaskCancellationHandler {
            try await closure(rpcStream, context)
        } onCancel: {
            stream.cancel()
        }
    }

    /// The method config the service config (``Config/serviceConfig``) has for
    /// `descriptor`: its own, its service's, or the default one; nil for none.
    public func config(forMethod descriptor: MethodDescriptor) -> MethodConfig? {
        core.methodConfigs.config(for: descriptor)
    }
}

extension ClientTransport where Self == SwitchyardClientTransport {
    /// A ``SwitchyardClientTransport`` to `target` over `transport`.
    public static func switchyard(
        target: Endpoint, transport: any Transport, connectOptions: ConnectOptions = ConnectOptions(),
        monitor: (any ConnectivityMonitor)? = nil, lifecycle: Lifecycle? = nil,
        config: SwitchyardClientTransport.Config = .defaults
    ) -> Self {
        SwitchyardClientTransport(
            target: target, transport: transport, connectOptions: connectOptions, monitor: monitor, lifecycle: lifecycle,
            config: config)
    }
}

/// What a client transport's copies share: the channel, the RPCs open on it, and the
/// shutdown.
final class ClientTransportCore: Sendable {
    let channel: CallChannel
    let config: SwitchyardClientTransport.Config
    let methodConfigs: MethodConfigLookup
    let retryThrottle: RetryThrottle?
    /// The target as gRPC names a peer (`ipv4:127.0.0.1:50051`).
    let remotePeer: String
    /// The channel's place in the lifecycle it was given; cancelled once it closed.
    private let registration: LifecycleRegistration?

    private struct State {
        var open = 0
        var shuttingDown = false
        /// ``run()`` waiting for the shutdown to drain.
        var waiter: CheckedContinuation<Void, Never>?
    }
    private let state = Mutex(State())

    init(channel: CallChannel, config: SwitchyardClientTransport.Config, lifecycle: Lifecycle?) {
        self.channel = channel
        registration = lifecycle?.register(channel)
        self.config = config
        methodConfigs = MethodConfigLookup(config.serviceConfig)
        retryThrottle = config.serviceConfig.retryThrottling.map { RetryThrottle(policy: $0) }
        remotePeer = channel.target.grpcPeer
    }

    /// Counts a new stream, unless shutting down.
    func open() throws(RPCError) {
        let refused = state.withLock { state -> Bool in
            if state.shuttingDown { return true }
            state.open += 1
            return false
        }
        if refused {
            throw RPCError(code: .failedPrecondition, message: "the client transport to \(channel.target) is shutting down: it opens no new stream")
        }
    }

    /// A stream ended.
    func close() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            state.open -= 1
            guard state.shuttingDown, state.open == 0 else { return nil }
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }

    func beginGracefulShutdown() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            state.shuttingDown = true
            guard state.open == 0 else { return nil }
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }

    /// Waits for the shutdown to drain, then closes the channel.
    func run() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let drained = state.withLock { state -> Bool in
                    if state.shuttingDown, state.open == 0 { return true }
                    state.waiter = continuation
                    return false
                }
                if drained { continuation.resume() }
            }
        } onCancel: {
            // Ends the open calls; the RPCs see `cancelled` and their streams close.
            self.channel.cancelAll()
            self.beginGracefulShutdown()
        }
        channel.close()
        registration?.cancel()
    }
}

extension Endpoint {
    /// The endpoint as gRPC names a peer: `ipv4:127.0.0.1:50051`, `ipv6:[::1]:50051`,
    /// `unix:/path`, `dns:host:port`.
    var grpcPeer: String {
        switch hostKind {
        case .ipv4: "ipv4:\(host):\(port)"
        case .ipv6: "ipv6:[\(host)]:\(port)"
        case .path: "unix:\(path ?? "")"
        default: "dns:\(host):\(port)"
        }
    }
}
