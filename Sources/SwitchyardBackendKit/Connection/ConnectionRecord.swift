public import Switchyard
import Synchronization

/// What other threads may know of a connection: its pending byte count (a snapshot) and
/// how it ended, for calls that arrive after the connection's loop stopped.
///
/// Once a transport's loops have stopped, a call from another thread cannot hop to the
/// loop anymore. The transport ended every connection before it stopped its loops, so
/// the end is recorded here, and what the call would have reported runs on the
/// caller's thread instead (`Connection`'s contract: nothing is dropped):
/// ``completeLateWrite(_:)``, ``reportEndToLateHandler(_:)``.
///
/// Noncopyable and stored inline: it lives in ``ConnectionStateMachine``, which lives in
/// the backend's connection object, so a connection costs no separate allocation for it
/// (measured with `Benchmarks/run`'s idle load, against a separate record object: 646 ->
/// 603 bytes per idle bsd connection, 677 -> 632 per libuv one). Other threads read it
/// in place, through the connection (`state.record`): only its atomic and its mutex are
/// touched off the loop.
public struct ConnectionRecord: ~Copyable, Sendable {
    /// The end, boxed: a `TransportError` inline made every open connection's record
    /// larger for what only a connection that ended needs (measured with
    /// `Benchmarks/run`'s idle load: 58 bytes less per idle bsd connection boxed, 704 ->
    /// 646, and 56 less per libuv one, 733 -> 677).
    /// `@usableFromInline`: the record is stored inline in other modules' types, whose
    /// layout then names this class (a private one breaks their build).
    /// ``ConnectionStateMachine`` keeps the same box.
    @usableFromInline final class EndBox: Sendable {
        @usableFromInline let end: ConnectionEnd
        init(_ end: ConnectionEnd) { self.end = end }
    }
    private let pending = Atomic<Int>(0)
    private let ending = Mutex<(end: EndBox?, reported: Bool)>((nil, false))

    public init() {}

    /// `Connection.pendingWriteBytes` off the loop: a snapshot.
    public var pendingBytes: Int {
        get { pending.load(ordering: .relaxed) }
        nonmutating set { pending.store(newValue, ordering: .relaxed) }
    }

    /// How the connection ended, if it did.
    public var end: ConnectionEnd? { ending.withLock { $0.end?.end } }

    func recordEnd(_ box: EndBox) {
        ending.withLock { $0.end = box }
    }

    /// The error a write gets after the loop stopped: the terminal one (the transport's
    /// shutdown, as a rule), or `cancelled`/`shutdown` if the connection never reached
    /// its loop.
    public var lateWriteError: TransportError {
        ending.withLock { $0.end?.end }?.writeError ?? .transportShutdown()
    }

    /// Completes a write that arrived after the loop stopped, on the caller's thread.
    public func completeLateWrite(_ completion: WriteCompletion?) {
        completion?(lateWriteError)
    }

    /// Tells a handler set after the loop stopped how the connection ended, on the
    /// caller's thread, unless a handler already heard it.
    public func reportEndToLateHandler(_ handler: any ConnectionHandler) {
        let end = ending.withLock { state -> ConnectionEnd?? in
            if state.reported { return nil }
            state.reported = true
            return .some(state.end?.end)
        }
        guard let end else { return }
        handler.connectionDidClose(error: end?.handlerError ?? .transportShutdown())
    }

    /// Notes that a handler on the loop heard the end (so a late handler does not).
    func noteEndReported() {
        ending.withLock { $0.reported = true }
    }
}
