import Glibc
import Switchyard
import SwitchyardBackendKit

/// A Unix-domain stream connection on a ``UnixEventLoop``. The ``Connection`` contract
/// is kept by the toolkit: ``ConnectionStateMachine`` holds its rules and
/// ``StreamConnection`` its front (hops, refusals, handler, read demand, the write path);
/// this type does the system calls.
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
/// toolkit's front hops there first); other threads read the state machine's
/// ``ConnectionRecord``.
final class UnixConnection: StreamConnection, UnixWatcher, LoopBoundResource, @unchecked Sendable {
    let loop: UnixEventLoop
    let localAddress: Endpoint
    let remoteAddress: Endpoint
    var backendName: String { UnixTransport.backendName }

    private let lifecycle: TransportLifecycle<UnixEventLoop>
    private let fd: CInt
    private var socket: Socket?
    /// Loop-confined and touched on every write: no runtime exclusivity check.
    @exclusivity(unchecked) var state = ConnectionStateMachine()
    /// The loop's watch and the events it waits for; nil while not in the epoll set.
    private var watch: (number: UInt64, events: UInt32)?
    /// Completions of writes a flush finished, run once the state settled (reused).
    private var finished: [WriteCompletion] = []

    init(socket: consuming Socket, loop: UnixEventLoop, local: Endpoint, remote: Endpoint, lifecycle: TransportLifecycle<UnixEventLoop>) {
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

    // MARK: StreamConnection

    func sendNow(_ header: UnsafeRawBufferPointer?, _ body: UnsafeRawBufferPointer) -> Int? {
        var count = 0
        if let header {
            loop.writeVectors[0] = iovec(iov_base: UnsafeMutableRawPointer(mutating: header.baseAddress), iov_len: header.count)
            count = 1
        }
        if !body.isEmpty {
            loop.writeVectors[count] = iovec(iov_base: UnsafeMutableRawPointer(mutating: body.baseAddress), iov_len: body.count)
            count += 1
        }
        if count == 0 { return 0 }
        do {
            switch try Posix.sendGathered(fd, loop.writeVectors, count: count) {
            case .done(let sent): return sent
            case .wouldBlock: return 0
            }
        } catch {
            terminate(ErrnoTable.error(error, while: "writing to \(remoteAddress)"), deferCallbacks: true)
            return nil
        }
    }

    func writesQueued() {
        updateInterest()
    }

    func readInterestChanged() {
        updateInterest()
    }

    func shutDownOutputNow() {
        let failure = shutDownWriteSide()
        if case .some(.some(let completion)) = state.finishOutputShutdown(error: failure) {
            loop.deferCompletion(completion, failure)
        }
    }

    func reset() {
        // No reset in the Unix domain: see the type's documentation.
        close()
    }

    /// Ends the connection once (`error` nil for a local close): the descriptor closes
    /// now, then the state machine's ending reports, at once or at the end of the turn.
    func terminate(_ error: TransportError?, deferCallbacks: Bool) {
        guard let ending = state.end(with: error) else { return }
        if let watch { loop.unwatch(fd, watch: watch.number) }
        watch = nil
        socket.take()?.close()
        lifecycle.remove(self)
        if deferCallbacks { loop.deferToEndOfTurn { ending.run() } } else { ending.run() }
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
                terminate(ErrnoTable.error(error, while: "reading from \(remoteAddress)"), deferCallbacks: false)
                return
            }
        }
    }

    // MARK: writing

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
            terminate(failure, deferCallbacks: false)
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

    // MARK: interest

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
            terminate(ErrnoTable.error(error, while: "watching the connection to \(remoteAddress)"), deferCallbacks: true)
        }
    }
}
