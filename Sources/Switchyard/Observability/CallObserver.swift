public import CoreMetrics
public import Logging
import Synchronization

/// What channels and call servers report when a call ends: one log line to the call's
/// ``CallConfiguration/logger`` and one count, never anything per message.
///
/// Log (debug, like swift-nio and grpc-swift: a failed call is the caller's to report):
///
/// | level | message | metadata |
/// | --- | --- | --- |
/// | debug | `call ended` | `switchyard.call.role` (`client`, `server`), `switchyard.call.status` (`ok` or the error's code), `switchyard.reason` and `switchyard.error` for a failed call, `switchyard.peer`, `switchyard.connection_id` |
///
/// Metrics:
///
/// | name | kind | dimensions |
/// | --- | --- | --- |
/// | `switchyard_calls_total` | counter | `role` (`client`, `server`), `status` (`ok`, or the error's code: `unavailable`, `cancelled`, `deadlineExceeded`, ...) |
///
/// The counters are made once per status met, for the channel's or server's life.
public final class CallObserver: Sendable {
    /// The side of the calls.
    public let role: String
    private let factory: any MetricsFactory
    private let counters = Mutex<[String: Counter]>([:])

    /// An observer of `role`'s calls (`client` or `server`), counting with `factory`
    /// (the task's or the bootstrapped one by default, read once, here).
    public init(role: String, factory: any MetricsFactory = MetricsSystem.factory) {
        self.role = role
        self.factory = factory
    }

    /// `call` ended with `status`: counts it and logs `call ended` to `logger`.
    public func ended(_ call: Call, status: CallStatus, logger: Logger) {
        let code = status.error.map { "\($0.code)" } ?? "ok"
        counter(code).increment()
        logger.debug("call ended", metadata: {
            var metadata: Logger.Metadata = [
                "switchyard.call.role": .string(role), "switchyard.call.status": .string(code),
                "switchyard.peer": "\(call.connection.remoteAddress)",
                "switchyard.connection_id": .string(ConnectionLogID.of(call.connection)),
            ]
            if let error = status.error {
                metadata["switchyard.reason"] = .string(error.reason.name)
                metadata["switchyard.error"] = .string(error.message)
            }
            return metadata
        }())
    }

    private func counter(_ status: String) -> Counter {
        counters.withLock { counters in
            if let counter = counters[status] { return counter }
            let counter = Counter(label: "switchyard_calls_total", dimensions: [("role", role), ("status", status)], factory: factory)
            counters[status] = counter
            return counter
        }
    }
}
