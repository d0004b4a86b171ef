import Switchyard
import SwitchyardBackendKit
import Synchronization

/// A ``TLSConnection``'s working part: the toolkit's connection front (`StreamConnection`
/// over its `ConnectionStateMachine`) with OpenSSL over the wrapped connection as its I/O,
/// apart so that the front's primitives stay out of ``TLSConnection``'s public face.
///
/// `@unchecked Sendable`: every `var` is touched only on the wrapped connection's loop
/// (the front hops there first, and answers from the state machine's record once that
/// loop stopped); the handshake waiter is locked, `buffered` atomic, the rest immutable.
final class TLSStream: StreamConnection, @unchecked Sendable {
    /// What the handshake settled on.
    struct Handshake: Sendable {
        var applicationProtocol: String?
        var version: TLSConfiguration.Version
        var peerPresentedCertificate: Bool
    }

    let wrapped: any Connection
    /// Made when asked (rarely), not per connection.
    var backendName: String { wrapped.backendName + "+tls" }
    let loop: BorrowedEventLoop
    var state = ConnectionStateMachine()
    var localAddress: Endpoint { wrapped.localAddress }
    var remoteAddress: Endpoint { wrapped.remoteAddress }

    private enum Phase {
        case idle, handshaking, open
    }
    private var phase = Phase.idle
    private var session: OpenSSLSession?
    private let events = WrappedEvents()
    /// ``TLSTransport``'s, told when the connection ends.
    private var endObserver: (@Sendable () -> Void)?
    private var wrappedReading = false
    private var wrappedReadEnded = false
    private var pumpScheduled = false
    /// The plaintext bytes at the front of the queue whose records the wrapped connection
    /// holds, its write of them pending; nil when it holds none of this connection's.
    private var inFlight: Int?
    /// That write's completion, made once rather than per write.
    private lazy var inFlightCompletion: WriteCompletion = { [weak self] error in self?.recordsWritten(error) }
    /// The most queued plaintext encrypted into one write to the wrapped connection.
    private static let batchSize = 64 * 1024

    /// The handshake's outcome and its waiter, which may come in either order (a task
    /// cancelled before it waits aborts the handshake first): resumed once, from the loop
    /// or (for a wrapped connection that ended before the handshake could start) from the
    /// caller's thread.
    private enum HandshakeWaiter {
        case none
        case waiting(CheckedContinuation<Result<Handshake, TransportError>, Never>)
        /// ``startHandshake(notify:)``'s.
        case notifying(@Sendable (Result<Handshake, TransportError>) -> Void)
        case finished(Result<Handshake, TransportError>)
        case resumed
    }
    private let handshakeWaiter = Mutex(HandshakeWaiter.none)
    private let buffered = Atomic<Int>(0)

    init(wrapping wrapped: any Connection, session: OpenSSLSession) {
        self.wrapped = wrapped
        loop = BorrowedEventLoop(wrapped.eventLoop)
        self.session = session
    }

    // MARK: The handshake

    /// Runs the handshake over the wrapped connection; returns what it settled on.
    func handshake(timeout: Duration) async throws(TransportError) -> Handshake {
        let clock = wrapped.eventLoop.clock
        let deadline = clock.now + timeout
        let timer = Task(executorPreference: clock.taskExecutor) { [loop] in
            try await clock.sleep(until: deadline)
            loop.execute { self.abortHandshake(TLSErrorTable.handshakeTimedOut(timeout)) }
        }
        defer { timer.cancel() }
        let result = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let early: Result<Handshake, TransportError>? = handshakeWaiter.withLock { waiter in
                    if case .finished(let result) = waiter {
                        waiter = .resumed
                        return result
                    }
                    waiter = .waiting(continuation)
                    return nil
                }
                if let early {
                    continuation.resume(returning: early)
                    return
                }
                events.stream = self
                // Set from here, not from the loop: a wrapped connection that already
                // ended reports so to this handler even if its loop has stopped.
                wrapped.setHandler(events)
                loop.execute { self.beginHandshake() }
            }
        } onCancel: {
            loop.execute {
                self.abortHandshake(
                    TransportError(code: .cancelled, reason: .taskCancelled, message: "the task awaiting the TLS handshake was cancelled"))
            }
        }
        return try result.get()
    }

    /// Runs the handshake with no task: called on the wrapped connection's loop (a
    /// listener's accept handler), it starts at once; `notify` gets the outcome once, on
    /// the loop. What times it out is the caller's (``expireHandshake(after:)``).
    func startHandshake(notify: @escaping @Sendable (Result<Handshake, TransportError>) -> Void) {
        handshakeWaiter.withLock { $0 = .notifying(notify) }
        events.stream = self
        wrapped.setHandler(events)
        if loop.inEventLoop {
            beginHandshake()
        } else {
            loop.execute { self.beginHandshake() }
        }
    }

    /// Ends the handshake with `deadlineExceeded` if it is still running.
    func expireHandshake(after timeout: Duration) {
        loop.execute { self.abortHandshake(TLSErrorTable.handshakeTimedOut(timeout)) }
    }

    private func beginHandshake() {
        guard case .idle = phase, state.isOpen else { return }
        phase = .handshaking
        advanceHandshake()
    }

    private func advanceHandshake() {
        guard case .handshaking = phase, let session else { return }
        switch session.handshake() {
        case .done:
            flushOutput()
            session.releaseOutputBuffer()
            phase = .open
            setWrappedReading(false)
            publishBuffered()
            let settled = Handshake(
                applicationProtocol: session.negotiatedProtocol, version: session.negotiatedVersion ?? .tls13,
                peerPresentedCertificate: session.peerPresentedCertificate)
            resumeHandshake(.success(settled))
        case .wantsInput:
            flushOutput()
            if wrappedReadEnded {
                abortHandshake(TLSErrorTable.closedDuringHandshake())
            } else {
                setWrappedReading(true)
            }
        case .failed(let error):
            abortHandshake(error)
        }
    }

    /// Ends a handshake that failed (or timed out, or was cancelled): sends OpenSSL's
    /// alert if it made one, closes the wrapped connection, throws `error`.
    private func abortHandshake(_ error: TransportError) {
        if case .open = phase { return }
        end(error, deferCallbacks: false)
    }

    private func resumeHandshake(_ result: Result<Handshake, TransportError>) {
        let waiter: HandshakeWaiter = handshakeWaiter.withLock { waiter in
            switch waiter {
            case .none:
                waiter = .finished(result)
                return .none
            case .waiting, .notifying:
                defer { waiter = .resumed }
                return waiter
            case .finished, .resumed:
                return .none
            }
        }
        switch waiter {
        case .waiting(let continuation): continuation.resume(returning: result)
        case .notifying(let notify): notify(result)
        case .none, .finished, .resumed: break
        }
    }

    // MARK: Reading

    func readInterestChanged() {
        guard case .open = phase else { return }
        if state.shouldRead {
            schedulePump()
        } else {
            setWrappedReading(false)
        }
    }

    private func schedulePump() {
        guard !pumpScheduled else { return }
        pumpScheduled = true
        loop.deferToEndOfTurn {
            self.pumpScheduled = false
            self.pump()
        }
    }

    /// Delivers decrypted bytes while the user reads; reads the wrapped connection only
    /// when OpenSSL has nothing left to decrypt.
    private func pump() {
        defer { publishBuffered() }
        ReadBuffer.withBuffer { readBuffer in pump(into: readBuffer) }
    }

    private func pump(into readBuffer: UnsafeMutableRawBufferPointer) {
        while state.shouldRead, let session {
            let (count, stop) = session.read(into: readBuffer)
            flushOutput()
            if count > 0 {
                state.noteReceived(count)
                state.handler?.connectionDidRead(UnsafeRawBufferPointer(rebasing: readBuffer[0..<count]))
                // The handler may have stopped reading or closed: the stop waits for the
                // next pump then (the session tells it again).
                guard state.shouldRead else { break }
            }
            switch stop {
            case .full:
                continue
            case .wantsInput:
                if wrappedReadEnded {
                    end(TLSErrorTable.truncated(), deferCallbacks: false)
                } else {
                    setWrappedReading(true)
                }
                return
            case .closeNotify:
                setWrappedReading(false)
                state.readDidEnd()?.connectionDidReadEnd()
                return
            case .failed(let error):
                end(error, deferCallbacks: false)
                return
            }
        }
        if state.isOpen { setWrappedReading(false) }
    }

    private func setWrappedReading(_ reading: Bool) {
        guard reading != wrappedReading else { return }
        wrappedReading = reading
        if reading { wrapped.startReading() } else { wrapped.stopReading() }
    }

    // MARK: Writing

    /// Encrypts the write and hands its records over, unless the wrapped connection holds
    /// records of an earlier one (``inFlight``): then, or when its kernel did not take them
    /// all, the write waits in the queue (0), until ``recordsWritten(_:)``.
    func sendNow(_ header: UnsafeRawBufferPointer?, _ body: UnsafeRawBufferPointer) -> Int? {
        guard inFlight == nil else { return 0 }
        guard let session else { return nil }
        let count = (header?.count ?? 0) + body.count
        let failure: TransportError?
        if let header, count <= Self.batchSize {
            // Encrypted as one: a call's 5-byte header shares its message's record.
            failure = session.write(gathering: count) { joined in
                joined.copyMemory(from: header)
                UnsafeMutableRawBufferPointer(rebasing: joined[header.count...]).copyMemory(from: body)
                return count
            }
        } else if let header, let error = session.write(header) {
            failure = error
        } else {
            failure = session.write(body)
        }
        if let failure {
            end(failure, deferCallbacks: true)
            return nil
        }
        return handOver(count) ? count : 0
    }

    /// Nothing to do: writes are queued only behind records in flight, and
    /// ``recordsWritten(_:)`` sends them when those are in the kernel.
    func writesQueued() {}

    /// Hands the records OpenSSL made, those of `count` plaintext bytes last, to the
    /// wrapped connection. Returns true when its kernel took them at once; otherwise
    /// the bytes are ``inFlight`` until the wrapped write completes.
    private func handOver(_ count: Int) -> Bool {
        var taken = true
        _ = session?.withOutput { records in
            // The records as the borrowed header of an empty payload: the one borrowed
            // write of Connection that says whether the kernel took it all at once.
            taken = wrapped.writeNowOrQueue(header: records, payload: [], completion: count > 0 ? inFlightCompletion : nil)
        }
        if !taken && count > 0 { inFlight = count }
        return taken
    }

    /// The wrapped write of the records in flight completed (a loop event): their writes
    /// are done, and the queued ones are encrypted and handed over a batch at a time
    /// until a batch is in flight or none is left. An error is not this connection's to
    /// report: the wrapped connection ends, and its end ends this one.
    private func recordsWritten(_ error: TransportError?) {
        guard error == nil, state.isOpen, let count = inFlight else { return }
        inFlight = nil
        var completed: [WriteCompletion] = []
        var shutdownDue = state.writesTaken(count, completed: &completed)
        while inFlight == nil, !state.writes.isEmpty, let session {
            var batch = 0
            let failure = session.write(gathering: Self.batchSize) { buffer in
                for entry in state.writes.entries where batch < buffer.count {
                    let part = min(entry.remaining, buffer.count - batch)
                    entry.bytes.withUnsafeBytes { bytes in
                        UnsafeMutableRawBufferPointer(rebasing: buffer[batch..<batch + part])
                            .copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes[entry.offset..<entry.offset + part]))
                    }
                    batch += part
                }
                return batch
            }
            if let failure {
                end(failure, deferCallbacks: false)
                break
            }
            if handOver(batch) { shutdownDue = state.writesTaken(batch, completed: &completed) || shutdownDue }
        }
        for completion in completed { completion(nil) }
        if shutdownDue { shutDownOutputNow() }
        if state.writes.isEmpty, state.isOpen { state.handler?.connectionDidDrainWrites() }
    }

    /// Writes what OpenSSL made on its own (handshake messages, alerts, tickets,
    /// close_notify).
    private func flushOutput() {
        _ = session?.withOutput { output in wrapped.write(borrowing: output, completion: nil) }
    }

    func shutDownOutputNow() {
        session?.shutdown()
        flushOutput()
        wrapped.shutdownOutput { error in
            if case .some(.some(let completion)) = self.state.finishOutputShutdown(error: error) { completion(error) }
        }
    }

    // MARK: Ending

    /// A local close, or the transport's shutdown: `close_notify`, then the end.
    func terminate(_ error: TransportError?, deferCallbacks: Bool) {
        end(error, deferCallbacks: deferCallbacks, closeNotify: true)
    }

    func reset() {
        loop.onLoop {
            guard self.state.isOpen else { return }
            self.wrapped.reset()
            self.end(nil, deferCallbacks: true)
        }
    }

    /// Ends the connection once: what OpenSSL made last (an alert; with `closeNotify`,
    /// a `close_notify`) goes to the wrapped connection, which is then closed (a no-op
    /// when it ended first, or was reset); a handshake still running fails; the end is
    /// reported at once, or at the end of the turn.
    private func end(_ error: TransportError?, deferCallbacks: Bool, closeNotify: Bool = false) {
        guard let ending = state.end(with: error) else { return }
        if closeNotify { session?.shutdown() }
        flushOutput()
        wrapped.close()
        inFlight = nil
        session = nil
        buffered.store(0, ordering: .relaxed)
        events.stream = nil
        if case .open = phase {} else { resumeHandshake(.failure(error ?? TLSErrorTable.closedDuringHandshake())) }
        endObserver?()
        endObserver = nil
        if deferCallbacks { loop.deferToEndOfTurn { ending.run() } } else { ending.run() }
    }

    // MARK: For TLSTransport

    /// Runs `observer` once when the connection has ended (at once if it has).
    func observeEnd(_ observer: @escaping @Sendable () -> Void) {
        loop.onLoop({ if self.state.isOpen { self.endObserver = observer } else { observer() } }, ifStopped: observer)
    }

    /// The transport is shutting down: sends close_notify (so the peer reads a clean end
    /// of stream, not a truncation) and closes the wrapped connection; the end reports
    /// `cancelled`/`shutdown`. Returns once that was done on the loop.
    func closeForShutdown() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            loop.onLoop({
                self.terminate(with: .transportShutdown())
                continuation.resume()
            }, ifStopped: { continuation.resume() })
        }
    }

    /// The room this connection's output buffer holds (for tests; on the loop).
    var outputBufferCapacity: Int { session?.outputBufferCapacity ?? 0 }

    var bufferedInboundBytes: Int {
        if loop.inEventLoop, let session { return session.bufferedInboundBytes }
        return buffered.load(ordering: .relaxed)
    }

    private func publishBuffered() {
        buffered.store(session?.bufferedInboundBytes ?? 0, ordering: .relaxed)
    }

    // MARK: The wrapped connection's events

    fileprivate func wrappedDidRead(_ bytes: UnsafeRawBufferPointer) {
        guard let session else { return }
        session.lend(bytes) { advance() }
        // After the loan ended: what OpenSSL left unread is held now.
        publishBuffered()
    }

    fileprivate func wrappedDidReadEnd() {
        wrappedReadEnded = true
        advance()
    }

    /// The wrapped connection brought bytes or its end: the handshake goes on, or the
    /// user's reads do.
    private func advance() {
        switch phase {
        case .handshaking: advanceHandshake()
        case .open: if state.shouldRead { pump() }
        case .idle: break
        }
    }

    fileprivate func wrappedDidClose(_ error: TransportError?) {
        end(error, deferCallbacks: false)
    }
}

/// The wrapped connection's handler: forwards its events to the ``TLSStream``. It holds
/// the stream strongly while the stream is open (the wrapped connection's backend keeps
/// it, so a TLS connection lives as long as the one under it, whoever else holds it)
/// and lets go when it ends, which breaks the cycle.
///
/// `@unchecked Sendable`: touched only on the wrapped connection's loop, except the one
/// store before the handler is installed.
private final class WrappedEvents: ConnectionHandler, @unchecked Sendable {
    var stream: TLSStream?
    func connectionDidRead(_ bytes: UnsafeRawBufferPointer) { stream?.wrappedDidRead(bytes) }
    func connectionDidReadEnd() { stream?.wrappedDidReadEnd() }
    func connectionDidClose(error: TransportError?) { stream?.wrappedDidClose(error) }
}
