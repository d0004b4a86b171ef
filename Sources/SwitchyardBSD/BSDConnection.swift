import Glibc
import Switchyard
import SwitchyardBackendKit
import SwitchyardPosix

/// A TCP connection on an epoll loop. See ``Connection`` for the contract, which
/// ``ConnectionStateMachine`` keeps and ``StreamConnection`` fronts; the toolkit's
/// ``DescriptorStreamConnection`` sends, flushes and reads; this type watches the
/// descriptor, parks it, and detects stalls.
///
/// Reads go into the loop's shared buffer and are handed to the handler borrowed, so a
/// read allocates nothing. A write is sent at once when nothing is queued; only the part
/// the kernel did not take is queued, and queued writes are gathered into one `sendmsg`.
///
/// Safety of `@unchecked Sendable`: every stored `var` is touched only on `loop`
/// (public methods hop there first); the state machine's ``ConnectionRecord`` is what
/// other threads read.
final class BSDConnection: DescriptorStreamConnection, Selectable, LoopBoundResource, @unchecked Sendable {
    let loop: EpollEventLoop
    private let localSocketAddress: CompactSocketAddress
    private let remoteSocketAddress: CompactSocketAddress
    /// Formatted when asked (not per accepted connection: formatting allocates).
    var localAddress: Endpoint { localSocketAddress.endpoint }
    var remoteAddress: Endpoint { remoteSocketAddress.endpoint }
    var backendName: String { "bsd" }

    private let lifecycle: TransportLifecycle<EpollEventLoop>
    private var socket: Socket?
    let descriptor: CInt
    /// The socket `descriptor` held when the connection was made: an error that ends
    /// the connection is `reclaimed` if the descriptor no longer holds it (see
    /// ``SocketIdentity``; nil only if `fstat` failed on the fresh socket).
    let socketIdentity: SocketIdentity?
    /// Loop-confined and touched on every write: no runtime exclusivity check.
    @exclusivity(unchecked) var state = ConnectionStateMachine()
    /// Completions collected by a flush, run after the state settled (reused).
    var finishedWrites: [WriteCompletion] = []

    /// Not in the loop's epoll set: after a hang-up while nobody reads (so level-triggered
    /// HUP does not spin the loop), once the read side ended with nothing left to write
    /// (nothing more to watch for; closing then needs no EPOLL_CTL_DEL), and for an
    /// accepted connection until its new owner has had the chance to ask for reads (see
    /// ``activate(registeringAtOnce:)``). Re-added, with the events wanted, when reading
    /// or writing needs it.
    private var parked = false
    private var registeredEvents: UInt32 = 0

    /// With a stall timeout: the loop's monitor and this connection's detector (see
    /// ``StallMonitor``). `wroteSinceSweep` is all the write path does for it.
    private let stallMonitor: StallMonitor?
    private var stallDetector: StallDetector?
    private var wroteSinceSweep = false

    init(
        socket: consuming Socket, loop: EpollEventLoop, local: SystemSocketAddress, remote: SystemSocketAddress,
        lifecycle: TransportLifecycle<EpollEventLoop>, stall: StallMonitors?
    ) {
        self.descriptor = socket.descriptor
        self.socketIdentity = SocketIdentity(descriptor: socket.descriptor)
        self.socket = .some(socket)
        self.loop = loop
        self.localSocketAddress = CompactSocketAddress(local)
        self.remoteSocketAddress = CompactSocketAddress(remote)
        self.lifecycle = lifecycle
        self.stallMonitor = stall?.monitor(for: loop)
        self.stallDetector = stall.map { StallDetector(timeout: $0.settings.timeout) }
    }

    /// Registers with the loop (interest in nothing yet: errors and hang-ups still
    /// arrive) and with the transport. Call on the loop. Throws when the transport is
    /// shutting down or epoll refuses.
    ///
    /// With `registeringAtOnce` false (the listener's accept path) the epoll registration
    /// waits for ``finishActivation()``, called once the connection was handed over: an
    /// owner that starts reading in between registers it with EPOLLIN in one
    /// EPOLL_CTL_ADD, rather than an ADD for nothing and a MOD for input.
    /// `accepted` says whether a listener accepted it (for the transport's logs and metrics).
    func activate(registeringAtOnce: Bool = true, accepted: Bool = false) throws(TransportError) {
        loop.assertInLoop()
        guard lifecycle.insertConnection(self, accepted: accepted) else {
            socket.take()?.close()
            _ = state.end(with: .transportShutdown())
            throw TransportError.transportShutdown()
        }
        if registeringAtOnce {
            do {
                try loop.register(descriptor, events: 0, object: self)
            } catch {
                let failure = ErrnoTable.error(error, while: "registering a connection")
                terminate(failure, deferCallbacks: false)
                throw failure
            }
        } else {
            parked = true
        }
        stallMonitor?.add(self)
    }

    /// After `activate(registeringAtOnce: false)` and the hand-over: registers the
    /// connection (for errors and hang-ups) if its owner did not already ask for reads
    /// or writes. Call on the loop.
    func finishActivation() {
        loop.assertInLoop()
        guard state.isOpen, parked, !state.readEnded else { return }
        unpark(events: 0)
    }

    /// The error for a failed system call on this connection: the errno table's, except
    /// that with a stall timeout (and the kernel's help, ``StallSettings/kernelDetection``)
    /// the kernel's stall errors mean `stalled`, and that it is
    /// `reclaimed` when the descriptor no longer holds the connection's socket (checked
    /// once, here, on the way to ending the connection: `EPIPE` from a fresh socket
    /// `dup2`ed over it would otherwise read as a reset, `ENOENT`/`EPERM` from
    /// `epoll_ctl` as an internal or permission error).
    func transportError(_ error: SyscallError, while doing: String) -> TransportError {
        failure(errno: error.errno, message: "\(doing): \(error.call) failed")
    }

    private func failure(errno code: CInt, message: String) -> TransportError {
        let error = ErrnoTable.connectionError(errno: code, message: message, stallDetection: stallMonitor?.settings.kernelDetection == true)
        return socketIdentity?.connectionError(error, descriptor: descriptor) ?? error
    }

    /// Closes the descriptor of a connection that never reached its loop (the loop had
    /// stopped): nothing else can touch it.
    func abandon() {
        socket.take()?.close()
        _ = state.end(with: .transportShutdown())
    }

    // MARK: StreamConnection (the rest of Connection is the toolkit's)

    func sendNow(_ header: UnsafeRawBufferPointer?, _ body: UnsafeRawBufferPointer) -> Int? {
        wroteSinceSweep = true
        return sendToDescriptor(header, body)
    }

    func writesQueued() {
        wroteSinceSweep = true
        updateInterest()
    }

    func readInterestChanged() {
        updateInterest()
    }

    func shutDownOutputNow() {
        wroteSinceSweep = true
        shutDownDescriptorOutput()
    }

    func reset() {
        loop.onLoop {
            guard self.state.isOpen else { return }
            try? Posix.setLingerZero(self.descriptor)
            self.terminate(nil, deferCallbacks: true)
        }
    }

    // MARK: events

    func handleEvents(_ events: UInt32) {
        guard state.isOpen else { return }
        if events & Posix.Events.error != 0 {
            let code = (try? Posix.socketError(descriptor)) ?? 0
            if code != 0 {
                terminate(failure(errno: code, message: "connection to \(remoteAddress)"), deferCallbacks: false)
                return
            }
        }
        if events & Posix.Events.output != 0 {
            flushWrites()
            guard state.isOpen else { return }
        }
        if events & (Posix.Events.input | Posix.Events.hangup) != 0 {
            if state.shouldRead {
                readAvailable()
            } else if events & Posix.Events.hangup != 0 && state.writes.isEmpty {
                park()
            }
        }
    }

    // MARK: stalls

    /// Feeds the stall detector, if the connection may hold data (called by the loop's
    /// ``StallMonitor``, on the loop). Returns how long it waited if it is stalled.
    func checkProgress(at now: ContinuousClock.Instant) -> Duration? {
        guard state.isOpen, var detector = stallDetector,
              detector.needsObservation(wroteSinceLastObservation: wroteSinceSweep)
        else { return nil }
        wroteSinceSweep = false
        // A socket that cannot say (it broke underneath) is left to its next I/O.
        guard let info = try? Posix.tcpInfo(descriptor) else { return nil }
        let action = detector.observe(info, queuedBytes: state.pendingWriteBytes, at: now)
        stallDetector = detector
        guard case .stall(let waited) = action else { return nil }
        return waited
    }

    /// Ends a stalled connection: aborted (linger 0, so the kernel drops its state at
    /// once), with `unavailable`/`stalled`.
    func endStalled(waited: Duration, timeout: Duration) {
        guard state.isOpen else { return }
        lifecycle.observer.stallDetected(waited: waited)
        try? Posix.setLingerZero(descriptor)
        terminate(TransportError(
            code: .unavailable, reason: .stalled,
            message: "the connection to \(remoteAddress) stalled: data in flight went unacknowledged for \(waited) (the stall timeout is \(timeout)): \(StallMonitor.detectorNote)"),
            deferCallbacks: false)
    }

    // MARK: interest, parking, ending

    func updateInterest() {
        guard state.isOpen else { return }
        var events: UInt32 = 0
        if state.shouldRead { events |= Posix.Events.input }
        if !state.writes.isEmpty { events |= Posix.Events.output }
        if parked {
            guard events != 0 else { return }
            unpark(events: events)
            return
        }
        guard events != registeredEvents else { return }
        if events == 0 && state.readEnded {
            park()
            return
        }
        do {
            try loop.reregister(descriptor, events: events)
            registeredEvents = events
        } catch {
            terminate(transportError(error, while: "watching \(remoteAddress)"), deferCallbacks: true)
        }
    }

    private func park() {
        guard !parked else { return }
        loop.deregister(descriptor)
        parked = true
        registeredEvents = 0
    }

    private func unpark(events: UInt32) {
        parked = false
        do {
            try loop.register(descriptor, events: events, object: self)
            registeredEvents = events
        } catch {
            terminate(transportError(error, while: "watching \(remoteAddress)"), deferCallbacks: true)
        }
    }

    /// Ends the connection once (`error` nil for a local close): the descriptor closes
    /// now, then the state machine's ending reports, at once or at the end of the turn.
    func terminate(_ error: TransportError?, deferCallbacks: Bool) {
        guard let ending = state.end(with: error) else { return }
        if !parked { loop.deregister(descriptor) }
        socket.take()?.close()
        lifecycle.connectionEnded(self)
        stallMonitor?.remove(self)
        if deferCallbacks { loop.deferToEndOfTurn { ending.run() } } else { ending.run() }
    }
}
