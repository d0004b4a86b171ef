public import Switchyard

/// The loop of a connection whose I/O is another `Connection` (TLS over any backend's
/// connection), seen as a ``BackendEventLoop`` so that the layered connection can be a
/// ``StreamConnection``: it is the other connection's loop, borrowed, with the same
/// thread, the same turns and the same end.
///
/// When that loop is a toolkit loop (every built-in backend's), this one forwards to it:
/// ``submit(_:)`` says when it has stopped, so the layered connection keeps the
/// `Connection` contract's promise that a call made after the loops stopped is
/// answered, not dropped. Any other `TransportEventLoop` cannot say so: work is handed to its
/// `TransportEventLoop/execute(_:)`, which drops it once that loop has stopped, and deferred
/// work runs in a task of its own.
///
/// One per layered connection; it owns nothing (``stopAndJoin()`` does nothing: the
/// transport that made the loop stops it). The layered connection's
/// `Connection/eventLoop` should stay the lender's loop (``lender``), so that its users
/// see one loop object.
///
/// Safety of `@unchecked Sendable`: immutable.
public final class BorrowedEventLoop: BackendEventLoop, @unchecked Sendable {
    /// The loop borrowed.
    public let lender: any TransportEventLoop
    private let toolkitLoop: (any BackendEventLoop)?

    public init(_ lender: any TransportEventLoop) {
        self.lender = lender
        toolkitLoop = lender as? any BackendEventLoop
    }

    public var inEventLoop: Bool { lender.inEventLoop }

    public func submit(_ work: @escaping @Sendable () -> Void) -> Bool {
        guard let toolkitLoop else {
            lender.execute(work)
            return true
        }
        return toolkitLoop.submit(work)
    }

    public func deferToEndOfTurn(_ work: @escaping () -> Void) {
        guard let toolkitLoop else {
            let work = LoopBound(work)
            lender.execute { work.value() }
            return
        }
        toolkitLoop.deferToEndOfTurn(work)
    }

    public func deferCompletion(_ completion: @escaping WriteCompletion, _ result: TransportError?) {
        guard let toolkitLoop else {
            lender.execute { completion(result) }
            return
        }
        toolkitLoop.deferCompletion(completion, result)
    }

    public func stopAndJoin() {}
}

/// Work made on a loop, for that same loop.
///
/// Safety of `@unchecked Sendable`: created on the loop and run there, never elsewhere.
private struct LoopBound: @unchecked Sendable {
    let value: () -> Void
    init(_ value: @escaping () -> Void) { self.value = value }
}
