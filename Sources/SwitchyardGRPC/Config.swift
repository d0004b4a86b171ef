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
        /// Compression, as grpc-swift-nio-transport's: the requests' default algorithm
        /// (an RPC's `CallOptions.compression` overrides it) and the algorithms enabled.
        /// A request is compressed only with an enabled algorithm, and the enabled ones
        /// are those the server may compress responses with (`grpc-accept-encoding`).
        /// Switchyard compresses with gzip; `deflate` is sent uncompressed and not listed.
        /// Default: none. gzip responses are read whatever this says. It replaces
        /// ``call``'s `requestCompression` and `acceptedResponseCompression`.
        public var compression: Compression

        public init(channel: ChannelConfiguration, call: CallConfiguration, serviceConfig: ServiceConfig, compression: Compression) {
            self.channel = channel
            self.call = call
            self.serviceConfig = serviceConfig
            self.compression = compression
        }

        /// The config with compression off.
        public init(channel: ChannelConfiguration, call: CallConfiguration, serviceConfig: ServiceConfig) {
            self.init(channel: channel, call: call, serviceConfig: serviceConfig, compression: .defaults)
        }

        /// The client's compression: the requests' default algorithm and the algorithms
        /// enabled, in grpc-swift-nio-transport's shape.
        public struct Compression: Sendable, Hashable {
            /// The algorithm requests are compressed with when an RPC's
            /// `CallOptions.compression` says nothing; used only if enabled.
            public var algorithm: CompressionAlgorithm
            /// The algorithms requests may be compressed with, and responses too (sent
            /// as `grpc-accept-encoding`). `none` is always allowed.
            public var enabledAlgorithms: CompressionAlgorithmSet

            public init(algorithm: CompressionAlgorithm, enabledAlgorithms: CompressionAlgorithmSet) {
                self.algorithm = algorithm
                self.enabledAlgorithms = enabledAlgorithms
            }

            /// Compression off: algorithm `none`, none enabled.
            public static var defaults: Self { Self(algorithm: .none, enabledAlgorithms: .none) }

            /// The call's `requestCompression` for an RPC whose `CallOptions.compression`
            /// is `requested`.
            func requestCompression(_ requested: CompressionAlgorithm?) -> CallCompression {
                let algorithm = requested ?? self.algorithm
                return algorithm == .gzip && enabledAlgorithms.contains(.gzip) ? .gzip : .none
            }

            /// The call's `acceptedResponseCompression`.
            var acceptedResponseCompression: [CallCompression] { enabledAlgorithms.contains(.gzip) ? [.gzip] : [] }
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
        /// Compression, as grpc-swift-nio-transport's: the algorithms the server may
        /// compress responses with. An RPC's responses are compressed with gzip when it
        /// is enabled and the client listed it in `grpc-accept-encoding` (the response
        /// headers then say `grpc-encoding: gzip`); else they go uncompressed. Requests
        /// compressed with gzip are read whatever this says. Default: none. It replaces
        /// ``connection``'s `responseCompression`.
        public var compression: Compression

        public init(connection: CallServerConfiguration, call: CallConfiguration, suspendPolicy: SuspendPolicy, compression: Compression) {
            self.connection = connection
            self.call = call
            self.suspendPolicy = suspendPolicy
            self.compression = compression
        }

        /// The config with compression off.
        public init(connection: CallServerConfiguration, call: CallConfiguration, suspendPolicy: SuspendPolicy) {
            self.init(connection: connection, call: call, suspendPolicy: suspendPolicy, compression: .defaults)
        }

        /// The server's compression: the algorithms enabled for responses, in
        /// grpc-swift-nio-transport's shape.
        public struct Compression: Sendable, Hashable {
            /// The algorithms responses may be compressed with (Switchyard compresses
            /// with gzip; `deflate` is ignored). `none` is always allowed.
            public var enabledAlgorithms: CompressionAlgorithmSet

            public init(enabledAlgorithms: CompressionAlgorithmSet) {
                self.enabledAlgorithms = enabledAlgorithms
            }

            /// Compression off: none enabled.
            public static var defaults: Self { Self(enabledAlgorithms: .none) }

            /// The server's `responseCompression`.
            var responseCompression: [CallCompression] { enabledAlgorithms.contains(.gzip) ? [.gzip] : [] }
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
