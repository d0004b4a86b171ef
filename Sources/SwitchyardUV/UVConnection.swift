import CLibUV
import Glibc
import Switchyard
import SwitchyardBackendKit
import SwitchyardPosix

/// A `uv_tcp_t` connection on one libuv loop. See ``Connection`` for the contract, which
/// ``ConnectionStateMachine`` keeps and ``StreamConnection`` fronts; this type makes the
/// libuv calls.
///
/// **Reads** are demand-driven: `uv_read_start` on ``startReading()``, `uv_read_stop` on
/// ``stopReading()``. The alloc callback hands libuv the loop's one read buffer, and the
/// bytes go to the handler borrowed, so a read allocates nothing. libuv watches a stream
/// only while it reads or writes, so the loop's ``PausedReadWatch`` watches every
/// connection's socket for errors besides (added once when the connection is made):
/// a peer's reset still ends a connection nobody reads, with no system call per
/// pause or resume.
///
/// **Writes.** With nothing queued, a write goes out at once with `send`/`sendmsg` on the
/// handle's descriptor (`MSG_NOSIGNAL | MSG_DONTWAIT`; the toolkit's ``Posix`` calls), and
/// only the tail the kernel did not take is copied and queued. It is what `uv_try_write`
/// would do (libuv's queue is empty whenever ours is) at the same cost, one system call,
/// except that `uv_try_write` uses `write`/`writev`, which succeed on `/dev/null`, a file
/// or a pipe put in the socket's place: `send` fails there with `ENOTSOCK`, so a write is
/// never reported sent into a reclaimed descriptor. Queued writes go to libuv as
/// one gathered `uv_write` (up to 64 buffers) on the connection's one reusable request;
/// they complete in its write callback, in order, and the next batch starts there. So at
/// most one request is in flight, and libuv's own queue never holds more than it.
/// When the connection ends with a request in flight, `uv_stream_get_write_queue_size`
/// tells how much of it the kernel took: the writes it covered complete with `nil`, the
/// rest with the terminal error.
///
/// **Half-close** is `uv_shutdown`, issued once every queued write is in the kernel; its
/// callback completes ``shutdownOutput(completion:)``. **Close** is `uv_close`, **reset**
/// `uv_tcp_close_reset` (linger 0); both close the descriptor at once.
///
/// **Reclaimed descriptors** (see ``SocketIdentity``): the socket's identity is read when
/// the connection is made; an error or an end of stream (libuv reads with `read`, which
/// ends a stream on `/dev/null` too) is checked against it once, and the connection ends
/// `unavailable`/`reclaimed` when the descriptor no longer holds the socket. An
/// `epoll_ctl` of libuv's that fails on the replacement (libuv 1.44 would abort) is
/// caught by the epoll guard and ends the connection through ``watchFailed(errno:)``
/// (see ``UVEventLoop``). Two narrow races stay open, both needing another thread to
/// `dup2` within microseconds, where libuv's own `writev` can put queued bytes into a
/// replacement that takes `write` (`/dev/null`, a file, a pipe) and report them sent:
/// between a partial immediate send and the `uv_write` that follows in the same turn
/// (libuv writes at once when its queue is empty), and between `epoll_wait` returning
/// writability of the old socket and libuv acting on it. Closing them would take libuv
/// writing with `send`.
///
/// Callbacks caused by a user's call are deferred to the end of the loop's turn; those
/// caused by libuv run in libuv's callback (which is never inside a user's call).
///
/// Safety of `@unchecked Sendable`: every stored `var` is touched only on `loop` (public
/// methods hop there first, in call order); the state machine's ``ConnectionRecord`` is
/// what other threads read; the rest is immutable.
final class UVConnection: StreamConnection, LoopBoundResource, @unchecked Sendable {
    let loop: UVEventLoop
    private let localSocketAddress: CompactSocketAddress
    private let remoteSocketAddress: CompactSocketAddress
    /// Formatted when asked, not per connection: formatting an address allocates its
    /// strings (about 5,500 instructions a connection, measured with callgrind).
    var localAddress: Endpoint { localSocketAddress.endpoint }
    var remoteAddress: Endpoint { remoteSocketAddress.endpoint }
    var backendName: String { "libuv" }

    private let lifecycle: TransportLifecycle<UVEventLoop>
    /// Whether the transport has a stall timeout: the kernel's stall errors then mean
    /// `stalled` (see ``UVErrorTable/connectionError(_:_:stallDetection:)``).
    private let stallDetection: Bool
    /// The handle, while open. Its `data` points at this object, unretained: `keepAlive`
    /// holds the object until the handle is closed.
    private var tcp: UnsafeMutablePointer<uv_tcp_t>?
    private var keepAlive: UVConnection?
    /// The token of the loop's ``PausedReadWatch`` on `descriptor` (set by
    /// ``activate(accepted:)``), until it reported; nil without one.
    private var pausedWatch: UInt32?
    /// The handle's descriptor (libuv keeps it until the handle closes).
    private let descriptor: CInt
    /// The socket `descriptor` held when the connection was made (nil only if `fstat`
    /// failed then): see ``SocketIdentity``.
    private let identity: SocketIdentity?
    /// Loop-confined and touched on every read and write: no runtime exclusivity check
    /// (as bsd's; each check is a thread-local lookup, about 76 instructions).
    @exclusivity(unchecked) var state = ConnectionStateMachine()

    /// The first `inFlightCount` entries of the queue are in the `uv_write` in flight,
    /// `inFlightBytes` bytes in all.
    private var inFlightCount = 0
    private var inFlightBytes = 0
    private var writeInFlight = false
    /// Reused for every `uv_write`; freed when the connection ends (or, if a write is in
    /// flight then, in its callback).
    private var writeRequest: UnsafeMutablePointer<uv_write_t>?
    /// Completions collected by a write callback, run after the state settled (reused).
    private var completed: [WriteCompletion] = []
    /// A buffer larger than this goes to libuv in parts (`uv_buf_t.len` is 32 bits).
    private static let maxBufferBytes = 1 << 30

    /// Wraps a connected handle (initialised on `loop`). Call on the loop.
    init(
        tcp: UnsafeMutablePointer<uv_tcp_t>, loop: UVEventLoop, local: SystemSocketAddress, remote: SystemSocketAddress,
        lifecycle: TransportLifecycle<UVEventLoop>, stallDetection: Bool
    ) {
        self.stallDetection = stallDetection
        self.tcp = tcp
        self.loop = loop
        self.localSocketAddress = CompactSocketAddress(local)
        self.remoteSocketAddress = CompactSocketAddress(remote)
        self.lifecycle = lifecycle
        self.descriptor = csy_uv_tcp_fileno(tcp)
        self.identity = SocketIdentity(descriptor: descriptor)
        tcp.pointee.data = Unmanaged.passUnretained(self).toOpaque()
        keepAlive = self
    }

    /// Registers with the transport. Call on the loop. False (and the connection is
    /// closed) when the transport is shutting down.
    /// `accepted` says whether a listener accepted it (for the transport's logs and metrics).
    func activate(accepted: Bool) -> Bool {
        loop.assertInLoop()
        guard lifecycle.insertConnection(self, accepted: accepted) else {
            terminate(.transportShutdown(), deferCallbacks: false)
            return false
        }
        loop.track(self, descriptor: descriptor)
        pausedWatch = loop.pausedReadWatch?.watch(descriptor)
        return true
    }

    private var stream: UnsafeMutablePointer<uv_stream_t>? { tcp.map { csy_uv_tcp_stream($0) } }

    // MARK: Connection

    // MARK: StreamConnection (the rest of Connection is the toolkit's)

    func sendNow(_ header: UnsafeRawBufferPointer?, _ body: UnsafeRawBufferPointer) -> Int? {
        tryWrite(header, body)
    }

    func writesQueued() {
        if let failure = startWriteIfIdle() { terminate(failure, deferCallbacks: true) }
    }

    func shutDownOutputNow() {
        issueShutdown(inUserCall: true)
    }

    func readInterestChanged() {
        guard let stream else { return }
        if let failure = reclaimedBeforeWatching() {
            terminate(failure, deferCallbacks: true)
            return
        }
        guard state.shouldRead else {
            if !state.readEnded { _ = uv_read_stop(stream) }
            return
        }
        let status = uv_read_start(stream, { handle, _, buffer in
            let connection = Unmanaged<UVConnection>.fromOpaque(handle!.pointee.data).takeUnretainedValue()
            let readBuffer = connection.loop.readBuffer
            buffer!.pointee = uv_buf_init(readBuffer.baseAddress!.assumingMemoryBound(to: CChar.self), UInt32(readBuffer.count))
        }, { stream, count, _ in
            let connection = Unmanaged<UVConnection>.fromOpaque(stream!.pointee.data).takeUnretainedValue()
            connection.didRead(count)
            connection.loop.drainDeferred()
        })
        if status < 0 {
            terminate(failure(status, "reading from \(remoteAddress)"), deferCallbacks: true)
        }
    }

    func reset() {
        loop.onLoop { self.terminate(nil, deferCallbacks: true, reset: true, bytesTaken: nil) }
    }

    /// The error for a libuv code that ended this connection: the table's, except that
    /// with a stall timeout the kernel's stall errors mean `stalled`, and that it is
    /// `reclaimed` when the descriptor no longer holds the connection's socket (one
    /// `fstat`, on the way to ending the connection).
    private func failure(_ code: Int32, _ what: String) -> TransportError {
        let error = UVErrorTable.connectionError(code, what, stallDetection: stallDetection)
        return identity?.connectionError(error, descriptor: descriptor) ?? error
    }

    // MARK: reclaimed descriptors

    /// libuv's `epoll_ctl` failed with `code` on this connection's descriptor, and the
    /// epoll guard reported it (``UVEventLoop``): libuv believes it watches a descriptor
    /// it does not, so the connection ends, `reclaimed` when the descriptor no longer
    /// holds its socket (as it does whenever libuv's own state is right). Call on the loop.
    func watchFailed(errno code: CInt) {
        guard state.isOpen else { return }
        terminate(failure(-code, "watching \(remoteAddress): libuv's epoll_ctl failed"), deferCallbacks: false)
    }

    /// Without the epoll guard (``UVEventLoop/epollGuarded`` false: SwitchyardUV in a
    /// library loaded at run time), the error to end the connection with if its descriptor
    /// no longer holds its socket, checked (one `fstat`) before each call that changes what
    /// libuv watches (`uv_read_start`/`uv_read_stop`, `uv_write`, `uv_shutdown`), since
    /// libuv would abort on the `epoll_ctl` that follows. This narrows the window, it does
    /// not close it: a replacement between the check and libuv's next poll still aborts.
    /// With the guard (the usual case), nil at no cost.
    private func reclaimedBeforeWatching() -> TransportError? {
        guard !loop.epollGuarded, let identity, identity.check(descriptor) != .same else { return nil }
        let unknown = TransportError(code: .internal, reason: .ioError, message: "watching \(remoteAddress)")
        return identity.connectionError(unknown, descriptor: descriptor)
    }

    /// Ends the connection `reclaimed` if its descriptor no longer holds its socket (the
    /// epoll guard lost reports, so every connection checks). Call on the loop.
    func checkDescriptor() {
        guard state.isOpen, let identity else { return }
        let unknown = TransportError(code: .internal, reason: .ioError, message: "watching \(remoteAddress): libuv's epoll_ctl failed")
        let checked = identity.connectionError(unknown, descriptor: descriptor)
        if checked.reason == .reclaimed { terminate(checked, deferCallbacks: false) }
    }

    // MARK: errors while nobody reads

    /// The loop's ``PausedReadWatch`` found this connection's socket in error or hung up
    /// (libuv itself watches it only while reading or writing), once. Reading, the read
    /// reports it (the bytes sent before an error first). Not reading (never started,
    /// stopped, or after the end of stream): `SO_ERROR` ends the connection with that
    /// error (a peer's reset: `unavailable`/`reset`); none (a hang-up once both
    /// directions were shut down) leaves nothing to report before a read does. A `token`
    /// that is not this connection's watch is an earlier socket's on the same descriptor
    /// number: ignored. Call on the loop.
    func pausedReadWatchFired(token: UInt32) {
        guard state.isOpen, pausedWatch == token else { return }
        pausedWatch = nil
        guard !state.shouldRead else { return }
        let code: CInt
        do {
            code = try Posix.socketError(descriptor)
        } catch {
            // No socket there any more: `failure` tells a reclaimed descriptor.
            code = error.errno
        }
        if code != 0 { terminate(failure(-code, "connection to \(remoteAddress)"), deferCallbacks: false) }
    }

    // MARK: reading

    private func didRead(_ count: Int) {
        guard state.isOpen else { return }
        if count > 0 {
            state.noteReceived(count)
            state.handler?.connectionDidRead(UnsafeRawBufferPointer(rebasing: loop.readBuffer[..<count]))
        } else if count == Int(UV_EOF.rawValue) {
            // libuv reads with read(2), which ends a stream on /dev/null, a file or a pipe
            // put in the socket's place too: one fstat per connection tells them apart.
            if let identity, identity.check(descriptor) != .same {
                terminate(failure(Int32(count), "reading from \(remoteAddress)"), deferCallbacks: false)
                return
            }
            // libuv also reports an end it did not read: after a short read in a wakeup
            // that brought POLLHUP (uv__stream_io), which a reset sets too, so data and
            // the peer's reset read in one wakeup come as data and EOF. The reset is
            // still pending on the socket (no read took it): one getsockopt per
            // connection end tells it.
            if let code = try? Posix.socketError(descriptor), code != 0 {
                terminate(failure(-code, "reading from \(remoteAddress)"), deferCallbacks: false)
                return
            }
            // libuv has stopped reading (UV_HANDLE_READING is cleared at EOF).
            state.readDidEnd()?.connectionDidReadEnd()
        } else if count < 0 {
            terminate(failure(Int32(count), "reading from \(remoteAddress)"), deferCallbacks: false)
        }
    }

    // MARK: writing

    /// Writes `head` (if any) then `body` at once, gathered, with `send`/`sendmsg` on the
    /// descriptor (see the type's comment for why not `uv_try_write`); the count the kernel
    /// took, or nil after a failure that ended the connection (its callbacks deferred: a
    /// user call is on the stack). Called only with nothing queued, so libuv has nothing
    /// queued either and the bytes cannot overtake a `uv_write`.
    private func tryWrite(_ head: UnsafeRawBufferPointer?, _ body: UnsafeRawBufferPointer) -> Int? {
        guard tcp != nil else { return 0 }
        let result: IOResult<Int>
        do {
            if let head, !head.isEmpty, !body.isEmpty {
                // Two iovecs on the stack: no allocation.
                result = try withUnsafeTemporaryAllocation(of: iovec.self, capacity: 2) { vectors throws(SyscallError) in
                    vectors[0] = iovec(iov_base: UnsafeMutableRawPointer(mutating: head.baseAddress), iov_len: head.count)
                    vectors[1] = iovec(iov_base: UnsafeMutableRawPointer(mutating: body.baseAddress), iov_len: body.count)
                    return try Posix.sendGathered(descriptor, vectors.baseAddress!, count: 2)
                }
            } else {
                let single = (head?.isEmpty ?? true) ? body : head!
                if single.isEmpty { return 0 }
                result = try Posix.send(descriptor, single)
            }
        } catch {
            // On Linux a libuv code is the negated errno.
            terminate(failure(-error.errno, "writing to \(remoteAddress)"), deferCallbacks: true)
            return nil
        }
        switch result {
        case .done(let sent): return sent
        case .wouldBlock: return 0
        }
    }

    /// Hands the queued writes to libuv as one gathered `uv_write`, unless one is in
    /// flight. Returns the error when libuv refuses the write at once.
    private func startWriteIfIdle() -> TransportError? {
        guard !writeInFlight, let stream, !state.writes.isEmpty else { return nil }
        if let failure = reclaimedBeforeWatching() { return failure }
        let buffers = loop.writeBuffers
        var count = 0
        var used = 0
        var bytes = 0
        // The pointers stay valid: each array is held, unmutated, by the queue until
        // the write callback.
        for write in state.writes.entries.prefix(UVEventLoop.writeBufferCount) {
            count += 1
            let remaining = write.remaining
            if remaining == 0 { continue }
            let take = min(remaining, Self.maxBufferBytes)
            let base = write.bytes.withUnsafeBytes { $0.baseAddress! } + write.offset
            buffers[used] = uv_buf_init(UnsafeMutableRawPointer(mutating: base).assumingMemoryBound(to: CChar.self), UInt32(take))
            used += 1
            bytes += take
            if take < remaining { break }
        }
        if used == 0 {
            // Only empty writes: they complete in order, after what went before.
            writesTaken(0)
            return nil
        }
        let request = writeRequest ?? .allocate(capacity: 1)
        writeRequest = request
        request.pointee.data = Unmanaged.passRetained(self).toOpaque()
        let status = uv_write(request, stream, buffers, UInt32(used), { request, status in
            let connection = Unmanaged<UVConnection>.fromOpaque(request!.pointee.data).takeRetainedValue()
            connection.writeCompleted(status)
            connection.loop.drainDeferred()
        })
        if status < 0 {
            Unmanaged<UVConnection>.fromOpaque(request.pointee.data).release()
            if status == -EPIPE { csy_uv_take_pending_sigpipe() }
            return failure(status, "writing to \(remoteAddress)")
        }
        writeInFlight = true
        inFlightCount = count
        inFlightBytes = bytes
        return nil
    }

    private func writeCompleted(_ status: Int32) {
        writeInFlight = false
        guard state.isOpen else {
            // The connection ended with this write in flight, and completed it then.
            freeWriteRequest()
            return
        }
        if status < 0 {
            // libuv's writev raised a SIGPIPE with its EPIPE; blocked on this loop thread,
            // it is pending there: take it, so the process never holds one.
            if status == -EPIPE { csy_uv_take_pending_sigpipe() }
            terminate(failure(status, "writing to \(remoteAddress)"), deferCallbacks: false, reset: false, bytesTaken: 0)
            return
        }
        let taken = inFlightBytes
        inFlightCount = 0
        inFlightBytes = 0
        writesTaken(taken)
    }

    /// The kernel took `count` bytes of the queue: completes the writes they cover, then
    /// starts the next batch, or the pending output shutdown once the queue is empty.
    private func writesTaken(_ count: Int) {
        let shutdownDue = state.writesTaken(count, completed: &completed)
        if !completed.isEmpty {
            let done = completed
            completed.removeAll(keepingCapacity: true)
            for completion in done { completion(nil) }
        }
        guard state.isOpen else { return }
        if let failure = startWriteIfIdle() {
            terminate(failure, deferCallbacks: false)
            return
        }
        if state.writes.isEmpty {
            if shutdownDue { issueShutdown(inUserCall: false) }
            guard state.isOpen else { return }
            state.handler?.connectionDidDrainWrites()
        }
    }

    private func freeWriteRequest() {
        writeRequest?.deallocate()
        writeRequest = nil
    }

    // MARK: half-close

    /// Issues `uv_shutdown` for the output shutdown the state machine began.
    private func issueShutdown(inUserCall: Bool) {
        guard let stream else { return }
        if let failure = reclaimedBeforeWatching() {
            terminate(failure, deferCallbacks: inUserCall)
            return
        }
        let request = UnsafeMutablePointer<uv_shutdown_t>.allocate(capacity: 1)
        request.pointee.data = Unmanaged.passRetained(self).toOpaque()
        let status = uv_shutdown(request, stream, { request, status in
            let connection = Unmanaged<UVConnection>.fromOpaque(request!.pointee.data).takeRetainedValue()
            request!.deallocate()
            connection.shutdownCompleted(status)
            connection.loop.drainDeferred()
        })
        if status < 0 {
            Unmanaged<UVConnection>.fromOpaque(request.pointee.data).release()
            request.deallocate()
            let error = UVErrorTable.error(status, "shutting down output to \(remoteAddress)")
            guard case .some(.some(let completion)) = state.finishOutputShutdown(error: error) else { return }
            if inUserCall { loop.deferCompletion(completion, error) } else { completion(error) }
        }
    }

    private func shutdownCompleted(_ status: Int32) {
        let error = status < 0 ? UVErrorTable.error(status, "shutting down output to \(remoteAddress)") : nil
        // After the connection ended, its end completed the shutdown already.
        if case .some(.some(let completion)) = state.finishOutputShutdown(error: error) { completion(error) }
    }

    // MARK: ending

    /// Ends the connection once: `error` nil for a local close. The writes the kernel took
    /// of a request in flight complete with `nil` (`bytesTaken`, else read from libuv's
    /// write queue size), the rest with the error; the handle is closed (`uv_close`, or
    /// `uv_tcp_close_reset` for `reset`), which closes the descriptor now.
    func terminate(_ error: TransportError?, deferCallbacks: Bool) {
        terminate(error, deferCallbacks: deferCallbacks, reset: false, bytesTaken: nil)
    }

    private func terminate(_ error: TransportError?, deferCallbacks: Bool, reset: Bool, bytesTaken: Int?) {
        var taken = 0
        if writeInFlight, let stream {
            taken = bytesTaken ?? max(0, inFlightBytes - Int(uv_stream_get_write_queue_size(stream)))
        }
        let shuttingDown = state.isShuttingDownOutput
        guard let ending = state.end(with: error, bytesTaken: taken) else { return }
        lifecycle.connectionEnded(self)
        loop.untrack(self, descriptor: descriptor)
        // Closing the descriptor ends the paused-read watch (see PausedReadWatch).
        pausedWatch = nil
        if let tcp {
            self.tcp = nil
            let handle = csy_uv_tcp_handle(tcp)
            // uv_tcp_close_reset refuses while a shutdown is pending: set linger 0 by hand.
            if !reset || shuttingDown || uv_tcp_close_reset(tcp, uvFreeHandleOnClose) != 0 {
                if reset { _ = csy_uv_set_linger_zero(csy_uv_tcp_fileno(tcp)) }
                uv_close(handle, uvFreeHandleOnClose)
            }
        }
        if !writeInFlight { freeWriteRequest() }
        keepAlive = nil
        if deferCallbacks { loop.deferToEndOfTurn { ending.run() } } else { ending.run() }
    }
}

/// The close callback of every handle this module allocates: frees its memory.
let uvFreeHandleOnClose: uv_close_cb = { handle in
    UnsafeMutableRawPointer(handle!).deallocate()
}
