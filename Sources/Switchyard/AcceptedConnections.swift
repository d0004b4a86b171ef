import DequeModule
import Synchronization

/// The connections a ``Listener`` accepted, as an async sequence.
///
/// Backends feed it with ``yield(_:)`` and end it with ``finish()``; users iterate it
/// (from one task), or route every connection to a handler with ``route(to:)`` (what
/// ``Listener/acceptConnections(_:)`` does). Finishing closes every connection still
/// queued in it, so nothing that was accepted is leaked by a listener that closes
/// before its user took it.
public final class AcceptedConnections: AsyncSequence, Sendable {
    public typealias Element = any Connection

    /// The accept handler. A class: a closure kept directly as a `Mutex`'s state is
    /// re-wrapped in reabstraction thunks by every `withLock`, so each call would go
    /// through one more thunk than the last (measured: 37% of an echo server's CPU
    /// after a few thousand accepts).
    private final class Route: Sendable {
        let handler: @Sendable (any Connection) -> Void
        init(_ handler: @escaping @Sendable (any Connection) -> Void) { self.handler = handler }
    }

    private struct State {
        var queue: Deque<any Connection> = []
        var waiter: CheckedContinuation<(any Connection)?, Never>?
        var finished = false
        var route: Route?
    }
    private let state = Mutex(State())

    public init() {}

    /// Hands an accepted connection to the user: to the route's handler (on the
    /// connection's loop: inline when called there, as backends do), to a waiting
    /// iterator, or to the queue. Returns `false` (and the caller must close the
    /// connection) when the sequence has finished.
    @discardableResult
    public func yield(_ connection: any Connection) -> Bool {
        // Once per accepted connection (twice behind a SuspendableListener). With a route
        // (a server's usual case) the lock only hands the route out: a set route means
        // the sequence has not finished, since finish() drops it. One enum with payloads
        // that carried every case out of the lock cost more than the lock (measured with
        // callgrind: about 600 instructions a yield, against about 210 now).
        guard let route = state.withLock({ $0.route }) else { return yieldUnrouted(connection) }
        hand(connection, to: route)
        return true
    }

    /// Runs `route`'s handler with `connection` on the connection's loop: inline when
    /// called there.
    private func hand(_ connection: any Connection, to route: Route) {
        let loop = connection.eventLoop
        if loop.inEventLoop {
            route.handler(connection)
        } else {
            loop.execute { route.handler(connection) }
        }
    }

    /// `yield(_:)` when no route was set: to a waiting iterator or the queue (or the
    /// route, if one was set meanwhile).
    private func yieldUnrouted(_ connection: any Connection) -> Bool {
        var route: Route?
        var waiter: CheckedContinuation<(any Connection)?, Never>?
        let open = state.withLock { state -> Bool in
            if state.finished { return false }
            if let current = state.route {
                route = current
            } else if let current = state.waiter {
                state.waiter = nil
                waiter = current
            } else {
                state.queue.append(connection)
            }
            return true
        }
        if let route {
            hand(connection, to: route)
        } else if let waiter {
            waiter.resume(returning: connection)
        }
        return open
    }

    /// From now on, hands every connection to `handler` on the connection's loop
    /// instead of to iterators; connections already queued go to it too, in order.
    public func route(to handler: @escaping @Sendable (any Connection) -> Void) {
        let route = Route(handler)
        let queued = state.withLock { state in
            // A finished sequence keeps no handler (see finish()).
            if !state.finished { state.route = route }
            defer { state.queue = [] }
            return Array(state.queue)
        }
        for connection in queued { connection.eventLoop.execute { route.handler(connection) } }
    }

    /// Ends the sequence and closes the connections no one took.
    public func finish() {
        // The handler goes too (released here, outside the lock): no connection reaches
        // it any more, and what it captured must not outlive the listener. A handler
        // that captures the Lifecycle holding the listener made a cycle that kept both,
        // and every connection they reached, for ever (found by AddressSanitizer's leak
        // check on the kit's suspend scenarios).
        let (waiter, leftovers, route) = state.withLock { state -> (CheckedContinuation<(any Connection)?, Never>?, Deque<any Connection>, Route?) in
            state.finished = true
            let waiter = state.waiter
            state.waiter = nil
            let leftovers = state.queue
            state.queue = []
            let route = state.route
            state.route = nil
            return (waiter, leftovers, route)
        }
        _ = route
        waiter?.resume(returning: nil)
        for connection in leftovers { connection.close() }
    }

    /// Connections accepted and not yet taken.
    public var queuedCount: Int { state.withLock { $0.queue.count } }

    fileprivate func next() async -> (any Connection)? {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<(any Connection)?, Never>) in
                let result: (any Connection)?? = state.withLock { state in
                    if let first = state.queue.popFirst() { return .some(first) }
                    if state.finished || Task.isCancelled { return .some(nil) }
                    precondition(state.waiter == nil, "AcceptedConnections is iterated by two tasks at once (a programming error: one task iterates it)")
                    state.waiter = continuation
                    return .none
                }
                if case .some(let value) = result { continuation.resume(returning: value) }
            }
        } onCancel: {
            let waiter = state.withLock { state in
                let waiter = state.waiter
                state.waiter = nil
                return waiter
            }
            waiter?.resume(returning: nil)
        }
    }

    public struct AsyncIterator: AsyncIteratorProtocol {
        fileprivate let base: AcceptedConnections
        public mutating func next() async -> (any Connection)? { await base.next() }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(base: self) }
}
