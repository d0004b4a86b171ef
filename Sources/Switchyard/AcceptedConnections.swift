import DequeModule
import Synchronization

/// The connections a ``Listener`` accepted, as an async sequence.
///
/// Backends feed it with ``yield(_:)`` and end it with ``finish()``; users iterate it
/// (from one task). Finishing closes every connection still queued in it, so nothing
/// that was accepted is leaked by a listener that closes before its user took it.
public final class AcceptedConnections: AsyncSequence, Sendable {
    public typealias Element = any Connection

    private struct State {
        var queue: Deque<any Connection> = []
        var waiter: CheckedContinuation<(any Connection)?, Never>?
        var finished = false
    }
    private let state = Mutex(State())

    public init() {}

    /// Hands an accepted connection to the user. Returns `false` (and the caller must
    /// close the connection) when the sequence has finished.
    @discardableResult
    public func yield(_ connection: any Connection) -> Bool {
        let action: CheckedContinuation<(any Connection)?, Never>?? = state.withLock { state in
            if state.finished { return .none }
            if let waiter = state.waiter {
                state.waiter = nil
                return .some(waiter)
            }
            state.queue.append(connection)
            return .some(nil)
        }
        switch action {
        case .none: return false
        case .some(.some(let waiter)): waiter.resume(returning: connection); return true
        case .some(.none): return true
        }
    }

    /// Ends the sequence and closes the connections no one took.
    public func finish() {
        let (waiter, leftovers) = state.withLock { state -> (CheckedContinuation<(any Connection)?, Never>?, Deque<any Connection>) in
            state.finished = true
            let waiter = state.waiter
            state.waiter = nil
            let leftovers = state.queue
            state.queue = []
            return (waiter, leftovers)
        }
        waiter?.resume(returning: nil)
        for connection in leftovers { connection.close() }
    }

    /// Takes every queued connection (a listener switching to an accept handler).
    public func takeQueued() -> [any Connection] {
        state.withLock { state in
            defer { state.queue = [] }
            return Array(state.queue)
        }
    }

    /// Connections accepted and not yet taken.
    public var queuedCount: Int { state.withLock { $0.queue.count } }

    fileprivate func next() async -> (any Connection)? {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<(any Connection)?, Never>) in
                let result: (any Connection)?? = state.withLock { state in
                    if let first = state.queue.popFirst() { return .some(first) }
                    if state.finished || Task.isCancelled { return .some(nil) }
                    precondition(state.waiter == nil, "AcceptedConnections is iterated by two tasks at once")
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
