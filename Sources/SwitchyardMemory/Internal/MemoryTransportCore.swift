import Switchyard
import SwitchyardBackendKit
import Synchronization

/// The state a ``MemoryTransport`` shares with its listeners and connections: its loops,
/// its lifecycle phase, and what is open on it.
///
/// Listeners and connections reference the core, not the transport, and the core holds
/// them only while they are open, so closing them breaks every cycle.
final class MemoryTransportCore: Sendable {
    let group: EventLoopGroup<WorkerEventLoop>

    /// The lifecycle. Transitions only go forward:
    /// `running` → `draining` (shutdown with a grace period: listeners closed, new
    /// connects and listens refused) → `stopping` (open connections being ended) →
    /// `stopped` (loops stopped). `shutdownNow` may go from `running` to `stopping`.
    enum Phase: Sendable { case running, draining, stopping, stopped }

    private struct State {
        var phase = Phase.running
        var listeners: [ObjectIdentifier: MemoryListener] = [:]
        var connections: [ObjectIdentifier: MemoryConnection] = [:]
        var drainWaiters: [Int: CheckedContinuation<Void, Never>] = [:]
        var stopWaiters: [CheckedContinuation<Void, Never>] = []
        var nextWaiter = 0
    }
    private let state = Mutex(State())

    /// Closed once the loops are about to stop. Work is handed to a loop only through
    /// ``submit(to:_:)`` while the gate is open, under its lock, so everything handed
    /// over before the gate closed runs (stopping a loop drains its queue) and nothing
    /// handed over after is silently dropped: the caller is told to act on its own.
    private let gate = Mutex(true)

    init(group: EventLoopGroup<WorkerEventLoop>) {
        self.group = group
    }

    var isRunning: Bool { state.withLock { $0.phase == .running } }

    // MARK: hops

    /// Runs `work` on `loop` unless the transport's loops have stopped; returns whether
    /// it was handed over.
    func submit(to loop: WorkerEventLoop, _ work: @escaping @Sendable () -> Void) -> Bool {
        gate.withLock { open in
            if open { loop.execute(work) }
            return open
        }
    }

    // MARK: registration

    /// Adds an open connection; false once the transport is shutting down.
    func register(_ connection: MemoryConnection) -> Bool {
        state.withLock { state in
            guard state.phase == .running else { return false }
            state.connections[ObjectIdentifier(connection)] = connection
            return true
        }
    }

    /// Removes a connection that ended; wakes a graceful shutdown waiting for the last.
    func deregister(_ connection: MemoryConnection) {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.connections[ObjectIdentifier(connection)] = nil
            guard state.connections.isEmpty, state.phase != .running else { return [] }
            let waiters = Array(state.drainWaiters.values)
            state.drainWaiters = [:]
            return waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Adds a listener; false once the transport is shutting down.
    func register(_ listener: MemoryListener) -> Bool {
        state.withLock { state in
            guard state.phase == .running else { return false }
            state.listeners[ObjectIdentifier(listener)] = listener
            return true
        }
    }

    func deregister(_ listener: MemoryListener) {
        _ = state.withLock { $0.listeners.removeValue(forKey: ObjectIdentifier(listener)) }
    }

    // MARK: shutdown

    /// Moves `running` to `draining`; returns the listeners to close, or nil if the
    /// transport was already shutting down.
    func beginDraining() -> [MemoryListener]? {
        state.withLock { state in
            guard state.phase == .running else { return nil }
            state.phase = .draining
            return Array(state.listeners.values)
        }
    }

    /// Moves to `stopping`; returns what is still open, or nil if another call got there
    /// first.
    func beginStopping() -> (listeners: [MemoryListener], connections: [MemoryConnection])? {
        state.withLock { state in
            guard state.phase == .running || state.phase == .draining else { return nil }
            state.phase = .stopping
            return (Array(state.listeners.values), Array(state.connections.values))
        }
    }

    /// Closes the hop gate, stops the loops, and releases anyone waiting for that.
    /// Call off the loops, after every open connection was ended.
    func stop() {
        gate.withLock { $0 = false }
        group.stop()
        let waiters = state.withLock { state in
            state.phase = .stopped
            let waiters = state.stopWaiters
            state.stopWaiters = []
            return waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Returns once the loops have stopped (for a second, concurrent shutdown call).
    func waitUntilStopped() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let stopped = state.withLock { state in
                if state.phase == .stopped { return true }
                state.stopWaiters.append(continuation)
                return false
            }
            if stopped { continuation.resume() }
        }
    }

    /// Returns once no connection is open, or `gracePeriod` passed.
    func waitForConnectionsToEnd(within gracePeriod: Duration) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.waitUntilNoConnections() }
            group.addTask { try? await Task.sleep(for: gracePeriod) }
            _ = await group.next()
            group.cancelAll()
        }
    }

    private func waitUntilNoConnections() async {
        let id = state.withLock { state in
            state.nextWaiter += 1
            return state.nextWaiter
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = state.withLock { state in
                    if state.connections.isEmpty || Task.isCancelled { return true }
                    state.drainWaiters[id] = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            state.withLock { $0.drainWaiters.removeValue(forKey: id) }?.resume()
        }
    }
}
