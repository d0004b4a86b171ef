public import Switchyard
import Synchronization
import SwitchyardPosix

/// Something a transport must end when it shuts down: a connection or a pending connect.
public protocol TransportResource: AnyObject, Sendable {
    /// Runs `work` on the resource's loop; false once that loop has stopped.
    func submitToLoop(_ work: @escaping @Sendable () -> Void) -> Bool
    /// Ends the resource with `error`. Called on its loop, outside any user call.
    func terminate(with error: TransportError)
}

/// A transport's life, written once for every backend: whether it still takes connects
/// and listens, its open listeners, its open connections and pending connects (the
/// resource registry), and the shutdown sequence of the `Transport` contract.
///
/// - ``shutdown(gracePeriod:)`` closes every listener at once, waits up to the grace
///   period (on the loops' `TransportClock`) for the open resources to end, then does
///   what ``shutdownNow()`` does.
/// - ``shutdownNow()`` closes the listeners, ends every open resource on its loop with
///   `cancelled`/`shutdown`, waits until every loop has run those ends (a barrier), and
///   stops the loops. A second call, concurrent or later, returns once the first has
///   stopped the loops.
///
/// It also reports the connections' lives to its ``observer`` (logs and metrics, see
/// ``TransportObserver``): a backend that registers connections with
/// ``insertConnection(_:accepted:)`` and ``connectionEnded(_:)`` and connects through
/// ``observingConnect(to:_:)`` needs nothing else for them.
///
/// Locked once per connection open and close and per listener, never per message.
public final class TransportLifecycle<Loop: BackendEventLoop>: Sendable {
    /// The transport's loops.
    public let group: TransportEventLoopGroup<Loop>
    /// Where the connections' opens, connects and ends are logged and counted.
    public let observer: TransportObserver

    /// Not nested in this generic class: a nested type would be generic too, and every
    /// `withLock` would look its metadata up at run time (about 330 instructions, twice
    /// per connection).
    private typealias State = TransportLifecycleState
    private let state = Mutex(State())

    /// A lifecycle over `group`'s loops, reporting to `observer` (by default one that
    /// logs nowhere, under the backend name `unnamed`).
    public init(group: TransportEventLoopGroup<Loop>, observer: TransportObserver = .unnamed()) {
        self.group = group
        self.observer = observer
        if observer.metrics.isRecording {
            let sampler = Task.detached { [weak self] in
                while !Task.isCancelled {
                    try? await Task.sleep(for: Self.samplingInterval)
                    guard let self else { return }
                    self.sampleBufferedBytes()
                }
            }
            state.withLock { $0.sampler = sampler }
        }
    }

    /// How often `switchyard_buffered_bytes` is sampled while a metrics backend records.
    public static var samplingInterval: Duration { .seconds(1) }

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

    /// ``insert(_:)`` for a connection, which the ``observer`` then hears of as opened:
    /// `accepted` by a listener, or connected. Call it where the backend would call
    /// ``insert(_:)``.
    public func insertConnection<C: StreamConnection & TransportResource>(_ connection: C, accepted: Bool) -> Bool {
        guard insert(connection) else { return false }
        observer.opened(connection, accepted: accepted)
        return true
    }

    /// ``remove(_:)`` for a connection that ended (call right after its
    /// ``ConnectionStateMachine/end(with:bytesTaken:)``, on its loop): if it was inserted
    /// with ``insertConnection(_:accepted:)``, the ``observer`` hears how it ended and the
    /// bytes it moved.
    public func connectionEnded<C: StreamConnection & TransportResource>(_ connection: C) {
        let removed = state.withLock { $0.resources.removeValue(forKey: ObjectIdentifier(connection)) } != nil
        guard removed else { return }
        observer.ended(
            connection, error: connection.state.end?.error, bytesReceived: connection.state.bytesReceived,
            bytesSent: connection.state.bytesSent)
    }

    /// Runs a transport's `connect` (to `endpoint`) and reports it to the ``observer``:
    /// the connect time and `connected`, or the failure.
    public func observingConnect(
        to endpoint: Endpoint, _ connect: () async throws -> any Connection
    ) async throws -> any Connection {
        try await observer.observingConnect(to: endpoint, connect)
    }

    /// Records `switchyard_buffered_bytes`: the write bytes not yet taken by the kernel
    /// over the open connections (each one's ``Connection/pendingWriteBytes``, which
    /// any thread may read).
    private func sampleBufferedBytes() {
        let resources = state.withLock { Array($0.resources.values) }
        var total = 0
        for resource in resources {
            if let connection = resource as? any Connection { total += connection.pendingWriteBytes }
        }
        observer.metrics.bufferedBytes.record(total)
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
        // The loops' clock: a simulated network's virtual time passes the grace period.
        let clock = group.loops[0].clock
        let deadline = clock.now + gracePeriod
        while openResources > 0, clock.now < deadline {
            try? await clock.sleep(until: min(clock.now + .milliseconds(5), deadline))
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
        let (waiters, sampler) = state.withLock { state in
            state.phase = .stopped
            defer {
                state.stopWaiters = []
                state.sampler = nil
            }
            return (state.stopWaiters, state.sampler)
        }
        sampler?.cancel()
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

/// What a ``TransportLifecycle`` keeps under its lock.
private struct TransportLifecycleState {
    enum Phase { case running, stopping, stopped }
    var accepting = true
    var phase = Phase.running
    var listeners: [ObjectIdentifier: any Listener] = [:]
    var resources: [ObjectIdentifier: any TransportResource] = [:]
    var stopWaiters: [CheckedContinuation<Void, Never>] = []
    /// The buffered-bytes sampler, while a metrics backend records.
    var sampler: Task<Void, Never>?
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
