public import Switchyard

/// The `Connection` contract as a state machine, written once for every backend.
///
/// A backend's connection keeps one of these and asks it what to do; the machine never
/// performs I/O. It holds the lifecycle, the read demand, the output side, the pending
/// writes and the handler, and answers with the action to perform:
///
/// ```
///            shutdownOutput()            writes drain              FIN handed over
///   open ───────────────────▶ shutdownPending ───────▶ shuttingDown ───────────────▶ shut
///    │  (queue empty: straight to shuttingDown)                                       (output)
///    │
///    │ end(with:bytesTaken:)  (local close, reset, peer error, shutdown, stall ...)
///    ▼
///   closed(end)  ── terminal, once; every later call is refused with end's error
/// ```
///
/// The rules it keeps (see `Connection`):
/// - **Refusals.** A write or ``shutdownOutput(_:)`` after the end gets the terminal
///   error (`cancelled`/`closed` after a local close); after `shutdownOutput`,
///   `failedPrecondition`/`output shut down`; after the transport stopped,
///   `cancelled`/`shutdown` (the end the transport gave it).
/// - **Writes** complete once each, in call order: `nil` when the backend reports their
///   bytes taken (``writesTaken(_:completed:)``), or the terminal error at the end, except
///   those the backend says the kernel took before it (``end(with:bytesTaken:)``).
/// - **The end** happens once: pending writes, then a pending output shutdown, then the
///   handler's `connectionDidClose` (``ConnectionEnding/run()``).
/// - **Late handlers.** A handler set after the end hears `connectionDidClose` once,
///   unless an earlier handler did (``setHandler(_:)``).
/// - **After the loops stopped**, the ``ConnectionRecord`` (shared with other threads)
///   answers calls that can no longer hop to the loop.
///
/// Touched only on the connection's loop, except its ``record``, which other threads read
/// in place (noncopyable, so the machine is never copied from under them). Tested
/// without I/O.
public struct ConnectionStateMachine: ~Copyable {
    /// The output side.
    public enum Output {
        case open
        /// `shutdownOutput` waits for the pending writes to go; then the FIN.
        case shutdownPending(WriteCompletion?)
        /// The backend is handing the FIN over (``finishOutputShutdown(error:)`` ends it).
        case shuttingDown(WriteCompletion?)
        case shut
    }

    /// What ``setHandler(_:)`` asks the backend to do.
    public enum HandlerAction {
        /// The handler is installed.
        case installed
        /// The connection already ended: tell this handler (deferred: a user call is on
        /// the stack) with `connectionDidClose(error:)`.
        case reportEnd(any ConnectionHandler, TransportError?)
        /// The connection ended and a handler already heard it: nothing to do.
        case none
    }

    /// What ``shutdownOutput(_:)`` asks the backend to do.
    public enum OutputShutdownAction {
        /// Refused: run the completion with this error (deferred).
        case refuse(TransportError)
        /// Nothing is pending: hand the FIN over now, then call
        /// ``finishOutputShutdown(error:)``.
        case shutDownNow
        /// Pending writes go first; ``writesTaken(_:completed:)`` says when to shut down.
        case afterPendingWrites
    }

    /// Off-loop view of this connection, shared with other threads; stored inline.
    public let record = ConnectionRecord()
    /// The writes not yet taken.
    public private(set) var writes = PendingWrites()
    /// The handler, while the connection is open.
    public private(set) var handler: (any ConnectionHandler)?
    /// How it ended; nil while open.
    @inlinable public var end: ConnectionEnd? { ended?.end }
    /// The end, boxed and shared with ``record``: a `TransportError` inline made every
    /// open connection larger for what only a connection that ended needs (measured with
    /// `Benchmarks/run`'s idle load: 603 -> 546 bytes per idle bsd connection, 632 -> 574
    /// per libuv one).
    @usableFromInline private(set) var ended: ConnectionRecord.EndBox?
    public private(set) var output = Output.open
    /// Whether the user asked for reads (``startReading()`` since the last ``stopReading()``).
    public private(set) var wantsRead = false
    /// Whether the peer's end of stream was delivered.
    public private(set) var readEnded = false
    /// Whether a handler heard the end.
    private var endReported = false
    /// Bytes read from the network and handed to the handler (``noteReceived(_:)``), for
    /// the transport's metrics and its close log line: a plain integer on the loop.
    @inlinable public var bytesReceived: Int { received }
    @usableFromInline var received = 0
    /// Bytes the network took from the writes (``noteSent(_:)``, ``writesTaken(_:completed:)``,
    /// ``end(with:bytesTaken:)``): a plain integer on the loop.
    @inlinable public var bytesSent: Int { sent }
    @usableFromInline var sent = 0

    public init() {}

    @inlinable public var isOpen: Bool { ended == nil }

    /// Whether the backend should be reading the network now: asked for, open, and the
    /// stream has not ended.
    @inlinable public var shouldRead: Bool { wantsRead && !readEnded && ended == nil }

    /// Bytes accepted and not yet taken (`Connection.pendingWriteBytes` on the loop).
    @inlinable public var pendingWriteBytes: Int { writes.bytes }

    // MARK: handler and reads

    /// Installs `handler`, or says whom to tell that the connection already ended.
    public mutating func setHandler(_ handler: any ConnectionHandler) -> HandlerAction {
        guard let end else {
            self.handler = handler
            return .installed
        }
        if endReported { return .none }
        endReported = true
        record.noteEndReported()
        return .reportEnd(handler, end.handlerError)
    }

    /// Records a demand for reads; true when it changed (the backend starts watching
    /// input if ``shouldRead``).
    public mutating func startReading() -> Bool {
        guard ended == nil, !wantsRead else { return false }
        wantsRead = true
        return true
    }

    /// Records that reads are no longer wanted; true when it changed.
    public mutating func stopReading() -> Bool {
        guard ended == nil, wantsRead else { return false }
        wantsRead = false
        return true
    }

    /// The peer ended its stream: returns the handler to tell (`connectionDidReadEnd`),
    /// once.
    public mutating func readDidEnd() -> (any ConnectionHandler)? {
        guard ended == nil, !readEnded else { return nil }
        readEnded = true
        return handler
    }

    /// The backend read `count` bytes (counted for ``bytesReceived``).
    @inlinable
    public mutating func noteReceived(_ count: Int) {
        received &+= count
    }

    /// The backend handed `count` bytes to the network at once, without queueing them
    /// (counted for ``bytesSent``; queued bytes are counted by ``writesTaken(_:completed:)``).
    @inlinable
    public mutating func noteSent(_ count: Int) {
        sent &+= count
    }

    // MARK: writes

    /// Why a write cannot start now, or nil when it can.
    @inlinable
    public var writeRefusal: TransportError? {
        if let ended { return ended.end.writeError }
        if case .open = output { return nil }
        return .outputShutdown()
    }

    /// Queues `bytes[offset...]` (the part the backend could not hand over at once).
    public mutating func enqueue(_ bytes: [UInt8], offset: Int = 0, completion: WriteCompletion?) {
        writes.append(bytes, offset: offset, completion: completion)
        record.pendingBytes = writes.bytes
    }

    /// The kernel (or peer) took `count` more bytes from the front of the queue. The
    /// completions of the writes now taken in full are appended to `completed` (run them
    /// with `nil`, in order). Returns whether the queue is now empty and an output
    /// shutdown waits for that: the backend then hands the FIN over and calls
    /// ``finishOutputShutdown(error:)``.
    public mutating func writesTaken(_ count: Int, completed: inout [WriteCompletion]) -> Bool {
        sent &+= count
        writes.consume(count, completed: &completed)
        record.pendingBytes = writes.bytes
        return beginPendingShutdownIfDrained()
    }

    private mutating func beginPendingShutdownIfDrained() -> Bool {
        guard writes.isEmpty, case .shutdownPending(let completion) = output else { return false }
        output = .shuttingDown(completion)
        return true
    }

    // MARK: output shutdown

    /// `shutdownOutput(completion:)` was called.
    public mutating func shutdownOutput(_ completion: WriteCompletion?) -> OutputShutdownAction {
        if let refusal = writeRefusal { return .refuse(refusal) }
        if writes.isEmpty {
            output = .shuttingDown(completion)
            return .shutDownNow
        }
        output = .shutdownPending(completion)
        return .afterPendingWrites
    }

    /// The FIN was handed over (`error` nil) or handing it over failed. Returns the
    /// completion to run with `error`, wrapped: nil when the end already completed it.
    public mutating func finishOutputShutdown(error: TransportError?) -> WriteCompletion?? {
        guard case .shuttingDown(let completion) = output else { return nil }
        output = .shut
        return .some(completion)
    }

    /// Whether a FIN is being handed over (for a backend whose shutdown completes later).
    public var isShuttingDownOutput: Bool {
        if case .shuttingDown = output { return true }
        return false
    }

    // MARK: the end

    /// Ends the connection, once: `error` nil for a local close (or reset). `bytesTaken`
    /// counts bytes at the front of the queue that the kernel took before the end (a
    /// write request in flight): the writes they cover in full complete with `nil`.
    /// Returns what to report, in order, or nil if the connection had already ended.
    public mutating func end(with error: TransportError?, bytesTaken: Int = 0) -> ConnectionEnding? {
        guard ended == nil else { return nil }
        sent &+= bytesTaken
        let end = ConnectionEnd(error: error)
        let box = ConnectionRecord.EndBox(end)
        ended = box
        record.recordEnd(box)
        var succeeded: [WriteCompletion] = []
        var failed: [WriteCompletion] = []
        if !writes.isEmpty {
            writes.removeAll(bytesTaken: bytesTaken, succeeded: &succeeded, failed: &failed)
            record.pendingBytes = 0
        }
        var shutdownCompletion: WriteCompletion?
        switch output {
        case .shutdownPending(let completion), .shuttingDown(let completion): shutdownCompletion = completion
        case .open, .shut: break
        }
        output = .shut
        wantsRead = false
        let handler = self.handler
        self.handler = nil
        if handler != nil {
            endReported = true
            record.noteEndReported()
        }
        return ConnectionEnding(
            succeeded: succeeded, failed: failed, shutdownCompletion: shutdownCompletion, end: end, handler: handler)
    }
}

/// How a connection ended.
public struct ConnectionEnd: Sendable, Equatable {
    /// The terminal error; nil after a local close or reset.
    public var error: TransportError?

    public init(error: TransportError?) {
        self.error = error
    }

    /// What the handler's `connectionDidClose(error:)` gets.
    @inlinable public var handlerError: TransportError? { error }

    /// What writes and output shutdowns get after the end: the terminal error, or
    /// `cancelled`/`closed` after a local close.
    @inlinable public var writeError: TransportError { error ?? .closedLocally() }
}

/// What a connection's end reports, in the contract's order: writes the kernel took
/// (`nil`), the other pending writes (the error), a pending output shutdown (the error),
/// then the handler's `connectionDidClose(error:)`.
public struct ConnectionEnding {
    public let succeeded: [WriteCompletion]
    public let failed: [WriteCompletion]
    public let shutdownCompletion: WriteCompletion?
    public let end: ConnectionEnd
    public let handler: (any ConnectionHandler)?

    /// Runs the callbacks, in order. Run it on the loop: at once from a loop event, at
    /// the end of the turn when a user's call is on the stack.
    public func run() {
        for completion in succeeded { completion(nil) }
        // The write error (for a local close, a message made up on the spot: about 210
        // instructions) only when a write or a shutdown is there to hear it.
        if !failed.isEmpty || shutdownCompletion != nil {
            let error = end.writeError
            for completion in failed { completion(error) }
            shutdownCompletion?(error)
        }
        handler?.connectionDidClose(error: end.handlerError)
    }
}
