import Glibc
import Switchyard
import SwitchyardBackendKit

/// A Unix-domain stream connection on a ``UnixEventLoop``. The ``Connection`` contract
/// is kept by the toolkit's ``ConnectionStateMachine``; this type does the system calls.
///
/// Reads go into the loop's buffer and reach the handler borrowed. A write goes to the
/// kernel at once when nothing is queued; only what the kernel did not take is queued,
/// and queued writes leave gathered in one `sendmsg` (with `MSG_NOSIGNAL`: a peer that
/// went away is `unavailable`/`reset`, never a SIGPIPE).
///
/// The descriptor is in the loop's epoll set only while it waits for something (reads
/// asked for, or writes queued): a hang-up nobody waits for cannot spin the loop, and it
/// is found by the next read or write.
///
/// ``reset()``: Unix-domain sockets have no reset. The connection closes; the peer sees
/// `unavailable`/`reset` (the kernel's `ECONNRESET`) when data it sent was left unread
/// here, and otherwise end of stream, after which its writes fail with
/// `unavailable`/`reset` (`EPIPE`).
///
/// Safety of `@unchecked Sendable`: every stored `var` is touched only on `loop` (the
/// public methods hop there first); other threads read the state machine's
/// ``ConnectionRecord``.
final class UnixConnection: Connection, UnixWatcher, LoopBoundResource, @unchecked Sendable {
    let loop: UnixEventLoop
    let localAddress: Endpoint
    let remoteAddress: Endpoint
    var backendName: String { UnixTransport.backendName }
    var eventLoop: any EventLoop { loop }

    private let lifecycle: TransportLifecycle<UnixEventLoop>
    private let fd: CInt
    private var socket: UnixSocket?
    /// Loop-confined and touched on every write: no runtime exclusivity check.
    @exclusivity(unchecked) private var state = ConnectionStateMachine()
    /// The loop's watch and the events it waits for; nil while not in the epoll set.
    private var watch: (number: UInt64, events: UInt32)?
    /// Completions of writes a flush finished, run once the state settled (reused).
    private var finished: [WriteCompletion] = []

    init(socket: consuming UnixSocket, loop: UnixEventLoop, local: Endpoint, remote: Endpoint, lifecycle: TransportLifecycle<UnixEventLoop>) {
        fd = socket.descriptor
        self.socket = .some(socket)
        self.loop = loop
        self.localAddress = local
        self.remoteAddress = remote
        self.lifecycle = lifecycle
    }

    /// Joins the transport's registry. Call on the loop. When the transport is shutting
    /// down, the connection ends (`cancelled`/`shutdown`) and that is thrown.
    func activate() throws(TransportError) {
        guard lifecycle.insert(self) else {
            _ = state.end(with: .transportShutdown())
            socket.take()?.close()
            throw TransportError.transportShutdown()
        }
    }

    /// Closes a connection whose loop stopped before it got there: nothing else has it.
    func abandon() {
        _ = state.end(with: .transportShutdown())
        socket.take()?.close()
    }

    // MARK: Connection

    func setHandler(_ handler: any ConnectionHandler) {
        loop.onLoop({
            if case .reportEnd(let handler, let error) = self.state.setHandler(handler) {
                self.loop.deferToEndOfTurn { handler.connectionDidClose(error: error) }
            }
        }, ifStopped: { self.state.record.reportEndToLateHandler(handler) })
    }

    func startReading() {
        loop.onLoop { if self.state.startReading() { self.updateInterest() } }
    }

    func stopReading() {
        loop.onLoop { if self.state.stopReading() { self.updateInterest() } }
    }

    var pendingWriteBytes: Int {
        loop.inEventLoop ? state.pendingWriteBytes : state.record.pendingBytes
    }

    func write(_ bytes: [UInt8], completion: WriteCompletion?) {
        guard loop.inEventLoop else {
            hop({ self.write(bytes, completion: completion) }, completion)
            return
        }
        _ = bytes.withUnsafeBytes { send($0, keeping: bytes, completion: completion, sayingSentNow: false) }
    }

    func writeNowOrQueue(_ bytes: [UInt8], completion: WriteCompletion?) -> Bool {
        guard loop.inEventLoop else {
            write(bytes, completion: completion)
            return false
        }
        return bytes.withUnsafeBytes { send($0, keeping: bytes, completion: completion, sayingSentNow: true) }
    }

    func writeNowOrQueue(header: UnsafeRawBufferPointer, payload: [UInt8], completion: WriteCompletion?) -> Bool {
        guard loop.inEventLoop, state.writes.isEmpty, state.writeRefusal == nil else {
            var joined = Array(header)
            joined.append(contentsOf: payload)
            return writeNowOrQueue(joined, completion: completion)
        }
        // Nothing queued: header and payload in one sendmsg, straight from both buffers.
        let sent: Int? = payload.withUnsafeBytes { body in
            loop.writeVectors[0] = iovec(iov_base: UnsafeMutableRawPointer(mutating: header.baseAddress), iov_len: header.count)
            loop.writeVectors[1] = iovec(iov_base: UnsafeMutableRawPointer(mutating: body.baseAddress), iov_len: body.count)
            return sendGathered(count: body.isEmpty ? 1 : 2, total: header.count + body.count)
        }
        guard let sent else {
            if let completion { loop.deferCompletion(completion, state.writeRefusal) }
            return false
        }
        if sent == header.count + payload.count { return true }
        // Queue the rest: the header's tail (copied, it is borrowed), then the payload
        // itself from where the kernel stopped.
        if sent < header.count {
            state.enqueue(Array(UnsafeRawBufferPointer(rebasing: header[sent...])), completion: nil)
            state.enqueue(payload, completion: completion)
        } else {
            state.enqueue(payload, offset: sent - header.count, completion: completion)
        }
        updateInterest()
        return false
    }

    func write(borrowing bytes: UnsafeRawBufferPointer, completion: WriteCompletion?) {
        guard loop.inEventLoop else {
            let copy = Array(bytes)
            hop({ self.write(copy, completion: completion) }, completion)
            return
        }
        _ = send(bytes, keeping: nil, completion: completion, sayingSentNow: false)
    }

    func shutdownOutput(completion: WriteCompletion?) {
        guard loop.inEventLoop else {
            hop({ self.shutdownOutput(completion: completion) }, completion)
            return
        }
        switch state.shutdownOutput(completion) {
        case .refuse(let error):
            if let completion { loop.deferCompletion(completion, error) }
        case .shutDownNow:
            let failure = shutDownWriteSide()
            if case .some(.some(let completion)) = state.finishOutputShutdown(error: failure) {
                loop.deferCompletion(completion, failure)
            }
        case .afterPendingWrites:
            break
        }
    }

    func close() {
        loop.onLoop { self.end(nil, deferringCallbacks: true) }
    }

    func reset() {
        // No reset in the Unix domain: see the type's documentation.
        close()
    }

    /// Runs `work` on the loop; once the loop has stopped, the transport has ended this
    /// connection and `completion` hears that end here.
    private func hop(_ work: @escaping @Sendable () -> Void, _ completion: WriteCompletion?) {
        if !loop.submit(work) { state.record.completeLateWrite(completion) }
    }

    // MARK: TransportResource

    func terminate(with error: TransportError) {
        end(error, deferringCallbacks: false)
    }

    // MARK: events

    func handleEvents(_ events: UInt32) {
        guard state.isOpen else { return }
        let trouble = Posix.Events.error | Posix.Events.hangup
        if events & (Posix.Events.output | trouble) != 0, !state.writes.isEmpty {
            flush()
            guard state.isOpen else { return }
        }
        if events & (Posix.Events.input | Posix.Events.readHangup | trouble) != 0, state.shouldRead {
            readAvailable()
        }
    }

    /// Reads until the kernel has nothing more, the handler stops reading, or 16 buffers
    /// went by (other connections get their turn).
    private func readAvailable() {
        let buffer = loop.readBuffer
        var rounds = 0
        while state.shouldRead, rounds < 16 {
            rounds += 1
            do {
                switch try Posix.receive(fd, into: buffer) {
                case .wouldBlock:
                    return
                case .done(0):
                    let handler = state.readDidEnd()
                    updateInterest()
                    handler?.connectionDidReadEnd()
                    return
                case .done(let count):
                    state.handler?.connectionDidRead(UnsafeRawBufferPointer(rebasing: buffer[..<count]))
                    if count < buffer.count { return }
                }
            } catch {
                end(ErrnoTable.error(error, while: "reading from \(remoteAddress)"), deferringCallbacks: false)
                return
            }
        }
    }

    // MARK: writing

    /// Every write of one buffer, on the loop: to the kernel at once when nothing is
    /// queued, then what is left into the queue (`kept`, the caller's array, without a
    /// copy; else a copy of the rest). Returns true when every byte went at once and
    /// `sayingSentNow` asked to hear so instead of a completion (which then never runs).
    private func send(_ bytes: UnsafeRawBufferPointer, keeping kept: [UInt8]?, completion: WriteCompletion?, sayingSentNow: Bool) -> Bool {
        if let refusal = state.writeRefusal {
            if let completion { loop.deferCompletion(completion, refusal) }
            return false
        }
        var sent = 0
        if state.writes.isEmpty {
            loop.writeVectors[0] = iovec(iov_base: UnsafeMutableRawPointer(mutating: bytes.baseAddress), iov_len: bytes.count)
            guard let count = sendGathered(count: 1, total: bytes.count) else {
                if let completion { loop.deferCompletion(completion, state.writeRefusal) }
                return false
            }
            if count == bytes.count {
                if sayingSentNow { return true }
                if let completion { loop.deferCompletion(completion, nil) }
                return false
            }
            sent = count
        }
        if let kept {
            state.enqueue(kept, offset: sent, completion: completion)
        } else {
            state.enqueue(Array(UnsafeRawBufferPointer(rebasing: bytes[sent...])), completion: completion)
        }
        updateInterest()
        return false
    }

    /// Sends the loop's first `count` write vectors (`total` bytes); what the kernel
    /// took, or nil when the send failed and ended the connection (its callbacks
    /// deferred: a user's call is on the stack).
    private func sendGathered(count: Int, total: Int) -> Int? {
        if total == 0 { return 0 }
        do {
            switch try Posix.sendGathered(fd, loop.writeVectors, count: count) {
            case .done(let sent): return sent
            case .wouldBlock: return 0
            }
        } catch {
            end(ErrnoTable.error(error, while: "writing to \(remoteAddress)"), deferringCallbacks: true)
            return nil
        }
    }

    /// Sends the queue, gathered, until it is empty or the kernel takes no more.
    private func flush() {
        var shutdownDue = false
        var failure: TransportError?
        sending: while !state.writes.isEmpty {
            var count = 0
            var offered = 0
            // Each array stays alive and unchanged in the queue until the send returns.
            for entry in state.writes.entries.prefix(UnixEventLoop.writeVectorCount) where entry.remaining > 0 {
                let base = entry.bytes.withUnsafeBytes { $0.baseAddress! } + entry.offset
                loop.writeVectors[count] = iovec(iov_base: UnsafeMutableRawPointer(mutating: base), iov_len: entry.remaining)
                count += 1
                offered += entry.remaining
            }
            var sent = 0
            if count > 0 {
                do {
                    switch try Posix.sendGathered(fd, loop.writeVectors, count: count) {
                    case .wouldBlock: break sending
                    case .done(let n): sent = n
                    }
                } catch {
                    failure = ErrnoTable.error(error, while: "writing to \(remoteAddress)")
                    break sending
                }
            }
            shutdownDue = state.writesTaken(sent, completed: &finished) || shutdownDue
            if sent < offered { break }
        }
        // The writes the kernel took complete first, in order; then a failure ends the
        // connection (the rest complete with its error), or a due FIN goes out.
        let done = finished
        finished.removeAll(keepingCapacity: true)
        if let failure {
            for completion in done { completion(nil) }
            end(failure, deferringCallbacks: false)
            return
        }
        var shutdownFailure: TransportError?
        var shutdownCompletion: WriteCompletion?? = nil
        if shutdownDue {
            shutdownFailure = shutDownWriteSide()
            shutdownCompletion = state.finishOutputShutdown(error: shutdownFailure)
        }
        let drained = state.writes.isEmpty
        updateInterest()
        for completion in done { completion(nil) }
        if case .some(.some(let completion)) = shutdownCompletion { completion(shutdownFailure) }
        if drained, state.isOpen { state.handler?.connectionDidDrainWrites() }
    }

    private func shutDownWriteSide() -> TransportError? {
        do {
            try Posix.shutdown(fd, how: Posix.shutdownWrite)
            return nil
        } catch {
            return ErrnoTable.error(error, while: "shutting down output to \(remoteAddress)")
        }
    }

    // MARK: interest and the end

    /// Puts the descriptor in the epoll set for what the connection waits for, changes
    /// it, or takes it out when it waits for nothing.
    private func updateInterest() {
        guard state.isOpen else { return }
        var wanted: UInt32 = 0
        if state.shouldRead { wanted |= Posix.Events.input | Posix.Events.readHangup }
        if !state.writes.isEmpty { wanted |= Posix.Events.output }
        do {
            switch (watch, wanted) {
            case (nil, 0):
                return
            case (let current?, 0):
                loop.unwatch(fd, watch: current.number)
                watch = nil
            case (nil, _):
                watch = (try loop.watch(fd, events: wanted, by: self), wanted)
            case (let current?, _):
                guard current.events != wanted else { return }
                try loop.change(fd, watch: current.number, events: wanted)
                watch = (current.number, wanted)
            }
        } catch {
            end(ErrnoTable.error(error, while: "watching the connection to \(remoteAddress)"), deferringCallbacks: true)
        }
    }

    /// Ends the connection once (`error` nil for a local close): the descriptor closes
    /// now, then the state machine's ending reports, at once or at the end of the turn.
    private func end(_ error: TransportError?, deferringCallbacks: Bool) {
        guard let ending = state.end(with: error) else { return }
        if let watch { loop.unwatch(fd, watch: watch.number) }
        watch = nil
        socket.take()?.close()
        lifecycle.remove(self)
        if deferringCallbacks { loop.deferToEndOfTurn { ending.run() } } else { ending.run() }
    }
}
