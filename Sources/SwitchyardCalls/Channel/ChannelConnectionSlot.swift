import Synchronization
import Switchyard
import SwitchyardHTTP2

/// A channel's connection: the one its calls use, made by the first call that finds
/// none (the calls that start meanwhile wait for the same connect), and forgotten when
/// it goes away, breaks, or the network under it changes, so that the next call makes a
/// new one.
final class ChannelConnectionSlot: Sendable {
    let target: Endpoint
    let transport: any Transport
    let configuration: ChannelConfiguration
    /// The request head every call starts from: scheme and authority.
    let requestHead: GRPCRequestHead
    /// The keepalive of the channel's connections (nil: none).
    let keepalive: ChannelKeepalive?

    private struct State {
        var current: ChannelConnection?
        var connecting: Task<ChannelConnection, any Error>?
    }
    private let state = Mutex(State())

    init(target: Endpoint, transport: any Transport, configuration: ChannelConfiguration) {
        self.target = target
        self.transport = transport
        self.configuration = configuration
        self.keepalive = configuration.keepalive.map(ChannelKeepalive.init)
        let authority = configuration.authority ?? (target.path != nil ? "localhost" : target.description)
        self.requestHead = GRPCRequestHead(scheme: configuration.scheme, path: "/", authority: authority, acceptEncodings: [])
    }

    /// The connection a new call uses: the current one, or the connect under way, or a
    /// new connect with `options`.
    func connection(options: ConnectOptions) async throws -> ChannelConnection {
        let task: Task<ChannelConnection, any Error> = state.withLock { state in
            if let current = state.current, current.isUsable {
                return Task { current }
            }
            if let connecting = state.connecting { return connecting }
            let connecting = Task { try await self.connect(options: options) }
            state.connecting = connecting
            return connecting
        }
        return try await task.value
    }

    private func connect(options: ConnectOptions) async throws -> ChannelConnection {
        let made: ChannelConnection
        do {
            let connection = try await transport.connect(to: target, options: options)
            made = ChannelConnection(
                connection: connection, configuration: H2Configuration(),
                maximumWaitingStreams: configuration.maximumWaitingCalls, keepalive: keepalive
            ) { [weak self] unusable in
                self?.forget(unusable)
            }
        } catch {
            state.withLock { $0.connecting = nil }
            throw error
        }
        state.withLock { state in
            state.connecting = nil
            state.current = made
        }
        made.start()
        return made
    }

    /// `connection` can take no new call.
    private func forget(_ connection: ChannelConnection) {
        state.withLock { state in
            if state.current === connection { state.current = nil }
        }
    }

    /// Closes the current connection with `error` if `isOnChangedPath` says its local
    /// address is on a path that changed (or always, for the channel's close).
    func drop(with error: TransportError?, where isOnChangedPath: (Endpoint) -> Bool) {
        let dropped: ChannelConnection? = state.withLock { state in
            guard let current = state.current, isOnChangedPath(current.localAddress) else { return nil }
            state.current = nil
            return current
        }
        dropped?.close(with: error)
    }

    /// The channel is gone: the current connection closes once its calls ended.
    func release() {
        let current = state.withLock { state in
            defer { state.current = nil }
            return state.current
        }
        current?.closeWhenIdle()
    }
}
