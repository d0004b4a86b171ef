import Switchyard
import SwitchyardBackendKit
import Synchronization

/// One end of an in-memory connection. See ``Connection`` for the contract, which
/// ``ConnectionStateMachine`` keeps and ``StreamConnection`` fronts; this type moves the
/// bytes.
///
/// The two ends of a connection are joined by two ``MemoryPipe``s, one per direction;
/// each end lives on a loop of its own transport (the ends may be on different loops,
/// even of different transports). What a TCP socket on loopback does, it does with the
/// pipes:
///
/// - Reads are demand-driven: bytes are taken from the receive buffer only while
///   reading, at most 64 KiB (the loop's read buffer) per
///   ``ConnectionHandler/connectionDidRead(_:)``, handed over at the end of the loop's
///   turn, never inside the user's call (``schedulePump()``).
/// - A write completes once all its bytes are in the peer's receive buffer (the memory
///   equivalent of "in the kernel"). The buffer holds 256 KiB, so a peer that does not
///   read stops the writer's completions; the rest waits in the state machine's queue
///   and moves when the reader frees room.
/// - ``close()`` sends the peer an end of stream after the bytes already in its buffer;
///   ``reset()`` makes the peer end with `unavailable`/`reset` and discards what it had
///   not read. A write to a peer that ended ends this connection with
///   `unavailable`/`reset`. Unlike TCP, closing with unread input still sends an end of
///   stream, not a reset.
/// - Callbacks run on the loop, never inside the user's call: those a call causes run
///   at the end of the loop's turn (the toolkit defers them), those the peer causes in
///   the loop task its wake-up queued (``wakeReader()``, ``wakeWriter()``).
///
/// Safety of `@unchecked Sendable`: every stored `var` is touched only on `loop` (public
/// methods hop there first); the state machine's ``ConnectionRecord`` is what other
/// threads read; the pipes are `Sendable` on their own; the rest is immutable or atomic.
final class MemoryConnection: StreamConnection, LoopBoundResource, @unchecked Sendable {
    var backendName: String { MemoryTransport.backendName }
    let localAddress: Endpoint
    let remoteAddress: Endpoint

    let loop: WorkerEventLoop
    var state = ConnectionStateMachine()
    private let lifecycle: TransportLifecycle<WorkerEventLoop>
    /// Bytes from the peer to this end.
    let inbound: MemoryPipe
    /// Bytes from this end to the peer.
    let outbound: MemoryPipe
    /// The ephemeral port this (client) end holds in the network table.
    private let heldPort: MemoryNetwork.Binding?
    private let portReleased = Atomic<Bool>(false)
    /// Whether a turn of the pump is due.
    var pumpScheduled = false

    init(
        loop: WorkerEventLoop, lifecycle: TransportLifecycle<WorkerEventLoop>, localAddress: Endpoint,
        remoteAddress: Endpoint, inbound: MemoryPipe, outbound: MemoryPipe, heldPort: MemoryNetwork.Binding?
    ) {
        self.loop = loop
        self.lifecycle = lifecycle
        self.localAddress = localAddress
        self.remoteAddress = remoteAddress
        self.inbound = inbound
        self.outbound = outbound
        self.heldPort = heldPort
    }

    /// Registers with the transport; false when it is shutting down (the caller then
    /// discards the connection).
    /// `accepted` says whether a listener accepted it (for the transport's logs and metrics).
    func activate(accepted: Bool) -> Bool {
        lifecycle.insertConnection(self, accepted: accepted)
    }

    /// Ends a connection that never reached its loop nor anyone's hands (its transport
    /// was shutting down), so nothing else can touch it: unties the pipes and frees
    /// the port.
    func abandon() {
        _ = state.end(with: .transportShutdown())
        outbound.finish()?.wakeReader()
        inbound.closeReader()?.wakeWriter()
        releasePort()
    }

    // MARK: StreamConnection (the rest of Connection is the toolkit's)

    func sendNow(_ header: UnsafeRawBufferPointer?, _ body: UnsafeRawBufferPointer) -> Int? {
        switch outbound.send(header, body) {
        case .moved(let count, let wake):
            wake?.wakeReader()
            return count
        case .peerGone:
            terminate(Self.peerGone, deferCallbacks: true)
            return nil
        }
    }

    func writesQueued() {
        if outbound.writerWaits() { wakeWriter() }
    }

    func readInterestChanged() {
        if state.shouldRead { schedulePump() }
    }

    func shutDownOutputNow() {
        outbound.finish()?.wakeReader()
        if case .some(.some(let completion)) = state.finishOutputShutdown(error: nil) {
            loop.deferCompletion(completion, nil)
        }
    }

    func terminate(_ error: TransportError?, deferCallbacks: Bool) {
        terminate(error, deferCallbacks: deferCallbacks, reset: false)
    }

    func reset() {
        loop.onLoop { self.terminate(nil, deferCallbacks: true, reset: true) }
    }

    /// Ends the connection once (`error` nil for a local close or reset): the peer is
    /// told (end of stream after what its buffer holds, or with `reset` a reset), the
    /// inbound buffer is dropped, the connection leaves its transport and frees its
    /// port, then the state machine's ending reports, at once or at the end of the turn.
    private func terminate(_ error: TransportError?, deferCallbacks: Bool, reset: Bool) {
        guard let ending = state.end(with: error) else { return }
        if reset {
            outbound.resetByWriter()?.wakeReader()
        } else {
            outbound.finish()?.wakeReader()
        }
        inbound.closeReader()?.wakeWriter()
        lifecycle.connectionEnded(self)
        releasePort()
        if deferCallbacks { loop.deferToEndOfTurn { ending.run() } } else { ending.run() }
    }

    // MARK: the pipes' wake-ups

    /// Called from any thread (the peer's loop) when the inbound pipe has news.
    func wakeReader() {
        loop.execute { [self] in schedulePump() }
    }

    /// Called from any thread (the peer's loop, or this one) when the outbound pipe has
    /// room or the peer went away.
    func wakeWriter() {
        loop.execute { [self] in moveQueuedWrites() }
    }

    /// Moves queued writes into the peer's buffer, then reports, from a loop event: the
    /// writes now all there complete, a pending output shutdown sends the end of stream
    /// and completes, and a queue that emptied tells the handler it drained.
    private func moveQueuedWrites() {
        guard state.isOpen, !state.writes.isEmpty else { return }
        switch outbound.move(from: state.writes) {
        case .peerGone:
            terminate(Self.peerGone, deferCallbacks: false)
        case .moved(let count, let wake):
            wake?.wakeReader()
            var completed: [WriteCompletion] = []
            var shutdown: WriteCompletion?? = nil
            if state.writesTaken(count, completed: &completed) {
                outbound.finish()?.wakeReader()
                shutdown = state.finishOutputShutdown(error: nil)
            }
            let drained = state.writes.isEmpty
            for completion in completed { completion(nil) }
            if case .some(.some(let completion)) = shutdown { completion(nil) }
            if drained, state.isOpen { state.handler?.connectionDidDrainWrites() }
        }
    }

    /// Frees the ephemeral port, once.
    func releasePort() {
        guard let heldPort, !portReleased.exchange(true, ordering: .relaxed) else { return }
        MemoryNetwork.shared.release(heldPort)
    }

    static var peerGone: TransportError {
        TransportError(
            code: .unavailable, reason: .reset, message: "the peer closed the connection; writing to it was reset")
    }
}
