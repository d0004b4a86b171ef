import CLibUV
import DequeModule
import Switchyard
import Synchronization

/// A `uv_tcp_t` connection on one libuv loop. See ``Connection`` for the contract.
///
/// **Reads** are demand-driven: `uv_read_start` on ``startReading()``, `uv_read_stop` on
/// ``stopReading()``. The alloc callback hands libuv the loop's one read buffer, and the
/// bytes go to the handler borrowed, so a read allocates nothing.
///
/// **Writes.** With nothing queued, a write goes out at once with `uv_try_write`, and only
/// the tail the kernel did not take is copied and queued. Queued writes go to libuv as
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
/// Callbacks caused by a user's call are deferred to the end of the loop's turn; those
/// caused by libuv run in libuv's callback (which is never inside a user's call).
///
/// Safety of `@unchecked Sendable`: every stored `var` is touched only on `loop` (public
/// methods hop there first, in call order); `queuedBytesSnapshot` is atomic and `ended`
/// a mutex; the rest is immutable.
final class UVConnection: Connection, UVResource, @unchecked Sendable {
    let loop: UVEventLoop
    let localAddress: Endpoint
    let remoteAddress: Endpoint
    var backendName: String { "libuv" }
    var eventLoop: any EventLoop { loop }

    private let registry: UVResourceRegistry
    /// Whether the transport has a stall timeout: the kernel's stall errors then mean
    /// `stalled` (see ``UVErrorTable/connectionError(_:_:stallDetection:)``).
    private let stallDetection: Bool
    /// The handle, while open. Its `data` points at this object, unretained: `keepAlive`
    /// holds the object until the handle is closed.
    private var tcp: UnsafeMutablePointer<uv_tcp_t>?
    private var keepAlive: UVConnection?
    private var handler: (any ConnectionHandler)?

    /// `closed(nil)` after a local close.
    private enum Lifecycle { case open, closed(TransportError?) }
    private var lifecycle = Lifecycle.open
    /// How the connection ended, for calls that arrive after its loop stopped.
    private let ended = Mutex<TransportError??>(nil)
    private var wantsRead = false
    private var readEnded = false

    private struct PendingWrite {
        var bytes: [UInt8]
        var offset: Int
        var completion: WriteCompletion?
        var remaining: Int { bytes.count - offset }
    }
    private var writeQueue = Deque<PendingWrite>()
    /// The first `inFlightCount` entries of `writeQueue` are in the `uv_write` in flight;
    /// all of each, except perhaps the last, of which `inFlightTailBytes` went.
    private var inFlightCount = 0
    private var inFlightBytes = 0
    private var inFlightTailBytes = 0
    private var writeInFlight = false
    /// Reused for every `uv_write`; freed when the connection ends (or, if a write is in
    /// flight then, in its callback).
    private var writeRequest: UnsafeMutablePointer<uv_write_t>?
    private var queuedBytes = 0
    private let queuedBytesSnapshot = Atomic<Int>(0)
    /// A buffer larger than this goes to libuv in parts (`uv_buf_t.len` is 32 bits).
    private static let maxBufferBytes = 1 << 30

    private enum Output { case open, shutdownPending(WriteCompletion?), shuttingDown(WriteCompletion?), shutdown }
    private var output = Output.open

    /// Wraps a connected handle (initialised on `loop`). Call on the loop.
    init(
        tcp: UnsafeMutablePointer<uv_tcp_t>, loop: UVEventLoop, local: Endpoint, remote: Endpoint, registry: UVResourceRegistry,
        stallDetection: Bool
    ) {
        self.stallDetection = stallDetection
        self.tcp = tcp
        self.loop = loop
        self.localAddress = local
        self.remoteAddress = remote
        self.registry = registry
        tcp.pointee.data = Unmanaged.passUnretained(self).toOpaque()
        keepAlive = self
    }

    /// Registers with the transport. Call on the loop. False (and the connection is
    /// closed) when the transport is shutting down.
    func activate() -> Bool {
        loop.assertInLoop()
        guard registry.insert(self) else {
            terminate(.transportShutdown(), deferCallbacks: false)
            return false
        }
        return true
    }

    private var stream: UnsafeMutablePointer<uv_stream_t>? { tcp.map { csy_uv_tcp_stream($0) } }

    /// The error a call after the loop stopped reports.
    private var endedError: TransportError {
        switch ended.withLock({ $0 }) {
        case .some(.some(let error)): error
        case .some(.none): .closedLocally()
        case .none: .transportShutdown()
        }
    }

    // MARK: Connection

    func setHandler(_ handler: any ConnectionHandler) {
        guard loop.inEventLoop else {
            loop.submit({ self.setHandler(handler) }, otherwise: {
                let error: TransportError? = endedError == .closedLocally() ? nil : endedError
                handler.connectionDidClose(error: error)
            })
            return
        }
        if case .closed(let error) = lifecycle {
            // It ended before anyone listened: tell the new handler, once.
            loop.deferToEndOfTurn { handler.connectionDidClose(error: error) }
            return
        }
        self.handler = handler
    }

    func startReading() {
        guard loop.inEventLoop else {
            loop.submit({ self.startReading() }, otherwise: {})
            return
        }
        guard case .open = lifecycle, !wantsRead, let stream else { return }
        wantsRead = true
        guard !readEnded else { return }
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

    func stopReading() {
        guard loop.inEventLoop else {
            loop.submit({ self.stopReading() }, otherwise: {})
            return
        }
        guard case .open = lifecycle, wantsRead, let stream else { return }
        wantsRead = false
        if !readEnded { _ = uv_read_stop(stream) }
    }

    var pendingWriteBytes: Int {
        loop.inEventLoop ? queuedBytes : queuedBytesSnapshot.load(ordering: .relaxed)
    }

    func write(_ bytes: [UInt8], completion: WriteCompletion?) {
        guard loop.inEventLoop else {
            loop.submit({ self.write(bytes, completion: completion) }, otherwise: { completion?(endedError) })
            return
        }
        _ = writeOnLoop(bytes, completion: completion, reportingSentNow: false)
    }

    func writeNowOrQueue(_ bytes: [UInt8], completion: WriteCompletion?) -> Bool {
        guard loop.inEventLoop else {
            write(bytes, completion: completion)
            return false
        }
        return writeOnLoop(bytes, completion: completion, reportingSentNow: true)
    }

    func writeNowOrQueue(header: UnsafeRawBufferPointer, payload: [UInt8], completion: WriteCompletion?) -> Bool {
        guard loop.inEventLoop else {
            var joined = Array(header)
            joined.append(contentsOf: payload)
            write(joined, completion: completion)
            return false
        }
        if let refusal = writeRefusal() {
            complete(completion, refusal)
            return false
        }
        var written = 0
        if writeQueue.isEmpty {
            // One gathered uv_try_write of the prefix and the payload, no join.
            guard let sent = payload.withUnsafeBytes({ tryWrite(header, $0) }) else {
                complete(completion, terminalError)
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
        if let failure = startWriteIfIdle() { terminate(failure, deferCallbacks: true) }
        return false
    }

    /// An owned write, on the loop. Returns true when the kernel took every byte at once
    /// and `reportingSentNow` asked to hear so instead of a completion (then not run).
    private func writeOnLoop(_ bytes: [UInt8], completion: WriteCompletion?, reportingSentNow: Bool) -> Bool {
        if let refusal = writeRefusal() {
            complete(completion, refusal)
            return false
        }
        if writeQueue.isEmpty {
            guard let written = bytes.withUnsafeBytes({ tryWrite($0) }) else {
                complete(completion, terminalError)
                return false
            }
            if written == bytes.count {
                if reportingSentNow { return true }
                complete(completion, nil)
                return false
            }
            enqueue(PendingWrite(bytes: bytes, offset: written, completion: completion))
        } else {
            enqueue(PendingWrite(bytes: bytes, offset: 0, completion: completion))
        }
        if let failure = startWriteIfIdle() { terminate(failure, deferCallbacks: true) }
        return false
    }

    func write(borrowing bytes: UnsafeRawBufferPointer, completion: WriteCompletion?) {
        guard loop.inEventLoop else {
            let copy = Array(bytes)
            loop.submit({ self.write(copy, completion: completion) }, otherwise: { completion?(endedError) })
            return
        }
        if let refusal = writeRefusal() {
            complete(completion, refusal)
            return
        }
        if writeQueue.isEmpty {
            guard let written = tryWrite(bytes) else {
                complete(completion, terminalError)
                return
            }
            if written == bytes.count {
                complete(completion, nil)
                return
            }
            enqueue(PendingWrite(bytes: Array(UnsafeRawBufferPointer(rebasing: bytes[written...])), offset: 0, completion: completion))
        } else {
            enqueue(PendingWrite(bytes: Array(bytes), offset: 0, completion: completion))
        }
        if let failure = startWriteIfIdle() { terminate(failure, deferCallbacks: true) }
    }

    func shutdownOutput(completion: WriteCompletion?) {
        guard loop.inEventLoop else {
            loop.submit({ self.shutdownOutput(completion: completion) }, otherwise: { completion?(endedError) })
            return
        }
        if let refusal = writeRefusal() {
            complete(completion, refusal)
            return
        }
        if writeQueue.isEmpty {
            issueShutdown(completion, inUserCall: true)
        } else {
            output = .shutdownPending(completion)
        }
    }

    func close() {
        guard loop.inEventLoop else {
            loop.submit({ self.close() }, otherwise: {})
            return
        }
        terminate(nil, deferCallbacks: true)
    }

    func reset() {
        guard loop.inEventLoop else {
            loop.submit({ self.reset() }, otherwise: {})
            return
        }
        terminate(nil, deferCallbacks: true, reset: true)
    }

    // MARK: UVResource

    func terminate(with error: TransportError) {
        terminate(error, deferCallbacks: false)
    }

    /// The error for a libuv code that ended this connection: the table's, except that
    /// with a stall timeout the kernel's stall errors mean `stalled`.
    private func failure(_ code: Int32, _ what: String) -> TransportError {
        UVErrorTable.connectionError(code, what, stallDetection: stallDetection)
    }

    // MARK: reading

    private func didRead(_ count: Int) {
        guard case .open = lifecycle else { return }
        if count > 0 {
            handler?.connectionDidRead(UnsafeRawBufferPointer(rebasing: loop.readBuffer[..<count]))
        } else if count == Int(UV_EOF.rawValue) {
            // libuv has stopped reading (UV_HANDLE_READING is cleared at EOF).
            readEnded = true
            handler?.connectionDidReadEnd()
        } else if count < 0 {
            terminate(failure(Int32(count), "reading from \(remoteAddress)"), deferCallbacks: false)
        }
    }

    // MARK: writing

    /// Runs a completion for a write that never reached the queue: deferred, since a
    /// user's call is on the stack.
    private func complete(_ completion: WriteCompletion?, _ error: TransportError?) {
        guard let completion else { return }
        loop.deferToEndOfTurn { completion(error) }
    }

    /// Why a write cannot start, or nil.
    private func writeRefusal() -> TransportError? {
        if case .closed(let error) = lifecycle { return error ?? .closedLocally() }
        if case .open = output { return nil }
        return .outputShutdown()
    }

    private var terminalError: TransportError {
        if case .closed(let error) = lifecycle { return error ?? .closedLocally() }
        return .closedLocally()
    }

    /// Writes at once with `uv_try_write`; the count the kernel took, or nil after a
    /// failure that ended the connection (its callbacks deferred: a user call is on the
    /// stack).
    /// ``tryWrite(_:)`` of `head` then `body`, gathered (`head` must be small).
    private func tryWrite(_ head: UnsafeRawBufferPointer, _ body: UnsafeRawBufferPointer) -> Int? {
        if body.isEmpty { return tryWrite(head) }
        guard !head.isEmpty, let stream else { return tryWrite(body) }
        var buffers = (
            uv_buf_init(UnsafeMutableRawPointer(mutating: head.baseAddress!).assumingMemoryBound(to: CChar.self), UInt32(head.count)),
            uv_buf_init(
                UnsafeMutableRawPointer(mutating: body.baseAddress!).assumingMemoryBound(to: CChar.self),
                UInt32(min(body.count, Self.maxBufferBytes))))
        let status = withUnsafeMutableBytes(of: &buffers) { raw in
            uv_try_write(stream, raw.baseAddress!.assumingMemoryBound(to: uv_buf_t.self), 2)
        }
        if status >= 0 { return Int(status) }
        if status == UV_EAGAIN.rawValue { return 0 }
        terminate(failure(status, "writing to \(remoteAddress)"), deferCallbacks: true)
        return nil
    }

    private func tryWrite(_ bytes: UnsafeRawBufferPointer) -> Int? {
        guard !bytes.isEmpty, let stream else { return 0 }
        var buffer = uv_buf_init(
            UnsafeMutableRawPointer(mutating: bytes.baseAddress!).assumingMemoryBound(to: CChar.self),
            UInt32(min(bytes.count, Self.maxBufferBytes)))
        let status = uv_try_write(stream, &buffer, 1)
        if status >= 0 { return Int(status) }
        if status == UV_EAGAIN.rawValue { return 0 }
        terminate(failure(status, "writing to \(remoteAddress)"), deferCallbacks: true)
        return nil
    }

    private func enqueue(_ write: PendingWrite) {
        writeQueue.append(write)
        queuedBytes += write.remaining
        queuedBytesSnapshot.store(queuedBytes, ordering: .relaxed)
    }

    /// Hands the queued writes to libuv as one gathered `uv_write`, unless one is in
    /// flight. Returns the error when libuv refuses the write at once.
    private func startWriteIfIdle() -> TransportError? {
        guard !writeInFlight, let stream else { return nil }
        let buffers = loop.writeBuffers
        while !writeQueue.isEmpty {
            var count = 0
            var used = 0
            var bytes = 0
            var tail = 0
            // The pointers stay valid: each array is held, unmutated, by the queue until
            // the write callback.
            for write in writeQueue.prefix(UVEventLoop.writeBufferCount) {
                count += 1
                let remaining = write.remaining
                tail = 0
                if remaining == 0 { continue }
                let take = min(remaining, Self.maxBufferBytes)
                let base = write.bytes.withUnsafeBytes { $0.baseAddress! } + write.offset
                buffers[used] = uv_buf_init(UnsafeMutableRawPointer(mutating: base).assumingMemoryBound(to: CChar.self), UInt32(take))
                used += 1
                bytes += take
                tail = take
                if take < remaining { break }
            }
            if used == 0 {
                // Only empty writes: they complete in order, after what went before.
                for _ in 0..<count {
                    let done = writeQueue.removeFirst()
                    complete(done.completion, nil)
                }
                continue
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
                return failure(status, "writing to \(remoteAddress)")
            }
            writeInFlight = true
            inFlightCount = count
            inFlightBytes = bytes
            inFlightTailBytes = tail
            return nil
        }
        return nil
    }

    private func writeCompleted(_ status: Int32) {
        writeInFlight = false
        guard case .open = lifecycle else {
            // The connection ended with this write in flight, and completed it then.
            freeWriteRequest()
            return
        }
        if status < 0 {
            terminate(failure(status, "writing to \(remoteAddress)"), deferCallbacks: false, inFlightWritten: 0)
            return
        }
        var completed: [WriteCompletion] = []
        for index in 0..<inFlightCount {
            let write = writeQueue[writeQueue.startIndex]
            if index == inFlightCount - 1 && inFlightTailBytes < write.remaining {
                writeQueue[writeQueue.startIndex].offset += inFlightTailBytes
                break
            }
            writeQueue.removeFirst()
            if let completion = write.completion { completed.append(completion) }
        }
        queuedBytes -= inFlightBytes
        queuedBytesSnapshot.store(queuedBytes, ordering: .relaxed)
        inFlightCount = 0
        inFlightBytes = 0
        inFlightTailBytes = 0
        for completion in completed { completion(nil) }
        guard case .open = lifecycle else { return }
        if let failure = startWriteIfIdle() {
            terminate(failure, deferCallbacks: false)
            return
        }
        if writeQueue.isEmpty {
            if case .shutdownPending(let completion) = output { issueShutdown(completion, inUserCall: false) }
            guard case .open = lifecycle else { return }
            handler?.connectionDidDrainWrites()
        }
    }

    private func freeWriteRequest() {
        writeRequest?.deallocate()
        writeRequest = nil
    }

    // MARK: half-close

    private func issueShutdown(_ completion: WriteCompletion?, inUserCall: Bool) {
        guard let stream else { return }
        output = .shuttingDown(completion)
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
            output = .shutdown
            let error = UVErrorTable.error(status, "shutting down output to \(remoteAddress)")
            if inUserCall { complete(completion, error) } else { completion?(error) }
        }
    }

    private func shutdownCompleted(_ status: Int32) {
        // After the connection ended, its end completed the shutdown already.
        guard case .shuttingDown(let completion) = output else { return }
        output = .shutdown
        completion?(status < 0 ? UVErrorTable.error(status, "shutting down output to \(remoteAddress)") : nil)
    }

    // MARK: ending

    /// Ends the connection once: `error` nil for a local close. Pending writes complete
    /// (those the kernel took with `nil`, the rest with the error, or `cancelled`/`closed`),
    /// then a pending shutdown, then the handler hears of the close. The handle is closed
    /// (`uv_close`, or `uv_tcp_close_reset` for `reset`), which closes the descriptor now.
    private func terminate(_ error: TransportError?, deferCallbacks: Bool, reset: Bool = false, inFlightWritten: Int? = nil) {
        guard case .open = lifecycle else { return }
        let failure = error ?? .closedLocally()
        lifecycle = .closed(error)
        ended.withLock { $0 = .some(error) }
        registry.remove(self)

        var succeeded: [WriteCompletion] = []
        var failed: [WriteCompletion] = []
        var written = 0
        if writeInFlight, let stream {
            written = inFlightWritten ?? max(0, inFlightBytes - Int(uv_stream_get_write_queue_size(stream)))
        }
        var broken = false
        for (index, write) in writeQueue.enumerated() {
            var done = false
            if writeInFlight && index < inFlightCount && !broken {
                let sent = index == inFlightCount - 1 ? inFlightTailBytes : write.remaining
                if sent == write.remaining && written >= sent {
                    written -= sent
                    done = true
                }
            }
            if !done { broken = true }
            if let completion = write.completion {
                if done { succeeded.append(completion) } else { failed.append(completion) }
            }
        }
        writeQueue.removeAll()
        queuedBytes = 0
        queuedBytesSnapshot.store(0, ordering: .relaxed)
        var shutdownCompletion: WriteCompletion?
        switch output {
        case .shutdownPending(let completion), .shuttingDown(let completion): shutdownCompletion = completion
        case .open, .shutdown: break
        }
        output = .shutdown
        let handler = self.handler
        self.handler = nil

        if let tcp {
            self.tcp = nil
            let handle = csy_uv_tcp_handle(tcp)
            // uv_tcp_close_reset refuses while a shutdown is pending: set linger 0 by hand.
            if !reset || uv_tcp_close_reset(tcp, uvFreeHandleOnClose) != 0 {
                if reset { _ = csy_uv_set_linger_zero(csy_uv_tcp_fileno(tcp)) }
                uv_close(handle, uvFreeHandleOnClose)
            }
        }
        if !writeInFlight { freeWriteRequest() }
        keepAlive = nil

        let callbacks = {
            for completion in succeeded { completion(nil) }
            for completion in failed { completion(failure) }
            shutdownCompletion?(failure)
            handler?.connectionDidClose(error: error)
        }
        if deferCallbacks { loop.deferToEndOfTurn(callbacks) } else { callbacks() }
    }
}

/// The close callback of every handle this module allocates: frees its memory.
let uvFreeHandleOnClose: uv_close_cb = { handle in
    UnsafeMutableRawPointer(handle!).deallocate()
}
