import Switchyard
import SwitchyardBackendKit

/// An address and port taken in a simulated network's table.
struct SimulatedBinding: Hashable {
    var host: String
    var port: Int
}

/// What a connect found: the listener, the address it reached, and the client end's
/// address (its host, with an ephemeral port it now holds).
struct SimulatedRoute {
    var listener: SimulationListener
    var target: String
    var local: SimulatedBinding
}

/// The network's listeners and ports, as the in-memory backend keeps them (listening on
/// port 0 takes the first free port from 49152 upward, each client end an ephemeral port
/// from 32768 upward, an overlapping binding is `unavailable`/`address in use`), but per
/// network, so a replay gets the same ports.
extension SimulatedNetwork {
    /// Binds a listener made by `make` (given the port) to `host` and `port` (0: pick one).
    /// - Throws: `unavailable`/`address in use`, or `resourceExhausted`/`resource limit`
    ///   when no port is free.
    func bind(host: String, port: Int, make: (Int) -> SimulationListener) throws(TransportError) -> SimulationListener {
        let result: Result<SimulationListener, TransportError> = state.withLock { state in
            let chosen: Int
            do throws(TransportError) {
                chosen = try state.ports.holdListener(host: host, port: port, network: ("simulated", "in the simulated network"))
            } catch {
                return .failure(error)
            }
            let listener = make(chosen)
            state.listeners[SimulatedBinding(host: host, port: chosen)] = listener
            return .success(listener)
        }
        let listener = try result.get()
        clock.record("listen \(listener.localAddress)")
        return listener
    }

    /// Removes `listener` from the table and frees its port.
    func unbind(_ listener: SimulationListener) {
        state.withLock { state in
            guard state.listeners[listener.binding] === listener else { return }
            state.listeners[listener.binding] = nil
            state.ports.free(host: listener.binding.host, port: listener.binding.port)
        }
    }

    /// Finds the listener for the first of `targets` that has one on `port`, and takes an
    /// ephemeral port for the client end on `clientHost` (nil: the address reached, as
    /// on loopback).
    /// - Throws: `unavailable`/`refused` when nothing listens there;
    ///   `resourceExhausted`/`resource limit` when no ephemeral port is free.
    func route(to targets: [String], port: Int, from clientHost: String?) throws(TransportError) -> SimulatedRoute {
        let result: Result<SimulatedRoute, TransportError> = state.withLock { state in
            for target in targets {
                var found: SimulationListener?
                for bound in [target, InProcessHost.ipv4Wildcard, InProcessHost.ipv6Wildcard] {
                    if let listener = state.listeners[SimulatedBinding(host: bound, port: port)],
                       InProcessHost.covers(bound, target) {
                        found = listener
                        break
                    }
                }
                guard let listener = found else { continue }
                let localHost = clientHost ?? target
                guard let local = state.ports.allocate(host: localHost, ephemeral: true) else {
                    return .failure(TransportError(
                        code: .resourceExhausted, reason: .resourceLimit,
                        message: "no free simulated ephemeral port on \(localHost)"))
                }
                return .success(SimulatedRoute(
                    listener: listener, target: target, local: SimulatedBinding(host: localHost, port: local)))
            }
            let shown = targets.map { Endpoint(host: $0, port: port).description }.joined(separator: ", ")
            return .failure(TransportError(
                code: .unavailable, reason: .refused, message: "nothing listens in the simulated network on \(shown)"))
        }
        return try result.get()
    }

    /// Frees a port a connection's client end held.
    func release(_ binding: SimulatedBinding) {
        state.withLock { $0.ports.free(host: binding.host, port: binding.port) }
    }

    /// Adds an open connection end (for the faults that act on a host's connections).
    func opened(_ end: SimulatedConnection) {
        state.withLock { state in
            end.registration = state.nextEnd
            state.ends[state.nextEnd] = end
            state.nextEnd += 1
        }
    }

    /// Removes a connection end that ended.
    func ended(_ end: SimulatedConnection) {
        state.withLock { state in
            guard let registration = end.registration else { return }
            state.ends[registration] = nil
        }
    }
}
