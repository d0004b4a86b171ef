import Glibc
public import Switchyard
import Synchronization
import SwitchyardPosix

/// Resolves host names off the event loops.
///
/// Literals never reach the resolver. Names under the special-use `.invalid` top-level
/// domain fail at once without a query, as RFC 6761 section 6.4 asks of resolver
/// libraries. `localhost` and names under `.localhost` resolve to the loopback addresses,
/// `127.0.0.1` then `::1`, without a query either (RFC 6761 section 6.3: name resolution
/// APIs should always answer them with loopback addresses, never send them to DNS), so
/// they mean the same on every host whatever its `/etc/hosts` says, and a connect to
/// `localhost` reaches a server on either loopback address (``HappyEyeballs``). Other
/// names go to `getaddrinfo` on a short-lived thread of their own, so a slow resolver
/// never blocks a loop; its failure ends the connect at once with `unavailable`, reason
/// `name resolution`. A lookup ends at once with `cancelled`/`task cancelled` when the
/// calling task is cancelled (the thread finishes the query and drops its answer).
public enum HostResolver {
    /// The address a listener binds for `endpoint`: its literal, else the first address
    /// its name resolves to (every backend listens the same way).
    /// - Throws: `invalidArgument` for a malformed literal; `unavailable`/`name resolution`
    ///   when the name has no address.
    public static func listenAddress(for endpoint: Endpoint) async throws(TransportError) -> SystemSocketAddress {
        if let literal = try SystemSocketAddress(literal: endpoint) { return literal }
        guard let first = try await resolve(endpoint).first else {
            throw TransportError.nameResolution(endpoint.host, detail: "no addresses")
        }
        return first
    }

    /// The addresses for `endpoint`, in the order the resolver gives them.
    public static func resolve(_ endpoint: Endpoint) async throws(TransportError) -> [SystemSocketAddress] {
        if let literal = try SystemSocketAddress(literal: endpoint) { return [literal] }
        let host = endpoint.host
        try NameResolution.checkResolvable(host)
        let port = endpoint.port
        if NameResolution.isLocalhost(host) {
            var loopback: [SystemSocketAddress] = []
            for host in ["127.0.0.1", "::1"] {
                if let address = try SystemSocketAddress(literal: Endpoint(host: host, port: port)) { loopback.append(address) }
            }
            return loopback
        }
        let lookup = Lookup()
        let result = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Result<[SystemSocketAddress], TransportError>, Never>) in
                guard lookup.wait(continuation) else { return }
                let started = runOnNewThread(name: "sy-resolve") {
                    lookup.answer(Posix.resolve(host: host, port: port))
                }
                if !started {
                    lookup.answer(.failure(TransportError(
                        code: .resourceExhausted, reason: .resourceLimit, message: "could not start a resolver thread for '\(host)'")))
                }
            }
        } onCancel: {
            lookup.answer(.failure(TransportError(
                code: .cancelled, reason: .taskCancelled, message: "the lookup of '\(host)' was cancelled")))
        }
        return try result.get()
    }

    /// One lookup's waiter: answered once, by the resolver thread or by cancellation,
    /// whichever comes first (cancellation may come before the waiter is set).
    private final class Lookup: Sendable {
        private enum State {
            case idle
            case waiting(CheckedContinuation<Result<[SystemSocketAddress], TransportError>, Never>)
            case answered(Result<[SystemSocketAddress], TransportError>?)
        }
        private let state = Mutex(State.idle)

        /// Sets the waiter; false when an answer came first (it was resumed with it).
        func wait(_ continuation: CheckedContinuation<Result<[SystemSocketAddress], TransportError>, Never>) -> Bool {
            let early = state.withLock { state -> Result<[SystemSocketAddress], TransportError>?? in
                switch state {
                case .idle:
                    state = .waiting(continuation)
                    return .none
                case .waiting:
                    return .none
                case .answered(let result):
                    state = .answered(nil)
                    return .some(result)
                }
            }
            guard case .some(let result) = early else { return true }
            continuation.resume(returning: result ?? .failure(TransportError(code: .cancelled, reason: .taskCancelled, message: "the lookup was cancelled")))
            return false
        }

        /// Answers the lookup; later answers are dropped.
        func answer(_ result: Result<[SystemSocketAddress], TransportError>) {
            let waiter = state.withLock { state -> CheckedContinuation<Result<[SystemSocketAddress], TransportError>, Never>? in
                switch state {
                case .idle:
                    state = .answered(result)
                    return nil
                case .waiting(let continuation):
                    state = .answered(nil)
                    return continuation
                case .answered:
                    return nil
                }
            }
            waiter?.resume(returning: result)
        }
    }
}
