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
        enum Action { case finished, route(Route), waiter(CheckedContinuation<(any Connection)?, Never>), queued }
        let action: Action = state.withLock { state in
            if state.finished { return .finished }
            if let route = state.route { return .route(route) }
            if let waiter = state.waiter {
                state.waiter = nil
                return .waiter(waiter)
            }
            state.queue.append(connection)
            return .queued
        }
        switch action {
        case .finished: return false
        case .route(let route):
            if connection.eventLoop.inEventLoop {
                route.handler(connection)
            } else {
                connection.eventLoop.execute { route.handler(connection) }
            }
            return true
        case .waiter(let waiter): waiter.resume(returning: connection); return true
        case .queued: return true
        }
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
