public import Switchyard

/// A ``BackendEventLoop`` that keeps its end-of-turn work in a ``DeferredWork``: adopt it
/// and ``BackendEventLoop/deferToEndOfTurn(_:)`` and
/// ``BackendEventLoop/deferCompletion(_:_:)`` come with it. The loop still runs
/// ``deferred`` (``DeferredWork/run()``) at the end of each turn: after each event it
/// dispatches, after each timer, and in the task queue's batches.
///
/// ```swift
/// final class MyLoop: DeferringEventLoop, @unchecked Sendable {
///     let deferred = DeferredWork()
///     …
/// }
/// ```
public protocol DeferringEventLoop: BackendEventLoop {
    /// The loop's end-of-turn work. Touched only on the loop.
    var deferred: DeferredWork { get }
}

extension DeferringEventLoop {
    /// Runs `work` at the end of the loop's current turn (never inside the user's call
    /// that caused it). Call on the loop.
    @inlinable
    public func deferToEndOfTurn(_ work: @escaping () -> Void) {
        assertInLoop()
        deferred.append(work)
    }

    /// Runs a write's `completion` with `result` at the end of the loop's current turn,
    /// in order with other deferred work. Call on the loop.
    @inlinable
    public func deferCompletion(_ completion: @escaping WriteCompletion, _ result: TransportError?) {
        assertInLoop()
        deferred.append(completion, result)
    }
}
