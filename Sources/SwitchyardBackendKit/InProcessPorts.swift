package import Switchyard

/// The ports of a network that lives in the process (the in-memory and the simulated
/// ones): which hosts hold each port, and where the next search for a free one starts.
///
/// A port is held per host: a listener on one address leaves the same port free on
/// another, but a wildcard holds it on every address (``InProcessHost/overlaps(_:_:)``).
/// Ports a connect or a listen on port 0 gets come from two ranges, as the kernel's do:
/// listeners from ``listenPorts``, connections' local ends from ``ephemeralPorts``, each
/// search starting after the port the range gave last, so a port just freed is not
/// handed out again at once.
package struct InProcessPorts: Sendable {
    /// Where a listen on port 0 gets its port.
    package static let listenPorts = 49152...65535
    /// Where a connection's local end gets its port.
    package static let ephemeralPorts = 32768...65535

    /// Port to the hosts that hold it (listeners and connections' local ends).
    private var taken: [Int: [String]] = [:]
    private var nextListenPort = listenPorts.lowerBound
    private var nextEphemeralPort = ephemeralPorts.lowerBound

    package init() {}

    /// Whether `port` is held on `host`, or on an address that overlaps it.
    package func isTaken(host: String, port: Int) -> Bool {
        taken[port]?.contains { InProcessHost.overlaps($0, host) } ?? false
    }

    /// Holds `port` on `host` (the caller checked ``isTaken(host:port:)``).
    package mutating func take(host: String, port: Int) {
        taken[port, default: []].append(host)
    }

    /// Holds and returns the next free port for `host`, from the listener range or the
    /// ephemeral range; `nil` when the whole range is held.
    package mutating func allocate(host: String, ephemeral: Bool) -> Int? {
        let range = ephemeral ? Self.ephemeralPorts : Self.listenPorts
        var cursor = ephemeral ? nextEphemeralPort : nextListenPort
        defer {
            if ephemeral { nextEphemeralPort = cursor } else { nextListenPort = cursor }
        }
        for _ in 0..<range.count {
            let port = cursor
            cursor = cursor == range.upperBound ? range.lowerBound : cursor + 1
            if !isTaken(host: host, port: port) {
                take(host: host, port: port)
                return port
            }
        }
        return nil
    }

    /// Holds a listener's port on `host`: `port`, or with 0 the next free one of
    /// ``listenPorts``; returns the port held. `network` names the network in the errors
    /// ("in-memory" gives "no free in-memory port ..." and "... already in use in memory").
    /// - Throws: `unavailable`/`address in use` for a port held on an overlapping
    ///   address, `resourceExhausted`/`resource limit` when no port is free.
    package mutating func holdListener(host: String, port: Int, network: (adjective: String, place: String)) throws(TransportError) -> Int {
        if port == 0 {
            guard let free = allocate(host: host, ephemeral: false) else {
                throw TransportError(
                    code: .resourceExhausted, reason: .resourceLimit,
                    message: "no free \(network.adjective) port on \(host) in \(Self.listenPorts)")
            }
            return free
        }
        if isTaken(host: host, port: port) {
            throw TransportError(
                code: .unavailable, reason: .addressInUse,
                message: "\(Endpoint(host: host, port: port)) is already in use \(network.place)")
        }
        take(host: host, port: port)
        return port
    }

    /// Lets go of `port` on `host`.
    package mutating func free(host: String, port: Int) {
        guard var hosts = taken[port], let index = hosts.firstIndex(of: host) else { return }
        hosts.remove(at: index)
        taken[port] = hosts.isEmpty ? nil : hosts
    }
}
