public import CSwitchyardPosix
public import DequeModule
public import Switchyard
public import SwitchyardPosix

/// A ``StreamConnection`` over a nonblocking stream socket on a ``DescriptorEventLoop``:
/// the toolkit also does its I/O, written once. It sends at once (``sendToDescriptor(_:_:)``,
/// the default ``StreamConnection/sendNow(_:_:)``), flushes the queue gathered (``flushWrites()``), reads
/// (``readAvailable(rounds:)``) and hands the FIN over (``shutDownDescriptorOutput()``,
/// the default ``StreamConnection/shutDownOutputNow()``), all through `Posix` (`sendmsg` with
/// `MSG_NOSIGNAL`: a peer that went away is an error, never a SIGPIPE).
///
/// A descriptor reclaimed underneath the connection (see ``SocketIdentity``): sends are
/// `send`/`sendmsg`, which fail on anything but a socket, so nothing is reported sent into
/// `/dev/null`, a file or a pipe put in its place; with ``socketIdentity`` set, the error
/// that ends the connection says `reclaimed`.
///
/// The backend keeps what is its own: how it watches the descriptor (``updateInterest()``),
/// its event handler, which calls ``flushWrites()`` when the descriptor is writable and
/// ``readAvailable(rounds:)`` when it is readable and ``ConnectionStateMachine/shouldRead``,
/// ``StreamConnection/terminate(_:deferCallbacks:)``, `reset()`, and the addresses.
///
/// ```swift
/// final class MyConnection: DescriptorStreamConnection, @unchecked Sendable {
///     let loop: MyLoop                      // a DescriptorEventLoop
///     let descriptor: CInt                  // owned by a Socket the connection holds
///     var state = ConnectionStateMachine()
///     var finishedWrites: [WriteCompletion] = []
///     func updateInterest() { … }           // watch for state.shouldRead / queued writes
///     func writesQueued() { updateInterest() }
///     func readInterestChanged() { updateInterest() }
///     func terminate(_ error: TransportError?, deferCallbacks: Bool) { … }
///     func reset() { … }
///     func handleEvents(_ events: UInt32) { … flushWrites() … readAvailable() … }
/// }
/// ```
///
/// Everything here runs on the loop, allocates nothing per message, and makes one
/// system call per send, gathered read or FIN; the hot paths are `@inlinable`, so a
/// backend's build specializes them for its connection type.
public protocol DescriptorStreamConnection: StreamConnection where Loop: DescriptorEventLoop {
    /// The connection's socket descriptor. Valid until ``StreamConnection/terminate(_:deferCallbacks:)``.
    var descriptor: CInt { get }

    /// The completions a flush collected, run once the state settled: an array the
    /// connection keeps so that a flush does not allocate one. Touched only by
    /// ``flushWrites()``; start it empty.
    var finishedWrites: [WriteCompletion] { get set }

    /// The socket ``descriptor`` held when the connection was made, read once with
    /// ``SocketIdentity/init(descriptor:)``: an error that ends the connection is then
    /// `reclaimed` when the descriptor was replaced underneath it (see ``SocketIdentity``).
    /// The default is nil: no check.
    var socketIdentity: SocketIdentity? { get }

    /// The error for a failed system call on this connection, `doing` naming what it was
    /// (`"writing to …"`). The default is `ErrnoTable/error(_:while:)`, `reclaimed` when
    /// ``socketIdentity`` finds the descriptor replaced; a backend with its own meanings
    /// (the kernel's stall errors as `stalled`) supplies its own.
    func transportError(_ error: SyscallError, while doing: String) -> TransportError

    /// Brings what the loop watches the descriptor for up to date: input while
    /// ``ConnectionStateMachine/shouldRead``, output while writes are queued. Called on
    /// the loop after a read ended and after a flush. A failure ends the connection with
    /// its callbacks deferred.
    func updateInterest()
}

extension DescriptorStreamConnection {
    public var socketIdentity: SocketIdentity? { nil }

    public func transportError(_ error: SyscallError, while doing: String) -> TransportError {
        let mapped = ErrnoTable.error(error, while: doing)
        return socketIdentity?.connectionError(mapped, descriptor: descriptor) ?? mapped
    }

    /// ``StreamConnection/sendNow(_:_:)``: ``sendToDescriptor(_:_:)``.
    @inlinable
    public func sendNow(_ header: UnsafeRawBufferPointer?, _ body: UnsafeRawBufferPointer) -> Int? {
        sendToDescriptor(header, body)
    }

    /// ``StreamConnection/shutDownOutputNow()``: ``shutDownDescriptorOutput()``.
    public func shutDownOutputNow() {
        shutDownDescriptorOutput()
    }

    /// Sends `header` (if any) and `body` now, gathered into one `sendmsg` (one `send`
    /// without a header). Returns the count the kernel took (0 when it would block), or
    /// nil after a failure that ended the connection (its callbacks deferred: a user's
    /// call is on the stack). Call on the loop with nothing queued.
    @inlinable
    public func sendToDescriptor(_ header: UnsafeRawBufferPointer?, _ body: UnsafeRawBufferPointer) -> Int? {
        let result: IOResult<Int>
        do {
            if let header {
                // The iovecs point into `header` and `body`, both alive for the call.
                let vectors = loop.writeVectors
                vectors[0] = iovec(iov_base: UnsafeMutableRawPointer(mutating: header.baseAddress), iov_len: header.count)
                vectors[1] = iovec(iov_base: UnsafeMutableRawPointer(mutating: body.baseAddress), iov_len: body.count)
                if header.count + body.count == 0 { return 0 }
                result = try Posix.sendGathered(descriptor, vectors, count: body.isEmpty ? 1 : 2)
            } else {
                if body.isEmpty { return 0 }
                result = try Posix.send(descriptor, body)
            }
        } catch {
            terminate(transportError(error, while: "writing to \(remoteAddress)"), deferCallbacks: true)
            return nil
        }
        switch result {
        case .done(let sent): return sent
        case .wouldBlock: return 0
        }
    }

    /// Sends queued writes, gathered (up to ``DescriptorEventLoop/writeVectorCount`` per
    /// `sendmsg`), until the queue is empty or the kernel takes no more. Then, in this
    /// order: a due output shutdown hands the FIN over, ``updateInterest()``, the
    /// completions of the writes that finished run (in order), the shutdown's completion,
    /// and the handler hears `ConnectionHandler.connectionDidDrainWrites()` if the
    /// queue emptied. On a send error, the writes the kernel already took complete first,
    /// in order; then the connection ends with the error (callbacks at once: call from a
    /// loop event) and the rest complete with it. Call on the loop.
    @inlinable
    public func flushWrites() {
        var shutdownDue = false
        while !state.writes.isEmpty {
            let vectors = loop.writeVectors
            var count = 0
            var offered = 0
            // The pointers stay valid: each array is held by the queue, unmutated, until
            // after the send below.
            for write in state.writes.entries.prefix(Loop.writeVectorCount) {
                let remaining = write.remaining
                if remaining == 0 { continue }
                let base = write.bytes.withUnsafeBytes { $0.baseAddress! } + write.offset
                vectors[count] = iovec(iov_base: UnsafeMutableRawPointer(mutating: base), iov_len: remaining)
                count += 1
                offered += remaining
            }
            var sent = 0
            if count > 0 {
                do {
                    switch try Posix.sendGathered(descriptor, vectors, count: count) {
                    case .wouldBlock: sent = -1
                    case .done(let n): sent = n
                    }
                } catch {
                    // The writes the kernel took before the failure complete first, in
                    // order; then the end fails the rest and tells the handler.
                    let done = finishedWrites
                    finishedWrites.removeAll(keepingCapacity: true)
                    for completion in done { completion(nil) }
                    terminate(transportError(error, while: "writing to \(remoteAddress)"), deferCallbacks: false)
                    return
                }
            }
            if sent < 0 { break }
            shutdownDue = state.writesTaken(sent, completed: &finishedWrites) || shutdownDue
            if sent < offered { break }
        }
        let drained = state.writes.isEmpty
        var shutdownFailure: TransportError?
        var shutdownCompletion: WriteCompletion?? = nil
        if shutdownDue {
            shutdownFailure = shutDownWriteSide()
            shutdownCompletion = state.finishOutputShutdown(error: shutdownFailure)
        }
        updateInterest()
        if !finishedWrites.isEmpty {
            let done = finishedWrites
            finishedWrites.removeAll(keepingCapacity: true)
            for completion in done { completion(nil) }
        }
        if case .some(.some(let completion)) = shutdownCompletion { completion(shutdownFailure) }
        if drained, state.isOpen { state.handler?.connectionDidDrainWrites() }
    }

    /// Reads into the loop's buffer and hands each read to the handler, borrowed, until
    /// the kernel has nothing more, the handler stops reading, or `rounds` full buffers
    /// went by (the loop's other descriptors get their turn; level-triggered epoll
    /// reports the rest). End of stream tells the handler after ``updateInterest()``; an
    /// error ends the connection (callbacks at once: call from a loop event). Call on the
    /// loop.
    @inlinable
    public func readAvailable(rounds limit: Int = 16) {
        let buffer = loop.readBuffer
        var rounds = 0
        while state.shouldRead, rounds < limit {
            rounds += 1
            do {
                switch try Posix.receive(descriptor, into: buffer) {
                case .wouldBlock:
                    return
                case .done(0):
                    let handler = state.readDidEnd()
                    updateInterest()
                    handler?.connectionDidReadEnd()
                    return
                case .done(let count):
                    state.noteReceived(count)
                    state.handler?.connectionDidRead(UnsafeRawBufferPointer(rebasing: buffer[..<count]))
                    if count < buffer.count { return }
                }
            } catch {
                terminate(transportError(error, while: "reading from \(remoteAddress)"), deferCallbacks: false)
                return
            }
        }
    }

    /// ``StreamConnection/shutDownOutputNow()`` for a descriptor: `shutdown(SHUT_WR)` now,
    /// and the completion (deferred: a user's call is on the stack) with its result.
    public func shutDownDescriptorOutput() {
        let failure = shutDownWriteSide()
        if case .some(.some(let completion)) = state.finishOutputShutdown(error: failure) {
            loop.deferCompletion(completion, failure)
        }
    }

    /// Hands the FIN over; the error if the kernel refused.
    @usableFromInline
    func shutDownWriteSide() -> TransportError? {
        do {
            try Posix.shutdown(descriptor, how: Posix.shutdownWrite)
            return nil
        } catch {
            return ErrnoTable.error(error, while: "shutting down output to \(remoteAddress)")
        }
    }
}
