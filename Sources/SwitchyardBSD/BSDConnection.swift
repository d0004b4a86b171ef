import DequeModule
import Glibc
import Switchyard
import SwitchyardBackendKit
import Synchronization

/// A TCP connection on an epoll loop. See ``Connection`` for the contract.
///
/// Reads go into the loop's shared buffer and are handed to the handler borrowed, so a
/// read allocates nothing. A write is sent at once when nothing is queued; only the part
/// the kernel did not take is queued, and queued writes are gathered into one `sendmsg`.
///
/// Safety of `@unchecked Sendable`: every stored `var` is touched only on `loop`
/// (public methods hop there first); `queuedBytesSnapshot` is atomic.
final class BSDConnection: Connection, Selectable, LoopResource, @unchecked Sendable {
    let loop: EpollEventLoop
    private let localSocketAddress: SocketAddress
    private let remoteSocketAddress: SocketAddress
    /// Formatted when asked (not per accepted connection: formatting allocates).
    var localAddress: Endpoint { localSocketAddress.endpoint }
    var remoteAddress: Endpoint { remoteSocketAddress.endpoint }
    var backendName: String { "bsd" }
    var eventLoop: any EventLoop { loop }

    private let registry: ResourceRegistry
    private var socket: Socket?
    private let fd: CInt
    private var handler: (any ConnectionHandler)?

    private enum Lifecycle { case open, closed(TransportError) }
    private var lifecycle = Lifecycle.open
    private var wantsRead = false
    private var readEnded = false
    /// Not in the loop's epoll set: after a hang-up while nobody reads (so level-triggered
    /// HUP does not spin the loop), once the read side ended with nothing left to write
    /// (nothing more to watch for; closing then needs no EPOLL_CTL_DEL), and for an
    /// accepted connection until its new owner has had the chance to ask for reads (see
    /// ``activate(registeringAtOnce:)``). Re-added, with the events wanted, when reading
    /// or writing needs it.
    private var parked = false
    private var registeredEvents: UInt32 = 0

    private struct PendingWrite {
        var bytes: [UInt8]
        var offset: Int
        var completion: WriteCompletion?
    }
    /// Loop-confined and touched on every write: no runtime exclusivity check.
    @exclusivity(unchecked) private var writeQueue = Deque<PendingWrite>()
    private var queuedBytes = 0
    private let queuedBytesSnapshot = Atomic<Int>(0)

    private enum Output { case open, shutdownPending(WriteCompletion?), shutdown }
    private var output = Output.open

    /// With a stall timeout: the loop's monitor and this connection's detector (see
    /// ``StallMonitor``). `wroteSinceSweep` is all the write path does for it.
    private let stallMonitor: StallMonitor?
    private var stallDetector: StallDetector?
    private var wroteSinceSweep = false

    init(
        socket: consuming Socket, loop: EpollEventLoop, local: SocketAddress, remote: SocketAddress, registry: ResourceRegistry,
        stall: StallMonitors?
    ) {
        self.fd = socket.descriptor
        self.socket = .some(socket)
        self.loop = loop
        self.localSocketAddress = local
        self.remoteSocketAddress = remote
        self.registry = registry
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
    func activate(registeringAtOnce: Bool = true) throws(TransportError) {
        loop.assertInLoop()
        guard registry.insert(self) else {
            closeDescriptor()
            lifecycle = .closed(.transportShutdown())
            throw TransportError.transportShutdown()
        }
        if registeringAtOnce {
            do {
                try loop.register(fd, events: 0, object: self)
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
        guard case .open = lifecycle, parked, !readEnded else { return }
        unpark(events: 0)
    }

    /// The error for a failed system call on this connection: the errno table's, except
    /// that with a stall timeout the kernel's stall errors mean `stalled`.
    private func failure(_ error: SyscallError, while doing: String) -> TransportError {
        failure(errno: error.errno, message: "\(doing): \(error.call) failed")
    }

    private func failure(errno code: CInt, message: String) -> TransportError {
        ErrnoTable.connectionError(errno: code, message: message, stallDetection: stallMonitor != nil)
    }

    /// Runs `work` on the loop. If the loop has stopped, the transport shut down and
    /// ended this connection before it stopped its loops (its state is final and no
    /// longer touched by the loop), so `ifStopped` runs here instead: nothing is lost.
    private func hop(_ work: @escaping @Sendable () -> Void, ifStopped: () -> Void = {}) {
        if !loop.submit(work) { ifStopped() }
    }

    /// Closes the descriptor of a connection that never reached its loop (the loop had
    /// stopped): nothing else can touch it.
    func abandon() {
        socket.take()?.close()
        lifecycle = .closed(.transportShutdown())
    }

    // MARK: Connection

    func setHandler(_ handler: any ConnectionHandler) {
        guard loop.inEventLoop else {
            hop({ self.setHandler(handler) }, ifStopped: {
                let error: TransportError? = self.terminalError == .closedLocally() ? nil : self.terminalError
                handler.connectionDidClose(error: error)
            })
            return
        }
        if case .closed(let failure) = lifecycle {
            // It ended before anyone listened: tell the new handler, once.
            let error: TransportError? = failure == .closedLocally() ? nil : failure
            loop.deferToEndOfTurn { handler.connectionDidClose(error: error) }
            return
        }
        self.handler = handler
    }

    func startReading() {
        guard loop.inEventLoop else {
            hop { self.startReading() }
            return
        }
        guard case .open = lifecycle, !wantsRead else { return }
        wantsRead = true
        updateInterest()
    }

    func stopReading() {
        guard loop.inEventLoop else {
            hop { self.stopReading() }
            return
        }
        guard case .open = lifecycle, wantsRead else { return }
        wantsRead = false
        updateInterest()
    }

    var pendingWriteBytes: Int {
        loop.inEventLoop ? queuedBytes : queuedBytesSnapshot.load(ordering: .relaxed)
    }

    func write(_ bytes: [UInt8], completion: WriteCompletion?) {
        guard loop.inEventLoop else {
            hop({ self.write(bytes, completion: completion) }, ifStopped: { completion?(self.terminalError) })
            return
        }
        bytes.withUnsafeBytes { _ = writeOnLoop($0, owned: bytes, completion: completion, reportingSentNow: false) }
    }

    func writeNowOrQueue(_ bytes: [UInt8], completion: WriteCompletion?) -> Bool {
        guard loop.inEventLoop else {
            write(bytes, completion: completion)
            return false
        }
        return bytes.withUnsafeBytes { writeOnLoop($0, owned: bytes, completion: completion, reportingSentNow: true) }
    }

    func writeNowOrQueue(header: UnsafeRawBufferPointer, payload: [UInt8], completion: WriteCompletion?) -> Bool {
        guard loop.inEventLoop else {
            var joined = Array(header)
            joined.append(contentsOf: payload)
            write(joined, completion: completion)
            return false
        }
        if let refusal = writeRefusal() {
            if let completion { loop.deferCompletion(completion, refusal) }
            return false
        }
        wroteSinceSweep = true
        var written = 0
        if writeQueue.isEmpty {
            // One gathered send; the iovecs point into `header` and `payload`, both alive
            // for the call.
            let sent: Int? = payload.withUnsafeBytes { body in
                let vectors = loop.writeVectors
                vectors[0] = iovec(iov_base: UnsafeMutableRawPointer(mutating: header.baseAddress), iov_len: header.count)
                vectors[1] = iovec(iov_base: UnsafeMutableRawPointer(mutating: body.baseAddress), iov_len: body.count)
                return sendGatheredNow(vectors, count: body.isEmpty ? 1 : 2, total: header.count + body.count)
            }
            guard let sent else {
                if let completion { loop.deferCompletion(completion, self.terminalError) }
                return false
            }
            if sent == header.count + payload.count { return true }
            written = sent
        }
        if written < header.count {
            enqueue(PendingWrite(bytes: Array(UnsafeRawBufferPointer(rebasing: header[written...])), offset: 0, completion: nil))
            written = 0
        } else {
            written -= header.count
        }
        enqueue(PendingWrite(bytes: payload, offset: written, completion: completion))
        return false
    }

    func write(borrowing bytes: UnsafeRawBufferPointer, completion: WriteCompletion?) {
        guard loop.inEventLoop else {
            let copy = Array(bytes)
            hop({ self.write(copy, completion: completion) }, ifStopped: { completion?(self.terminalError) })
            return
        }
        _ = writeOnLoop(bytes, owned: nil, completion: completion, reportingSentNow: false)
    }

    /// Every write path, on the loop: send at once when nothing is queued; queue the
    /// array itself (`owned`, no copy) or a copy of only what the kernel did not take.
    /// Returns true when the kernel took every byte at once and `reportingSentNow` asked
    /// to hear so instead of a completion (which is then not run).
    private func writeOnLoop(
        _ bytes: UnsafeRawBufferPointer, owned: [UInt8]?, completion: WriteCompletion?, reportingSentNow: Bool
    ) -> Bool {
        if let refusal = writeRefusal() {
            if let completion { loop.deferCompletion(completion, refusal) }
            return false
        }
        wroteSinceSweep = true
        var written = 0
        if writeQueue.isEmpty {
            guard let sent = sendNow(bytes) else {
                if let completion { loop.deferCompletion(completion, self.terminalError) }
                return false
            }
            if sent == bytes.count {
                if reportingSentNow { return true }
                if let completion { loop.deferCompletion(completion, nil) }
                return false
            }
            written = sent
        }
        if let owned {
            enqueue(PendingWrite(bytes: owned, offset: written, completion: completion))
        } else {
            enqueue(PendingWrite(bytes: Array(UnsafeRawBufferPointer(rebasing: bytes[written...])), offset: 0, completion: completion))
        }
        return false
    }

    func shutdownOutput(completion: WriteCompletion?) {
        guard loop.inEventLoop else {
            hop({ self.shutdownOutput(completion: completion) }, ifStopped: { completion?(self.terminalError) })
            return
        }
        if let refusal = writeRefusal() {
            if let completion { loop.deferCompletion(completion, refusal) }
            return
        }
        wroteSinceSweep = true
        if writeQueue.isEmpty {
            output = .shutdown
            let failure = shutdownWriteSide()
            if let completion { loop.deferCompletion(completion, failure) }
        } else {
            output = .shutdownPending(completion)
        }
    }

    func close() {
        guard loop.inEventLoop else {
            hop { self.close() }
            return
        }
        guard case .open = lifecycle else { return }
        terminate(nil, deferCallbacks: true)
    }

    func reset() {
        guard loop.inEventLoop else {
            hop { self.reset() }
            return
        }
        guard case .open = lifecycle else { return }
        try? Posix.setLingerZero(fd)
        terminate(nil, deferCallbacks: true)
    }

    // MARK: LoopResource

    func terminate(with error: TransportError) {
        guard case .open = lifecycle else { return }
        terminate(error, deferCallbacks: false)
    }

    // MARK: events

    func handleEvents(_ events: UInt32) {
        guard case .open = lifecycle else { return }
        if events & Posix.Events.error != 0 {
            let code = (try? Posix.socketError(fd)) ?? 0
            if code != 0 {
                terminate(failure(errno: code, message: "connection to \(remoteAddress)"), deferCallbacks: false)
                return
            }
        }
        if events & Posix.Events.output != 0 {
            flush()
            guard case .open = lifecycle else { return }
        }
        if events & (Posix.Events.input | Posix.Events.hangup) != 0 {
            if wantsRead && !readEnded {
                readAvailable()
            } else if events & Posix.Events.hangup != 0 && writeQueue.isEmpty {
                park()
            }
        }
    }

    private func readAvailable() {
        let buffer = loop.readBuffer
        var rounds = 0
        while wantsRead, !readEnded, case .open = lifecycle, rounds < 16 {
            rounds += 1
            do {
                switch try Posix.receive(fd, into: buffer) {
                case .wouldBlock:
                    return
                case .done(0):
                    readEnded = true
                    updateInterest()
                    handler?.connectionDidReadEnd()
                    return
                case .done(let count):
                    handler?.connectionDidRead(UnsafeRawBufferPointer(rebasing: buffer[..<count]))
                    if count < buffer.count { return }
                }
            } catch {
                terminate(failure(error, while: "reading from \(remoteAddress)"), deferCallbacks: false)
                return
            }
        }
    }

    // MARK: stalls

    /// Feeds the stall detector, if the connection may hold data (called by the loop's
    /// ``StallMonitor``, on the loop). Returns how long it waited if it is stalled.
    func checkProgress(at now: ContinuousClock.Instant) -> Duration? {
        guard case .open = lifecycle, var detector = stallDetector,
              detector.needsObservation(wroteSinceLastObservation: wroteSinceSweep)
        else { return nil }
        wroteSinceSweep = false
        // A socket that cannot say (it broke underneath) is left to its next I/O.
        guard let info = try? Posix.tcpInfo(fd) else { return nil }
        let action = detector.observe(info, queuedBytes: queuedBytes, at: now)
        stallDetector = detector
        guard case .stall(let waited) = action else { return nil }
        return waited
    }

    /// Ends a stalled connection: aborted (linger 0, so the kernel drops its state at
    /// once), with `unavailable`/`stalled`.
    func endStalled(waited: Duration, timeout: Duration) {
        guard case .open = lifecycle else { return }
        try? Posix.setLingerZero(fd)
        terminate(TransportError(
            code: .unavailable, reason: .stalled,
            message: "the connection to \(remoteAddress) stalled: data in flight went unacknowledged for \(waited) (the stall timeout is \(timeout))"),
            deferCallbacks: false)
    }

    // MARK: writing

    /// Why a write cannot start, or nil.
    private func writeRefusal() -> TransportError? {
        if case .closed(let error) = lifecycle { return error }
        if case .open = output { return nil }
        return .outputShutdown()
    }

    private var terminalError: TransportError {
        if case .closed(let error) = lifecycle { return error }
        return .closedLocally()
    }

    /// ``sendNow(_:)`` for `count` iovecs holding `total` bytes.
    private func sendGatheredNow(_ vectors: UnsafeMutablePointer<iovec>, count: Int, total: Int) -> Int? {
        if total == 0 { return 0 }
        do {
            switch try Posix.sendGathered(fd, vectors, count: count) {
            case .done(let sent): return sent
            case .wouldBlock: return 0
            }
        } catch {
            terminate(failure(error, while: "writing to \(remoteAddress)"), deferCallbacks: true)
            return nil
        }
    }

    /// Sends at once; the count the kernel took, or nil after a failure that ended the
    /// connection (its callbacks deferred, since a user call is on the stack).
    private func sendNow(_ bytes: UnsafeRawBufferPointer) -> Int? {
        if bytes.isEmpty { return 0 }
        do {
            switch try Posix.send(fd, bytes) {
            case .done(let count): return count
            case .wouldBlock: return 0
            }
        } catch {
            terminate(failure(error, while: "writing to \(remoteAddress)"), deferCallbacks: true)
            return nil
        }
    }

    private func enqueue(_ write: PendingWrite) {
        writeQueue.append(write)
        queuedBytes += write.bytes.count - write.offset
        queuedBytesSnapshot.store(queuedBytes, ordering: .relaxed)
        updateInterest()
    }

    /// Sends queued writes, gathered, until the kernel stops taking them.
    private func flush() {
        var completed: [WriteCompletion] = []
        while !writeQueue.isEmpty {
            let vectors = loop.writeVectors
            var count = 0
            var offered = 0
            // The pointers stay valid: each array is held by the queue, unmutated, until
            // after the send below.
            for write in writeQueue.prefix(EpollEventLoop.writeVectorCount) {
                let remaining = write.bytes.count - write.offset
                if remaining == 0 { continue }
                let base = write.bytes.withUnsafeBytes { $0.baseAddress! } + write.offset
                vectors[count] = iovec(iov_base: UnsafeMutableRawPointer(mutating: base), iov_len: remaining)
                count += 1
                offered += remaining
            }
            var sent = 0
            if count > 0 {
                do {
                    switch try Posix.sendGathered(fd, vectors, count: count) {
                    case .wouldBlock: sent = -1
                    case .done(let n): sent = n
                    }
                } catch {
                    terminate(failure(error, while: "writing to \(remoteAddress)"), deferCallbacks: false)
                    for completion in completed { completion(nil) }
                    return
                }
            }
            if sent < 0 { break }
            queuedBytes -= sent
            var left = sent
            while let first = writeQueue.first {
                let remaining = first.bytes.count - first.offset
                if remaining <= left {
                    left -= remaining
                    let done = writeQueue.removeFirst()
                    if let completion = done.completion { completed.append(completion) }
                } else {
                    writeQueue[writeQueue.startIndex].offset += left
                    left = 0
                    break
                }
            }
            if sent < offered { break }
        }
        queuedBytesSnapshot.store(queuedBytes, ordering: .relaxed)
        let drained = writeQueue.isEmpty
        var shutdownCompletion: WriteCompletion?? = nil
        var shutdownFailure: TransportError?
        if drained, case .shutdownPending(let completion) = output {
            output = .shutdown
            shutdownFailure = shutdownWriteSide()
            shutdownCompletion = .some(completion)
        }
        updateInterest()
        for completion in completed { completion(nil) }
        if case .some(.some(let completion)) = shutdownCompletion { completion(shutdownFailure) }
        if drained, case .open = lifecycle { handler?.connectionDidDrainWrites() }
    }

    private func shutdownWriteSide() -> TransportError? {
        do {
            try Posix.shutdown(fd, how: Posix.shutdownWrite)
            return nil
        } catch {
            return ErrnoTable.error(error, while: "shutting down output to \(remoteAddress)")
        }
    }

    // MARK: interest, parking, ending

    private func updateInterest() {
        guard case .open = lifecycle else { return }
        var events: UInt32 = 0
        if wantsRead && !readEnded { events |= Posix.Events.input }
        if !writeQueue.isEmpty { events |= Posix.Events.output }
        if parked {
            guard events != 0 else { return }
            unpark(events: events)
            return
        }
        guard events != registeredEvents else { return }
        if events == 0 && readEnded {
            park()
            return
        }
        do {
            try loop.reregister(fd, events: events)
            registeredEvents = events
        } catch {
            terminate(failure(error, while: "watching \(remoteAddress)"), deferCallbacks: true)
        }
    }

    private func park() {
        guard !parked else { return }
        loop.deregister(fd)
        parked = true
        registeredEvents = 0
    }

    private func unpark(events: UInt32) {
        parked = false
        do {
            try loop.register(fd, events: events, object: self)
            registeredEvents = events
        } catch {
            terminate(failure(error, while: "watching \(remoteAddress)"), deferCallbacks: true)
        }
    }

    private func closeDescriptor() {
        if !parked { loop.deregister(fd) }
        socket.take()?.close()
    }

    /// Ends the connection once: `error` nil for a local close. Pending writes complete
    /// with the error (or `cancelled`/`closed`), then the handler hears of the close.
    private func terminate(_ error: TransportError?, deferCallbacks: Bool) {
        guard case .open = lifecycle else { return }
        let failure = error ?? .closedLocally()
        lifecycle = .closed(failure)
        closeDescriptor()
        registry.remove(self)
        stallMonitor?.remove(self)
        let writes = writeQueue
        writeQueue.removeAll()
        queuedBytes = 0
        queuedBytesSnapshot.store(0, ordering: .relaxed)
        var shutdownCompletion: WriteCompletion?
        if case .shutdownPending(let completion) = output { shutdownCompletion = completion }
        let handler = self.handler
        self.handler = nil
        let callbacks = {
            for write in writes { write.completion?(failure) }
            shutdownCompletion?(failure)
            handler?.connectionDidClose(error: error)
        }
        if deferCallbacks { loop.deferToEndOfTurn(callbacks) } else { callbacks() }
    }
}
