public import GRPCCore
public import Switchyard
public import SwitchyardCalls

extension SwitchyardClientTransport {
    /// How a ``SwitchyardClientTransport`` uses its channel, and what each RPC starts from,
    /// in GRPCCore's style: `.defaults`, or `.defaults { $0.channel.idleTimeout = nil }`.
    public struct Config: Sendable {
        /// The channel's options (`ChannelConfiguration`): its connection backoff,
        /// keepalive, idle timeout, the calls that may wait for a stream, the requests'
        /// `:authority` and `:scheme`. A `scheme` left at `http` is sent as `https` when
        /// the transport is a `SecureTransport` (a `TLSTransport`, say).
        public var channel: ChannelConfiguration
        /// What every RPC's call starts from (`CallConfiguration`): its largest message,
        /// wait-for-ready, its logger. An RPC's `CallOptions` override the timeout,
        /// wait-for-ready and the largest response message. Flow control is always on:
        /// a response message is read from the network only once GRPCCore asks for it.
        public var call: CallConfiguration
        /// The service config: per-method timeouts, wait-for-ready, message limits and
        /// retry or hedging policies (GRPCCore asks for them with `config(forMethod:)`),
        /// and the retry throttle.
        public var serviceConfig: ServiceConfig

        public init(channel: ChannelConfiguration, call: CallConfiguration, serviceConfig: ServiceConfig) {
            self.channel = channel
            self.call = call
            self.serviceConfig = serviceConfig
        }

        /// The defaults: the channel's and the call's own, and an empty service config.
        public static var defaults: Self { defaults() }

        /// The defaults, changed by `configure`.
        public static func defaults(configure: (_ config: inout Self) -> Void = { _ in }) -> Self {
            var config = Self(channel: ChannelConfiguration(), call: CallConfiguration(), serviceConfig: ServiceConfig())
            configure(&config)
            return config
        }
    }
}

extension SwitchyardServerTransport {
    /// How a ``SwitchyardServerTransport`` serves, in GRPCCore's style: `.defaults`, or
    /// `.defaults { $0.connection.maximumConnectionIdle = .seconds(60) }`.
    public struct Config: Sendable {
        /// How the server manages its clients' connections (`CallServerConfiguration`):
        /// keepalive it enforces and sends, maximum connection age and idle time.
        public var connection: CallServerConfiguration
        /// What every RPC's call starts from (`CallConfiguration`): its largest message,
        /// its logger. Flow control is always on: a request message is read from the
        /// network only once the handler asks for it.
        public var call: CallConfiguration
        /// What a suspend of the lifecycle the transport was given does to open RPCs:
        /// `SuspendPolicy.close` (the default) ends them, the clients seeing `unavailable`;
        /// `SuspendPolicy.keep` lets them go on while new ones are refused until the resume.
        public var suspendPolicy: SuspendPolicy

        public init(connection: CallServerConfiguration, call: CallConfiguration, suspendPolicy: SuspendPolicy) {
            self.connection = connection
            self.call = call
            self.suspendPolicy = suspendPolicy
        }

        /// The defaults: the server's and the call's own, suspend policy `close`.
        public static var defaults: Self { defaults() }

        /// The defaults, changed by `configure`.
        public static func defaults(configure: (_ config: inout Self) -> Void = { _ in }) -> Self {
            var config = Self(connection: CallServerConfiguration(), call: CallConfiguration(), suspendPolicy: .close)
            configure(&config)
            return config
        }
    }
}
