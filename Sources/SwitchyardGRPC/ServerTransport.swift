public import GRPCCore
public import Switchyard
import SwitchyardCalls
import Synchronization

/// GRPCCore's `ServerTransport` on a Switchyard `CallServer`: a `GRPCServer` serves the
/// RPCs of every client that connects to `address` through the `Transport` it was given
/// (any backend's, or a `TLSTransport` over one).
///
/// ```swift
/// let transport = try Backends.makeTransport(named: "libuv")
/// let server = GRPCServer(
///     transport: .switchyard(address: Endpoint(host: "127.0.0.1", port: 0), transport: transport),
///     services: [EchoService()])
/// ```
///
/// Each RPC runs GRPCCore's handler in a task of its own on its connection's event loop.
/// When the handler throws, GRPCCore writes the error as the status (its code and
/// message reach the client as they are). When an RPC ends otherwise (the client
/// cancelled it, which resets its stream; its connection broke; a suspend with policy
/// `close`; its deadline passed), the handler's `ServerContext.cancellation` is cancelled.
///
/// Deadlines: a request's `grpc-timeout` is enforced by the calls engine's server (past
/// it the client receives `deadlineExceeded`), and handed to GRPCCore as the time left,
/// under `grpc-timeout` in the request's metadata, from which GRPCCore's server derives
/// the handler's deadline. `grpc-retry-pushback-ms` in an error's metadata goes to the
/// client in the trailers, where GRPCCore's retries read it (gRFC A6).
///
/// ``beginGracefulShutdown()`` stops accepting: the listener closes, every connection says
/// GOAWAY, the RPCs in flight run to their end, new ones are refused, and
/// ``listen(streamHandler:)`` returns once they ended. Cancelling the task that runs
/// ``listen(streamHandler:)`` closes every connection and cancels every RPC at once.
///
/// With a `Lifecycle`, the listener closes on suspend and reopens on resume; what the
/// open RPCs do then is ``Config/suspendPolicy``'s choice (`close`: they end, and the
/// clients see `unavailable`, reason `closed`).
///
/// Compression (``Config/compression``, off by default): with gzip enabled, an RPC's
/// responses are compressed when its client listed gzip in `grpc-accept-encoding` (the
/// response headers say `grpc-encoding: gzip`; a message that would not get smaller goes
/// as it is, with the compressed flag 0), and go uncompressed to a client that did not.
/// gzip requests are inflated whatever the config says.
public struct SwitchyardServerTransport: ServerTransport {
    public typealias Bytes = [UInt8]

    private let core: ServerTransportCore

    /// A transport that listens on `address` with `transport`, under `lifecycle` if given,
    /// configured by `config`. Nothing happens until ``listen(streamHandler:)``.
    public init(
        address: Endpoint, transport: any Transport, lifecycle: Lifecycle? = nil,
        config: SwitchyardServerTransport.Config = .defaults
    ) {
        core = ServerTransportCore(address: address, transport: transport, lifecycle: lifecycle, config: config)
    }

    /// The address the server listens on, once it does (a port 0 resolved to the one
    /// the system chose); waits for ``listen(streamHandler:)`` to bind.
    /// - Throws: GRPCCore's `RuntimeError` `serverIsStopped` once the transport stopped or
    ///   when it could not listen (the error, a `TransportError`, as the cause).
    public var listeningAddress: Endpoint {
        get async throws { try await core.listeningAddress() }
    }

    /// Listens and hands every RPC to `streamHandler`, until ``beginGracefulShutdown()``
    /// and the end of the RPCs in flight, or until the task is cancelled (then every RPC
    /// is cancelled at once, and this returns once their handlers returned).
    /// - Throws: GRPCCore's `RuntimeError` `transportError` when the transport cannot
    ///   listen (the `TransportError` as the cause: `unavailable`/`address in use`, ...),
    ///   `serverIsAlreadyRunning` for a second call.
    public func listen(
        streamHandler: @escaping @Sendable (_ stream: RPCStream<Inbound, Outbound>, _ context: ServerContext) async -> Void
    ) async throws {
        try await core.listen(streamHandler: streamHandler)
    }

    /// Stops accepting: new RPCs are refused, the ones in flight go on (see the type).
    public func beginGracefulShutdown() {
        core.beginGracefulShutdown()
    }
}

extension ServerTransport where Self == SwitchyardServerTransport {
    /// A ``SwitchyardServerTransport`` on `address` over `transport`.
    public static func switchyard(
        address: Endpoint, transport: any Transport, lifecycle: Lifecycle? = nil,
        config: SwitchyardServerTransport.Config = .defaults
    ) -> Self {
        SwitchyardServerTransport(address: address, transport: transport, lifecycle: lifecycle, config: config)
    }
}

/// What a server transport's copies share: the call server once it listens.
final class ServerTransportCore: Sendable {
    private enum State {
        /// Not listening yet; waiting for the address. `shutdown`: asked to stop first.
        case idle(waiters: [CheckedContinuation<Endpoint, any Error>], shutdown: Bool)
        case starting(waiters: [CheckedContinuation<Endpoint, any Error>], shutdown: Bool)
        case listening(CallServer)
        case stopped(failure: TransportError?)
    }
    private let state = Mutex(State.idle(waiters: [], shutdown: false))
    let address: Endpoint
    let transport: any Transport
    let lifecycle: Lifecycle?
    let config: SwitchyardServerTransport.Config

    init(address: Endpoint, transport: any Transport, lifecycle: Lifecycle?, config: SwitchyardServerTransport.Config) {
        self.address = address
        self.transport = transport
        self.lifecycle = lifecycle
        self.config = config
    }

    func listeningAddress() async throws -> Endpoint {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Endpoint, any Error>) in
            let result: Result<Endpoint, any Error>? = state.withLock { state in
                switch state {
                case .idle(var waiters, let shutdown):
                    waiters.append(continuation)
                    state = .idle(waiters: waiters, shutdown: shutdown)
                    return nil
                case .starting(var waiters, let shutdown):
                    waiters.append(continuation)
                    state = .starting(waiters: waiters, shutdown: shutdown)
                    return nil
                case .listening(let server):
                    return .success(server.localAddress)
                case .stopped(let failure):
                    return .failure(Self.stoppedError(failure))
                }
            }
            if let result { continuation.resume(with: result) }
        }
    }

    private static func stoppedError(_ failure: TransportError?) -> RuntimeError {
        if let failure {
            return RuntimeError(code: .serverIsStopped, message: "the server transport could not listen: \(failure)", cause: failure)
        }
        return RuntimeError(code: .serverIsStopped, message: "the server transport has stopped")
    }

    func listen(
        streamHandler: @escaping @Sendable (RPCStream<ServerTransportInbound, ServerTransportOutbound>, ServerContext) async -> Void
    ) async throws {
        let begin = state.withLock { state -> Bool? in
            guard case .idle(let waiters, let shutdown) = state else { return nil }
            state = .starting(waiters: waiters, shutdown: shutdown)
            return !shutdown
        }
        guard let begin else {
            throw RuntimeError(code: .serverIsAlreadyRunning, message: "the server transport is listening or has listened already")
        }
        guard begin else {
            stop(failure: nil)
            return
        }
        var options = config.call
        options.enableFlowControl = true
        options.flowController = nil
        var connection = config.connection
        connection.responseCompression = config.compression.responseCompression
        let serve: @Sendable (AsyncCall) async throws -> CallStatus = { call in
            await ServerStream.serve(call, handler: streamHandler)
        }
        let server: CallServer
        do {
            if let lifecycle {
                server = try await CallServer.start(
                    transport: transport, on: address, options: options, configuration: connection, lifecycle: lifecycle,
                    policy: config.suspendPolicy, serve: serve)
            } else {
                server = try await CallServer.start(
                    transport: transport, on: address, options: options, configuration: connection, serve: serve)
            }
        } catch {
            let failure =
                error as? TransportError ?? TransportError(code: .unknown, reason: .ioError, message: "the server could not listen: \(error)")
            stop(failure: failure)
            throw RuntimeError(code: .transportError, message: "the server transport could not listen on \(address): \(failure)", cause: failure)
        }
        let (waiters, shutdown) = state.withLock { state -> ([CheckedContinuation<Endpoint, any Error>], Bool) in
            guard case .starting(let waiters, let shutdown) = state else { return ([], true) }
            state = .listening(server)
            return (waiters, shutdown)
        }
        for waiter in waiters { waiter.resume(returning: server.localAddress) }
        if shutdown { server.close() }
        // Returns once the server closed and every RPC's task returned; cancelling it
        // closes the server now.
        await server.serve()
        stop(failure: nil)
    }

    /// Stopped: waiters for the address fail.
    private func stop(failure: TransportError?) {
        let waiters = state.withLock { state -> [CheckedContinuation<Endpoint, any Error>] in
            defer { state = .stopped(failure: failure) }
            switch state {
            case .idle(let waiters, _), .starting(let waiters, _): return waiters
            case .listening, .stopped: return []
            }
        }
        for waiter in waiters { waiter.resume(throwing: Self.stoppedError(failure)) }
    }

    func beginGracefulShutdown() {
        let server = state.withLock { state -> CallServer? in
            switch state {
            case .idle(let waiters, _):
                state = .idle(waiters: waiters, shutdown: true)
                return nil
            case .starting(let waiters, _):
                state = .starting(waiters: waiters, shutdown: true)
                return nil
            case .listening(let server):
                return server
            case .stopped:
                return nil
            }
        }
        server?.close()
    }
}
