import Switchyard
import SwitchyardBackendKit
import Synchronization

/// The process-wide "network" every ``MemoryTransport`` shares: which listener is bound
/// to which address, and which ports are taken.
///
/// It is process-wide so that separate transports (a client transport and a server
/// transport, as the conformance kit makes them) can reach each other, as two socket
/// transports in one process reach each other through the kernel.
///
/// - Listening on port 0 takes the first free port from 49152 upward (wrapping at
///   65535), skipping ports that are taken; an explicit port that overlaps a binding
///   (same address, or a wildcard on either side) is `unavailable`/`address in use`.
/// - The client end of each connection takes an ephemeral port of its own on its local
///   address (32768 upward), released when the connection ends, so every client
///   connection has a distinct, real-looking local address.
final class MemoryNetwork: Sendable {
    /// The one network of the process.
    static let shared = MemoryNetwork()

    /// An address and port taken in the table.
    struct Binding: Hashable, Sendable {
        var host: String
        var port: Int
    }

    private struct State {
        var listeners: [Binding: MemoryListener] = [:]
        var ports = InProcessPorts()
    }
    private let state = Mutex(State())

    private init() {}

    /// Binds a listener made by `make` (given the port) to `host` and `port` (0: pick one).
    /// - Throws: `unavailable`/`address in use`, or `resourceExhausted`/`resource limit`
    ///   when no port is free.
    func bind(host: String, port: Int, make: (Int) -> MemoryListener) throws(TransportError) -> MemoryListener {
        let result: Result<MemoryListener, TransportError> = state.withLock { state in
            let chosen: Int
            do throws(TransportError) {
                chosen = try state.ports.holdListener(host: host, port: port, network: ("in-memory", "in memory"))
            } catch {
                return .failure(error)
            }
            let listener = make(chosen)
            state.listeners[Binding(host: host, port: chosen)] = listener
            return .success(listener)
        }
        return try result.get()
    }

    /// Removes `listener` from the table and frees its port.
    func unbind(_ listener: MemoryListener) {
        state.withLock { state in
            guard state.listeners[listener.binding] === listener else { return }
            state.listeners[listener.binding] = nil
            Self.free(listener.binding, in: &state)
        }
    }

    /// What a connect found: the listener, the address it reached, and the ephemeral
    /// port the client end now holds on that address.
    struct Route {
        var listener: MemoryListener
        var target: String
        var localPort: Int
    }

    /// Finds the listener for the first of `targets` that has one on `port`, and takes an
    /// ephemeral port for the client end.
    /// - Throws: `unavailable`/`refused` when nothing listens there;
    ///   `resourceExhausted`/`resource limit` when no ephemeral port is free.
    func route(to targets: [String], port: Int) throws(TransportError) -> Route {
        let result: Result<Route, TransportError> = state.withLock { state in
            for target in targets {
                var found: MemoryListener?
                for bound in [target, InProcessHost.ipv4Wildcard, InProcessHost.ipv6Wildcard] {
                    if let listener = state.listeners[Binding(host: bound, port: port)],
                       InProcessHost.covers(bound, target) {
                        found = listener
                        break
                    }
                }
                guard let listener = found else { continue }
                guard let local = state.ports.allocate(host: target, ephemeral: true) else {
                    return .failure(TransportError(
                        code: .resourceExhausted, reason: .resourceLimit,
                        message: "no free in-memory ephemeral port on \(target)"))
                }
                return .success(Route(listener: listener, target: target, localPort: local))
            }
            let shown = targets.map { Endpoint(host: $0, port: port).description }.joined(separator: ", ")
            return .failure(TransportError(
                code: .unavailable, reason: .refused, message: "nothing listens in memory on \(shown)"))
        }
        return try result.get()
    }

    /// Frees a port a connection's client end held.
    func release(_ binding: Binding) {
        state.withLock { Self.free(binding, in: &$0) }
    }

    private static func free(_ binding: Binding, in state: inout State) {
        state.ports.free(host: binding.host, port: binding.port)
    }
}
