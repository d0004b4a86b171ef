public import Switchyard
import Synchronization

/// Something a transport must end when it shuts down: a connection or a pending connect.
public protocol TransportResource: AnyObject, Sendable {
    /// Runs `work` on the resource's loop; false once that loop has stopped.
    func submitToLoop(_ work: @escaping @Sendable () -> Void) -> Bool
    /// Ends the resource with `error`. Called on its loop, outside any user call.
    func terminate(with error: TransportError)
}

/// A transport's life, written once for every backend: whether it still takes connects
/// and listens, its open listeners, its open connections and pending connects (the
/// resource registry), and the shutdown sequence of the ``Transport`` contract.
///
/// - ``shutdown(gracePeriod:)`` closes every listener at once, waits up to the grace
///   period for the open resources to end, then does what ``shutdownNow()`` does.
/// - ``shutdownNow()`` closes the listeners, ends every open resource on its loop with
///   `cancelled`/`shutdown`, waits until every loop has run those ends (a barrier), and
///   stops the loops. A second call, concurrent or later, returns once the first has
///   stopped the loops.
///
/// Locked once per connection open and close and per listener, never per message.
public final class TransportLifecycle<Loop: BackendEventLoop>: Sendable {
    /// The transport's loops.
    public let group: EventLoopGroup<Loop>

    private enum Phase { case running, stopping, stopped }
    private struct State {
        var accepting = true
        var phase = Phase.running
        var listeners: [ObjectIdentifier: any Listener] = [:]
        var resources: [ObjectIdentifier: any TransportResource] = [:]
        var stopWaiters: [CheckedContinuation<Void, Never>] = []
    }
    private let state = Mutex(State())

    public init(group: EventLoopGroup<Loop>) {
        self.group = group
    }

    // MARK: taking work

    /// Throws `cancelled`/`shutdown` once the transport stopped taking connects and listens.
    public func ensureAccepting() throws(TransportError) {
        if !state.withLock({ $0.accepting }) { throw TransportError.transportShutdown() }
    }

    /// Whether the transport still takes connects and listens.
    public var isAccepting: Bool { state.withLock { $0.accepting } }

    /// Adds a new listener. When the transport stopped meanwhile, closes it and throws
    /// `cancelled`/`shutdown`.
    public func admit(_ listener: any Listener) throws(TransportError) {
        let admitted = state.withLock { state -> Bool in
            guard state.accepting else { return false }
            state.listeners[ObjectIdentifier(listener)] = listener
            return true
        }
        if !admitted {
            listener.close()
            throw TransportError.transportShutdown()
        }
    }

    /// Forgets a listener that closed.
    public func listenerClosed(_ listener: any Listener) {
        _ = state.withLock { $0.listeners.removeValue(forKey: ObjectIdentifier(listener)) }
    }

    // MARK: the resource registry

    /// Adds an open resource; false once the transport is stopping (the caller then ends it).
    public func insert(_ resource: any TransportResource) -> Bool {
        state.withLock { state in
            guard state.phase == .running else { return false }
            state.resources[ObjectIdentifier(resource)] = resource
            return true
        }
    }

    /// Removes a resource that ended.
    public func remove(_ resource: any TransportResource) {
        _ = state.withLock { $0.resources.removeValue(forKey: ObjectIdentifier(resource)) }
    }

    /// How many resources are open.
    public var openResources: Int { state.withLock { $0.resources.count } }

    // MARK: shutdown

    /// Stops taking connects and listens and closes every listener.
    public func stopAccepting() {
        let listeners = state.withLock { state -> [any Listener] in
            state.accepting = false
            let listeners = Array(state.listeners.values)
            state.listeners.removeAll()
            return listeners
        }
        for listener in listeners { listener.close() }
    }

    public func shutdown(gracePeriod: Duration) async {
        stopAccepting()
        let deadline = ContinuousClock.now + gracePeriod
        while openResources > 0, ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(5))
        }
        await shutdownNow()
    }

    public func shutdownNow() async {
        guard let resources = beginStopping() else {
            await waitUntilStopped()
            return
        }
        endOnTheirLoops(resources)
        // A barrier: every end above has run once each loop has run this.
        await group.onEveryLoop { _ in }
        finishStopping()
    }

    /// For a transport dropped without a shutdown: the same sequence, synchronously.
    /// Work queued on a loop runs before the loop stops, so each end runs first. A loop
    /// cannot join itself: when the last reference went away on one of the loops, the
    /// loops are stopped from a new thread.
    public func shutdownFromDeinit() {
        guard let resources = beginStopping() else { return }
        endOnTheirLoops(resources)
        if group.inAnyLoop {
            _ = runOnNewThread(name: "sy-stop") { [self] in finishStopping() }
        } else {
            finishStopping()
        }
    }

    private func beginStopping() -> [any TransportResource]? {
        stopAccepting()
        return state.withLock { state in
            guard state.phase == .running else { return nil }
            state.phase = .stopping
            return Array(state.resources.values)
        }
    }

    private func endOnTheirLoops(_ resources: [any TransportResource]) {
        for resource in resources {
            _ = resource.submitToLoop { resource.terminate(with: .transportShutdown()) }
        }
    }

    private func finishStopping() {
        group.stop()
        let waiters = state.withLock { state in
            state.phase = .stopped
            defer { state.stopWaiters = [] }
            return state.stopWaiters
        }
        for waiter in waiters { waiter.resume() }
    }

    private func waitUntilStopped() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let stopped = state.withLock { state in
                if state.phase == .stopped { return true }
                state.stopWaiters.append(continuation)
                return false
            }
            if stopped { continuation.resume() }
        }
    }
}

/// A resource that lives on one loop of a toolkit-built backend.
public protocol LoopBoundResource: TransportResource {
    associatedtype Loop: BackendEventLoop
    /// The loop the resource lives on.
    var loop: Loop { get }
}

extension LoopBoundResource {
    public func submitToLoop(_ work: @escaping @Sendable () -> Void) -> Bool {
        loop.submit(work)
    }
}
