import Switchyard

extension SimulatedNetwork {
    /// Applies `fault` now: at the current virtual time, after the events already due
    /// (with manual driving, when the test next drives the clock).
    public func inject(_ fault: SimulatedFault) {
        schedule(fault, at: now)
    }

    /// Applies `fault` at virtual time `time` (since the network was made; now if that
    /// has passed), after the events already queued for that time.
    public func schedule(_ fault: SimulatedFault, at time: Duration) {
        let fault = SimulatedFault(
            kind: fault.kind, host: Self.canonical(fault.host), port: fault.port,
            remote: fault.remote.map { Endpoint(host: Self.canonical($0.host), port: $0.port) })
        clock.enqueue({ [weak self] in self?.apply(fault) }, on: controlLoop, at: time)
    }

    /// Applies `fault`, on the network's thread.
    private func apply(_ fault: SimulatedFault) {
        clock.record("fault \(fault)")
        let host = fault.host
        switch fault.kind {
        case .blackHole:
            state.withLock { _ = $0.blackHoles.insert(host) }
        case .liftBlackHole:
            state.withLock { _ = $0.blackHoles.remove(host) }
        case .reclaimSocket:
            for end in state.withLock({ $0.ends(on: host) })
            where end.localAddress.port == fault.port && end.remoteAddress == fault.remote {
                _ = end.loop.submit { end.reclaimedBySystem(fault) }
            }
        case .rejectWithReset:
            state.withLock { _ = $0.rejecting.insert(host) }
        case .stopRejecting:
            state.withLock { _ = $0.rejecting.remove(host) }
        case .stopReading:
            state.withLock { _ = $0.notReading.insert(host) }
        case .resumeReading:
            let ends = state.withLock { state in
                state.notReading.remove(host)
                return state.ends(on: host)
            }
            for end in ends { _ = end.loop.submit { end.readingResumed() } }
        case .stallConnections:
            for end in state.withLock({ $0.ends(on: host) }) {
                end.stalled.store(true, ordering: .relaxed)
                end.peer?.stalled.store(true, ordering: .relaxed)
            }
        case .resetConnections:
            for end in state.withLock({ $0.ends(on: host) }) {
                _ = end.loop.submit { end.resetByNetwork(fault) }
            }
        }
    }

    /// A monitor's path changed: the addresses it `lost` go dark, those it `gained`
    /// travel again. On the network's loop.
    func pathChanged(lost: Set<String>, gained: Set<String>) {
        state.withLock { state in
            state.offPath.subtract(gained)
            state.offPath.formUnion(lost)
        }
    }

    /// What happens to a connect's SYN from `source` to `target` now.
    enum SynFate {
        case delivered
        /// A black hole (or a lost path) swallows it: the connect stays pending.
        case vanishes
        /// A firewall answers it with a reset: the connect is refused.
        case rejected
    }

    func synFate(from source: String, to target: String) -> SynFate {
        state.withLock { state in
            if state.isBlackHoled(source, target) { return .vanishes }
            if !state.rejecting.isEmpty && state.rejecting.contains(target) { return .rejected }
            return .delivered
        }
    }

    /// Whether the connections on `host` are kept from reading (``SimulatedFault/stopReading(host:)``).
    func isNotReading(_ host: String) -> Bool {
        state.withLock { !$0.notReading.isEmpty && $0.notReading.contains(host) }
    }
}
