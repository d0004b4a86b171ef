import DequeModule
public import Switchyard
import SwitchyardBackendKit
import Synchronization

/// One end of an in-memory connection.
///
/// The two ends of a connection are joined by two ``MemoryPipe``s, one per direction;
/// each end lives on a loop of its own transport (the ends may be on different loops,
/// even of different transports). It keeps the whole ``Connection`` contract, as a TCP
/// socket on loopback would:
///
/// Its writes wait in the toolkit's ``PendingWrites`` queue.
///
/// - Reads are demand-driven: bytes are taken from the receive buffer only while
///   reading, at most 64 KiB per ``ConnectionHandler/connectionDidRead(_:)``.
/// - A write completes once all its bytes are in the peer's receive buffer (the memory
///   equivalent of "in the kernel"). The buffer holds 256 KiB
///   bytes, so a peer that does not read stops the writer's completions.
/// - ``close()`` sends the peer an end of stream after the bytes already in its buffer;
///   ``reset()`` makes the peer end with `unavailable`/`reset` and discards what it had
///   not read. A write to a peer that ended ends this connection with
///   `unavailable`/`reset`. Unlike TCP, closing with unread input still sends an end of
///   stream, not a reset.
/// - Every callback runs on ``eventLoop``, in order, never inside the user's call: the
///   events a call causes are queued and delivered at the end of the loop's turn.
///
/// If a call arrives from another thread after the transport's loops have stopped
/// (the connection has then ended with `cancelled`/`shutdown`), there is no loop to hop
/// to: a write's completion runs on the calling thread with that error, and a handler
/// that never got the connection's end gets ``ConnectionHandler/connectionDidClose(error:)``
/// on the calling thread.
///
/// Safety of `@unchecked Sendable`: the mutable state below is touched only on `loop`
/// (every public method hops there first); what other threads read is immutable, an
/// atomic (``pendingWriteBytes`` off the loop) or behind a mutex (`orphanedClose`). The
/// pipes are `Sendable` on their own.
public final class MemoryConnection: Connection, @unchecked Sendable {
    public var backendName: String { MemoryTransport.backendName }
    public var eventLoop: any EventLoop { loop }
    public let localAddress: Endpoint
    public let remoteAddress: Endpoint

    let loop: WorkerEventLoop
    let core: MemoryTransportCore
    /// Bytes from the peer to this end.
    let inbound: MemoryPipe
    /// Bytes from this end to the peer.
    let outbound: MemoryPipe
    /// The ephemeral port this (client) end holds in the network table.
    private let heldPort: MemoryNetwork.Binding?
    private let portReleased = Atomic<Bool>(false)
    /// ``pendingWriteBytes`` as other threads see it: counted when a write is called,
    /// uncounted when its bytes move or fail.
    let pendingSnapshot = Atomic<Int>(0)
    /// The end of the connection, kept when no handler was set to receive it.
    let orphanedClose = Mutex<TransportError??>(nil)

    // MARK: loop-confined state

    /// Something to tell the user, in order.
    enum Event {
        case wrote(WriteCompletion, TransportError?)
        case drained
        case closed(TransportError?)
    }

    /// How this end ended.
    enum Termination {
        /// ``close()``: the peer sees end of stream; the handler gets `nil`.
        case close
        /// ``reset()``: the peer sees a reset; the handler gets `nil`.
        case reset
        /// A terminal error: the handler and pending writes get it; the peer sees end of
        /// stream.
        case failure(TransportError)
    }

    enum OutputState {
        case open
        /// ``shutdownOutput(completion:)`` waits for the queue to drain.
        case draining(WriteCompletion?)
        case shut
    }

    var handler: (any ConnectionHandler)?
    var reading = false
    var readEndDelivered = false
    /// The error later writes get; set when the connection ends.
    var terminalWriteError: TransportError?
    var isClosed: Bool { terminalWriteError != nil }
    var output = OutputState.open
    var writes = PendingWrites()
    /// Whether a write left bytes queued since the queue was last empty.
    var hadBacklog = false
    var events: Deque<Event> = []
    var pumpScheduled = false
    /// Whether the `.closed` event is queued and not yet delivered.
    var closePending = false

    init(
        loop: WorkerEventLoop, core: MemoryTransportCore, localAddress: Endpoint, remoteAddress: Endpoint,
        inbound: MemoryPipe, outbound: MemoryPipe, heldPort: MemoryNetwork.Binding?
    ) {
        self.loop = loop
        self.core = core
        self.localAddress = localAddress
        self.remoteAddress = remoteAddress
        self.inbound = inbound
        self.outbound = outbound
        self.heldPort = heldPort
    }

    // MARK: Connection

    public func setHandler(_ handler: any ConnectionHandler) {
        onLoop { $0.setHandlerOnLoop(handler) } ifStopped: { connection in
            if let error = connection.orphanedClose.withLock({ $0.take() }) { handler.connectionDidClose(error: error) }
        }
    }

    public func startReading() {
        onLoop { $0.startReadingOnLoop() }
    }

    public func stopReading() {
        onLoop { $0.reading = false }
    }

    public func write(_ bytes: [UInt8], completion: WriteCompletion?) {
        if loop.inEventLoop {
            writeOnLoop(bytes, completion: completion, counted: false)
            return
        }
        pendingSnapshot.add(bytes.count, ordering: .relaxed)
        onLoop { $0.writeOnLoop(bytes, completion: completion, counted: true) } ifStopped: { connection in
            connection.pendingSnapshot.subtract(bytes.count, ordering: .relaxed)
            completion?(.transportShutdown())
        }
    }

    public func write(borrowing bytes: UnsafeRawBufferPointer, completion: WriteCompletion?) {
        // Memory has no kernel to take the bytes in place: they are copied once, here,
        // and then move into the peer's buffer without another copy when they fit.
        write(Array(bytes), completion: completion)
    }

    public var pendingWriteBytes: Int {
        loop.inEventLoop ? writes.bytes : pendingSnapshot.load(ordering: .relaxed)
    }

    public func shutdownOutput(completion: WriteCompletion?) {
        onLoop { $0.shutdownOutputOnLoop(completion: completion) } ifStopped: { _ in
            completion?(.transportShutdown())
        }
    }

    public func close() {
        onLoop { $0.terminate(.close) }
    }

    public func reset() {
        onLoop { $0.terminate(.reset) }
    }

    // MARK: hops

    /// Runs `work` now on the loop, or hops there; `ifStopped` runs on the calling thread
    /// when the transport's loops have stopped.
    private func onLoop(
        _ work: @escaping @Sendable (MemoryConnection) -> Void,
        ifStopped: (MemoryConnection) -> Void = { _ in }
    ) {
        if loop.inEventLoop {
            work(self)
        } else if !core.submit(to: loop, { [self] in work(self) }) {
            ifStopped(self)
        }
    }

    /// Called from any thread (the peer's loop) when the inbound pipe has news.
    func wakeReader() {
        loop.execute { [self] in schedulePump() }
    }

    /// Called from any thread (the peer's loop) when the outbound pipe has room or the
    /// peer went away.
    func wakeWriter() {
        loop.execute { [self] in
            guard !isClosed else { return }
            flush()
            schedulePump()
        }
    }

    /// Frees the ephemeral port, once.
    func releasePort() {
        guard let heldPort, !portReleased.exchange(true, ordering: .relaxed) else { return }
        MemoryNetwork.shared.release(heldPort)
    }
}
