import DequeModule
import Switchyard
import SwitchyardBackendKit
import Synchronization

/// One end of a simulated connection. See `Connection` for the contract, which
/// `ConnectionStateMachine` keeps and `StreamConnection` fronts; this type moves the
/// bytes as segments (`SimulatedSegment`) over the network's links, in virtual time.
///
/// A small TCP:
/// - A write completes once its bytes are sent: the writer may have at most
///   `window` bytes sent and not yet read by the peer (its receive buffer, in flight
///   included); the rest waits in the state machine's queue until the peer's reads
///   return window (a `SimulatedSegment/window(_:)` segment, which travels the link
///   too). So a peer that does not read pushes the writer back.
/// - Reads are demand-driven: bytes are taken from the receive buffer only while
///   reading, at most 64 KiB per `ConnectionHandler/connectionDidRead(_:)`, handed over
///   at the end of the loop's turn, never inside the user's call.
/// - `close()` sends the peer an end of stream after the bytes already sent;
///   `reset()` sends a reset. Bytes that reach an end that ended are answered with a
///   reset, so a writer to a closed peer ends with `unavailable`/`reset`, as over TCP.
/// - With a stall timeout, the kernel's stall detection (`SimulatedStallDetector`):
///   bytes unacknowledged, or keepalive probes unanswered, for the timeout end the
///   connection with `unavailable`/`stalled`.
///
/// Safety of `@unchecked Sendable`: every stored `var` is touched only on `loop` (public
/// methods hop there first; the network's thread runs every loop), except `registration`
/// (under the network's lock) and `peer` (set once before either end is shared); the
/// state machine's `ConnectionRecord` is what other threads read; the rest is
/// immutable or atomic.
final class SimulatedConnection: StreamConnection, LoopBoundResource, @unchecked Sendable {
    var backendName: String { SimulationTransport.backendName }
    let localAddress: Endpoint
    let remoteAddress: Endpoint

    let loop: SimulatedEventLoop
    var state = ConnectionStateMachine()
    let network: SimulatedNetwork
    private let lifecycle: TransportLifecycle<SimulatedEventLoop>
    /// The other end; weak, so two ends do not keep each other.
    weak var peer: SimulatedConnection?
    /// The ephemeral port this (client) end holds in the network's table.
    private let heldPort: SimulatedBinding?
    private let portReleased = Atomic<Bool>(false)
    /// This end's place in the network's list of open ends.
    var registration: Int?
    /// Whether ``SimulatedFault/stallConnections(host:)`` stalled the connection: its
    /// segments vanish, both ways (set on the network's loop, read on both ends' loops).
    let stalled = Atomic<Bool>(false)
    /// The kernel's stall detection, with a stall timeout (touched on `loop` only).
    private var stallDetector: SimulatedStallDetector?
    /// Whether the peer's end detects stalls, and so wants acknowledgements.
    let detectsStalls: Bool
    /// When the next stall check is scheduled, if one is.
    private var stallCheckAt: Duration?

    /// How many bytes may be sent and not yet read by the peer, as a kernel's socket
    /// buffers hold.
    static let window = 256 * 1024
    /// How many bytes one `ConnectionHandler/connectionDidRead(_:)` hands over at most.
    static let readSize = 64 * 1024
    /// How many reads one turn of the pump delivers before the loop's other work runs.
    static let readsPerTurn = 16

    // Sending.
    /// Bytes that may be sent now.
    private var credit = SimulatedConnection.window
    /// When the last segment sent arrives: the next one never arrives before it.
    var lastArrival: Duration = .zero
    private var answeredWithReset = false

    // Receiving.
    private var inbound = Deque<[UInt8]>()
    /// Bytes of `inbound.first` already read.
    private var headOffset = 0
    private var buffered = 0
    private var peerFinished = false
    private var pumpScheduled = false

    init(
        loop: SimulatedEventLoop, lifecycle: TransportLifecycle<SimulatedEventLoop>, network: SimulatedNetwork,
        localAddress: Endpoint, remoteAddress: Endpoint, heldPort: SimulatedBinding?, stall: StallSettings?
    ) {
        self.loop = loop
        self.stallDetector = stall.map { SimulatedStallDetector(settings: $0, openedAt: network.clock.now) }
        self.detectsStalls = stall != nil
        self.lifecycle = lifecycle
        self.network = network
        self.localAddress = localAddress
        self.remoteAddress = remoteAddress
        self.heldPort = heldPort
    }

    /// Registers with the transport and the network; false when the transport is
    /// shutting down (the caller then discards the connection). `accepted` says whether
    /// a listener accepted it (for the transport's logs and metrics).
    func activate(accepted: Bool) -> Bool {
        guard lifecycle.insertConnection(self, accepted: accepted) else { return false }
        network.opened(self)
        if stallDetector != nil { loop.onLoop { [self] in checkForStall() } }
        return true
    }

    /// Ends a connection that never reached anyone's hands (its transport was shutting
    /// down): frees its port; nothing was sent.
    func abandon() {
        _ = state.end(with: .transportShutdown())
        network.ended(self)
        releasePort()
    }

    // MARK: StreamConnection (the rest of Connection is the toolkit's)

    func sendNow(_ header: UnsafeRawBufferPointer?, _ body: UnsafeRawBufferPointer) -> Int? {
        let headerCount = header?.count ?? 0
        let count = min(credit, headerCount + body.count)
        guard count > 0 else { return 0 }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(count)
        if let header { bytes.append(contentsOf: header.prefix(count)) }
        if count > headerCount { bytes.append(contentsOf: body.prefix(count - headerCount)) }
        credit -= count
        network.transmit(.data(bytes), from: self)
        noteSent(count)
        return count
    }

    func writesQueued() {
        if credit > 0 { loop.execute { [self] in moveQueuedWrites() } }
    }

    func readInterestChanged() {
        if state.shouldRead { schedulePump() }
    }

    func shutDownOutputNow() {
        network.transmit(.fin, from: self)
        if case .some(.some(let completion)) = state.finishOutputShutdown(error: nil) {
            loop.deferCompletion(completion, nil)
        }
    }

    func terminate(_ error: TransportError?, deferCallbacks: Bool) {
        terminate(error, deferCallbacks: deferCallbacks, send: .fin)
    }

    func reset() {
        loop.onLoop { self.terminate(nil, deferCallbacks: true, send: .reset) }
    }

    /// Ends the connection once (`error` nil for a local close or reset): the peer is
    /// sent `send` (an end of stream, a reset, or nothing when the peer reset), the
    /// receive buffer is dropped, the connection leaves its transport and the network and
    /// frees its port, then the state machine's ending reports, at once or at the end of
    /// the turn.
    private func terminate(_ error: TransportError?, deferCallbacks: Bool, send: SimulatedSegment?) {
        guard let ending = state.end(with: error) else { return }
        if let send { network.transmit(send, from: self) }
        inbound.removeAll()
        headOffset = 0
        buffered = 0
        network.ended(self)
        lifecycle.connectionEnded(self)
        releasePort()
        if deferCallbacks { loop.deferToEndOfTurn { ending.run() } } else { ending.run() }
    }

    // MARK: segments from the peer

    /// Takes a segment the network delivered, on the loop.
    func receive(_ segment: SimulatedSegment) {
        if stallDetector != nil, state.isOpen { stallDetector?.heard(at: network.clock.now) }
        switch segment {
        case .data(let bytes):
            guard state.isOpen else {
                // Bytes to an end that ended have nowhere to go: answer with a reset, once.
                if !answeredWithReset {
                    answeredWithReset = true
                    network.transmit(.reset, from: self)
                }
                return
            }
            if peer?.detectsStalls == true { network.transmit(.ack(bytes.count), from: self) }
            inbound.append(bytes)
            buffered += bytes.count
            if state.shouldRead { schedulePump() }
        case .fin:
            guard state.isOpen else { return }
            peerFinished = true
            if state.shouldRead { schedulePump() }
        case .reset:
            terminate(Self.peerReset, deferCallbacks: false, send: nil)
        case .window(let count):
            credit += count
            moveQueuedWrites()
        case .ack(let count):
            stallDetector?.acknowledged(count)
        case .probe:
            if state.isOpen { network.transmit(.ack(0), from: self) } else if !answeredWithReset {
                answeredWithReset = true
                network.transmit(.reset, from: self)
            }
        }
    }

    // MARK: stall detection

    /// `count` bytes left: with stall detection, they must be acknowledged in time.
    private func noteSent(_ count: Int) {
        guard stallDetector != nil else { return }
        let now = network.clock.now
        stallDetector?.sent(count, at: now)
        scheduleStallCheck(at: now + (stallDetector?.settings.timeout ?? .zero))
    }

    /// Runs the stall detector's check now, and does what it says.
    private func checkForStall() {
        stallCheckAt = nil
        guard state.isOpen, let step = stallDetector?.check(at: network.clock.now) else { return }
        switch step {
        case .wait(let time):
            scheduleStallCheck(at: time)
        case .probe(let time):
            network.transmit(.probe, from: self)
            scheduleStallCheck(at: time)
        case .stalled(let detail):
            let error = TransportError(
                code: .unavailable, reason: .stalled,
                message: "no progress within the stall timeout: \(detail) (\(network))")
            terminate(error, deferCallbacks: false, send: nil)
        }
    }

    /// A check at `time`, unless one comes sooner.
    private func scheduleStallCheck(at time: Duration) {
        if let scheduled = stallCheckAt, scheduled <= time { return }
        stallCheckAt = time
        loop.schedule(at: time) { [weak self] in
            guard let self, self.stallCheckAt == time else { return }
            self.checkForStall()
        }
    }

    /// The network reset this end (``SimulatedFault/resetConnections(host:)``): it ends
    /// with `unavailable`/`reset` and its peer hears a reset.
    func resetByNetwork(_ fault: SimulatedFault) {
        let error = TransportError(
            code: .unavailable, reason: .reset,
            message: "the simulated network reset the connection (\(fault), \(network))")
        terminate(error, deferCallbacks: false, send: .reset)
    }

    /// The system reclaimed this end's socket (``SimulatedFault/reclaimSocket(local:remote:)``):
    /// it ends with `unavailable`/`reclaimed`, and the peer hears a reset, as when the
    /// kernel closes a socket with data unread.
    func reclaimedBySystem(_ fault: SimulatedFault) {
        let error = TransportError(
            code: .unavailable, reason: .reclaimed,
            message: "the system reclaimed the socket (\(fault), \(network))")
        terminate(error, deferCallbacks: false, send: .reset)
    }

    /// The host reads again (``SimulatedFault/resumeReading(host:)``).
    func readingResumed() {
        if state.shouldRead { schedulePump() }
    }

    // MARK: writes

    /// Sends as much of the queued writes as the window allows, then reports, from a loop
    /// event: the writes now sent in full complete, a pending output shutdown sends the
    /// end of stream and completes, and a queue that emptied tells the handler it drained.
    private func moveQueuedWrites() {
        guard state.isOpen, !state.writes.isEmpty, credit > 0 else { return }
        var room = min(credit, state.writes.bytes)
        var bytes: [UInt8] = []
        bytes.reserveCapacity(room)
        for entry in state.writes.entries where room > 0 {
            let count = min(room, entry.remaining)
            bytes.append(contentsOf: entry.bytes[entry.offset..<entry.offset + count])
            room -= count
        }
        credit -= bytes.count
        network.transmit(.data(bytes), from: self)
        noteSent(bytes.count)
        var completed: [WriteCompletion] = []
        var shutdown: WriteCompletion?? = nil
        if state.writesTaken(bytes.count, completed: &completed) {
            network.transmit(.fin, from: self)
            shutdown = state.finishOutputShutdown(error: nil)
        }
        let drained = state.writes.isEmpty
        for completion in completed { completion(nil) }
        if case .some(.some(let completion)) = shutdown { completion(nil) }
        if drained, state.isOpen { state.handler?.connectionDidDrainWrites() }
    }

    // MARK: reads

    /// Hands received bytes to the handler at the end of this turn of the loop, so no
    /// callback runs inside the user's call that asked for them.
    private func schedulePump() {
        guard !pumpScheduled else { return }
        pumpScheduled = true
        loop.deferToEndOfTurn { [self] in pump() }
    }

    /// The pump: while reading (and the host reads), the received bytes (a read's worth
    /// at a time, each returning its window to the writer) and then the end of stream.
    private func pump() {
        pumpScheduled = false
        var reads = 0
        while state.isOpen, state.shouldRead {
            if network.isNotReading(localAddress.host) { return }
            guard let chunk = inbound.first else {
                if peerFinished { state.readDidEnd()?.connectionDidReadEnd() }
                return
            }
            if reads == Self.readsPerTurn {
                // Let the loop's other connections run; come back after them.
                pumpScheduled = true
                loop.execute { [self] in pump() }
                return
            }
            reads += 1
            let start = headOffset
            let count = min(chunk.count - start, Self.readSize)
            if start + count == chunk.count {
                inbound.removeFirst()
                headOffset = 0
            } else {
                headOffset += count
            }
            buffered -= count
            network.transmit(.window(count), from: self)
            state.noteReceived(count)
            chunk.withUnsafeBytes { bytes in
                state.handler?.connectionDidRead(UnsafeRawBufferPointer(rebasing: bytes[start..<start + count]))
            }
        }
    }

    /// Frees the ephemeral port, once.
    func releasePort() {
        guard let heldPort, !portReleased.exchange(true, ordering: .relaxed) else { return }
        network.release(heldPort)
    }

    static var peerReset: TransportError {
        TransportError(code: .unavailable, reason: .reset, message: "the peer reset the connection")
    }
}
