public import Switchyard
import Synchronization

/// TLS over any `Connection`, itself a `Connection`: what is written is encrypted and
/// written to the wrapped connection, what the wrapped connection reads is decrypted and
/// handed to the handler. OpenSSL works on memory buffers only (it decrypts from the bytes
/// the wrapped connection lends and encrypts into one buffer this connection reuses); the
/// wrapped connection, of any backend, does all the I/O, on its own loop, which is this
/// connection's loop.
///
/// ## Handshake first
///
/// A `TLSConnection` exists for its user only after its handshake: ``client(wrapping:context:serverName:)``
/// and ``server(wrapping:context:)`` return once the handshake succeeded and throw its
/// failure otherwise (``TLSTransport`` does this on connect and on accept). So the
/// `Connection` contract holds from the first call, a write never waits for a
/// handshake, and a certificate failure is an error of the connect, not of some later
/// read. (With TLS 1.3 a client finishes its handshake before the server has checked
/// the client's certificate: a server that refuses it is heard on the client's first
/// read, as a `certificate` error.)
///
/// ## Contract (beyond `Connection`'s)
///
/// - **Reads on demand.** The wrapped connection is read only while the user reads
///   (``startReading()``) and no decrypted byte is waiting: when OpenSSL needs more
///   ciphertext. After ``stopReading()`` nothing more is read from the wrapped
///   connection, so what this layer holds for a user who does not read is at most one
///   read of the wrapped connection plus the record OpenSSL is in
///   (``bufferedInboundBytes``), and TCP pushes the peer back as it would without TLS.
/// - **Writes** are encrypted at once, whole (one call, one or more records), and
///   written to the wrapped connection; a write completes when the wrapped connection's
///   write of its records completes: when the encrypted bytes are in the kernel.
///   ``pendingWriteBytes`` counts encrypted bytes.
/// - **End of stream** is the peer's `close_notify`: `ConnectionHandler.connectionDidReadEnd()`
///   runs after the last byte before it. A peer whose TCP stream ends without
///   `close_notify` ends the connection with `unavailable`, reason
///   `TransportError.Reason.truncated` instead (once the bytes before were delivered):
///   the data may have been cut, and the user must be able to tell.
/// - **shutdownOutput** sends `close_notify`, then shuts the wrapped connection's output
///   down; reading goes on (TLS 1.3 half-close; TLS 1.2 peers may close at once).
/// - **close** sends `close_notify` (best effort: it goes to the wrapped connection's
///   queue, which the close then releases) and closes the wrapped connection; the end
///   reports nil, whatever the wrapped connection saw. With writes still queued, the
///   `close_notify` goes with them (records cannot be skipped: each one's sequence number
///   is in the next one's integrity check), so the peer reads `truncated`: it did not
///   get everything. **reset** resets the wrapped connection without `close_notify`.
/// - **Errors** of TLS (a record that is not TLS, an alert, a refused certificate) end the
///   connection with the error ``TLSErrorTable`` gives; OpenSSL's alert is sent to the
///   peer first. The wrapped connection's own errors pass through unchanged.
/// - Calls from other threads hop to the loop with `TransportEventLoop.execute(_:)`. Unlike a
///   toolkit backend's connection, a call made from another thread after the wrapped
///   transport's loops have stopped is dropped (a generic `TransportEventLoop` cannot say it
///   has stopped); the connection had ended by then.
///
/// `@unchecked Sendable`: all mutable state is touched only on the wrapped connection's
/// loop (every entry point hops there first); ``bufferedInboundBytes`` is an atomic
/// snapshot; the negotiated protocol and version are set before the connection is
/// handed out and never change.
public final class TLSConnection: Connection, @unchecked Sendable {
    /// The connection the records travel on.
    public let wrapped: any Connection
    /// The wrapped connection's backend name with `+tls`, for example `"bsd+tls"`.
    public let backendName: String
    public var eventLoop: any TransportEventLoop { wrapped.eventLoop }
    public var localAddress: Endpoint { wrapped.localAddress }
    public var remoteAddress: Endpoint { wrapped.remoteAddress }
    /// The application protocol ALPN settled on, or nil.
    public private(set) var negotiatedProtocol: String?
    /// The TLS version the handshake settled on.
    public private(set) var negotiatedVersion: TLSConfiguration.Version = .tls13
    /// Whether the peer presented a certificate (for a server: a client certificate, which
    /// verified when ``TLSConfiguration/clientAuthentication`` asked for one).
    public private(set) var peerPresentedCertificate = false

    private enum Phase {
        /// Made; the handshake has not started.
        case idle
        /// The handshake runs; the wrapped connection is read.
        case handshaking
        /// The handshake succeeded; the connection is the user's.
        case open
        /// This side closed the wrapped connection and waits for it to report its end.
        case ending
        /// The wrapped connection reported its end.
        case ended
    }

    // Loop-only state.
    private var phase = Phase.idle
    private var session: OpenSSLSession?
    private var handler: (any ConnectionHandler)?
    private var endReported = false
    /// What the end reports when this side ended the connection for a TLS failure; nil
    /// for a local close.
    private var terminalError: TransportError?
    /// The user closed or reset the connection: its end reports nil.
    private var closedLocally = false
    /// ``TLSTransport``'s, told when the connection ends.
    private var endObserver: (@Sendable () -> Void)?
    private var userReading = false
    private var wrappedReading = false
    private var wrappedReadEnded = false
    private var readEndDelivered = false
    private var outputShutDown = false
    private var pumpScheduled = false
    private let events: WrappedEvents

    /// The handshake's outcome and its waiter, which may come in either order (a task
    /// cancelled before it waits aborts the handshake first): resumed once, from the loop
    /// or (for a wrapped connection that ended before the handshake could start) from the
    /// caller's thread.
    private enum HandshakeWaiter {
        case none
        case waiting(CheckedContinuation<Result<Void, TransportError>, Never>)
        case finished(Result<Void, TransportError>)
        case resumed
    }
    private let handshakeWaiter = Mutex(HandshakeWaiter.none)
    private let buffered = Atomic<Int>(0)

    private init(wrapping wrapped: any Connection, session: OpenSSLSession) {
        self.wrapped = wrapped
        self.backendName = wrapped.backendName + "+tls"
        self.session = session
        self.events = WrappedEvents()
    }

    /// Runs the client handshake over `wrapped` (connected, not yet reading, no handler
    /// set) and returns the connection once it succeeded.
    /// - Parameters:
    ///   - wrapped: the connection the TLS records travel on.
    ///   - context: a context of the client role.
    ///   - serverName: the name sent as SNI and verified; nil takes
    ///     ``TLSConfiguration/serverName``, then the wrapped connection's remote host.
    /// - Throws: a handshake failure as ``TLSErrorTable`` maps it (the wrapped connection
    ///   is closed then); `cancelled`/`task cancelled` if the task is cancelled.
    public static func client(
        wrapping wrapped: any Connection, context: TLSContext, serverName: String? = nil
    ) async throws(TransportError) -> TLSConnection {
        guard context.configuration.role == .client else {
            wrapped.close()
            throw TransportError(code: .invalidArgument, reason: .invalidOption, message: "a server TLS context used for a client handshake")
        }
        let name = serverName ?? context.configuration.serverName ?? wrapped.remoteAddress.host
        return try await handshake(wrapped, context: context, serverName: name)
    }

    /// Runs the server handshake over `wrapped` (accepted, not yet reading, no handler
    /// set) and returns the connection once it succeeded.
    /// - Throws: as ``client(wrapping:context:serverName:)``.
    public static func server(wrapping wrapped: any Connection, context: TLSContext) async throws(TransportError) -> TLSConnection {
        guard context.configuration.role == .server else {
            wrapped.close()
            throw TransportError(code: .invalidArgument, reason: .invalidOption, message: "a client TLS context used for a server handshake")
        }
        return try await handshake(wrapped, context: context, serverName: nil)
    }

    private static func handshake(
        _ wrapped: any Connection, context: TLSContext, serverName: String?
    ) async throws(TransportError) -> TLSConnection {
        let session: OpenSSLSession
        do {
            session = try OpenSSLSession(context: context, serverName: serverName)
        } catch {
            wrapped.close()
            throw error
        }
        let connection = TLSConnection(wrapping: wrapped, session: session)
        let loop = wrapped.eventLoop
        let timeout = context.configuration.handshakeTimeout
        let timer = Task {
            try await Task.sleep(for: timeout)
            loop.execute { connection.abortHandshake(TLSErrorTable.handshakeTimedOut(timeout)) }
        }
        defer { timer.cancel() }
        let result = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let early: Result<Void, TransportError>? = connection.handshakeWaiter.withLock { waiter in
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
                connection.events.connection = connection
                // Set from here, not from the loop: a wrapped connection that already
                // ended reports so to this handler even if its loop has stopped.
                wrapped.setHandler(connection.events)
                loop.execute { connection.beginHandshake() }
            }
        } onCancel: {
            loop.execute {
                connection.abortHandshake(
                    TransportError(code: .cancelled, reason: .taskCancelled, message: "the task awaiting the TLS handshake was cancelled"))
            }
        }
        try result.get()
        return connection
    }

    // MARK: Connection

    public func setHandler(_ handler: any ConnectionHandler) {
        onLoop {
            if case .ended = self.phase {
                if !self.endReported {
                    self.endReported = true
                    let error = self.terminalError
                    self.eventLoop.execute { handler.connectionDidClose(error: error) }
                }
                return
            }
            self.handler = handler
        }
    }

    public func startReading() {
        onLoop {
            guard case .open = self.phase, !self.userReading else { return }
            self.userReading = true
            self.schedulePump()
        }
    }

    public func stopReading() {
        onLoop {
            self.userReading = false
            if case .open = self.phase { self.setWrappedReading(false) }
        }
    }

    public func write(_ bytes: [UInt8], completion: WriteCompletion?) {
        onLoop { bytes.withUnsafeBytes { self.writeOnLoop($0, completion: completion) } }
    }

    public func write(borrowing bytes: UnsafeRawBufferPointer, completion: WriteCompletion?) {
        guard eventLoop.inEventLoop else {
            let copy = Array(bytes)
            eventLoop.execute { copy.withUnsafeBytes { self.writeOnLoop($0, completion: completion) } }
            return
        }
        writeOnLoop(bytes, completion: completion)
    }

    public var pendingWriteBytes: Int { wrapped.pendingWriteBytes }

    /// Bytes from the peer this layer holds and has not delivered: ciphertext read from
    /// the wrapped connection and not yet decrypted, and the decrypted rest of the
    /// current record. Exact on the loop; elsewhere a snapshot. Bounded while the user
    /// does not read: see the contract.
    public var bufferedInboundBytes: Int {
        if eventLoop.inEventLoop, let session { return session.bufferedInboundBytes }
        return buffered.load(ordering: .relaxed)
    }

    public func shutdownOutput(completion: WriteCompletion?) {
        onLoop {
            if let refusal = self.writeRefusal {
                if let completion { self.eventLoop.execute { completion(refusal) } }
                return
            }
            self.outputShutDown = true
            self.session?.shutdown()
            self.flushOutput()
            self.wrapped.shutdownOutput(completion: self.chained(completion))
        }
    }

    public func close() {
        onLoop {
            guard case .open = self.phase else { return }
            self.session?.shutdown()
            self.flushOutput()
            self.phase = .ending
            self.closedLocally = true
            self.wrapped.close()
        }
    }

    public func reset() {
        onLoop {
            guard case .open = self.phase else { return }
            self.phase = .ending
            self.closedLocally = true
            self.wrapped.reset()
        }
    }

    // MARK: For TLSTransport

    /// Runs `observer` once when the connection has ended (at once if it has).
    func observeEnd(_ observer: @escaping @Sendable () -> Void) {
        onLoop {
            if case .ended = self.phase { observer() } else { self.endObserver = observer }
        }
    }

    /// The transport is shutting down: sends close_notify (so the peer reads a clean end
    /// of stream, not a truncation) and closes the wrapped connection; the end reports
    /// `cancelled`/`shutdown`. Returns once that was done on the loop.
    func closeForShutdown() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            onLoop {
                if case .open = self.phase {
                    self.session?.shutdown()
                    self.flushOutput()
                    self.terminalError = .transportShutdown()
                    self.phase = .ending
                    self.wrapped.close()
                }
                continuation.resume()
            }
        }
    }

    // MARK: The handshake

    private func beginHandshake() {
        guard case .idle = phase else { return }
        phase = .handshaking
        advanceHandshake()
    }

    private func advanceHandshake() {
        guard case .handshaking = phase, let session else { return }
        switch session.handshake() {
        case .done:
            flushOutput()
            negotiatedProtocol = session.negotiatedProtocol
            negotiatedVersion = session.negotiatedVersion ?? .tls13
            peerPresentedCertificate = session.peerPresentedCertificate
            phase = .open
            setWrappedReading(false)
            publishBuffered()
            resumeHandshake(.success(()))
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
        switch phase {
        case .idle, .handshaking:
            flushOutput()
            terminalError = error
            phase = .ending
            wrapped.close()
            resumeHandshake(.failure(error))
        case .open, .ending, .ended:
            return
        }
    }

    private func resumeHandshake(_ result: Result<Void, TransportError>) {
        let waiter: CheckedContinuation<Result<Void, TransportError>, Never>? = handshakeWaiter.withLock { waiter in
            switch waiter {
            case .none:
                waiter = .finished(result)
                return nil
            case .waiting(let continuation):
                waiter = .resumed
                return continuation
            case .finished, .resumed:
                return nil
            }
        }
        waiter?.resume(returning: result)
    }

    // MARK: Reading

    private func schedulePump() {
        guard !pumpScheduled else { return }
        pumpScheduled = true
        eventLoop.execute {
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
        while userReading, case .open = phase, !readEndDelivered, let session {
            let (count, stop) = session.read(into: readBuffer)
            flushOutput()
            if count > 0 {
                handler?.connectionDidRead(UnsafeRawBufferPointer(rebasing: readBuffer[0..<count]))
                // The handler may have stopped reading or closed: the stop waits for the
                // next pump then (the session tells it again).
                guard userReading, case .open = phase else { break }
            }
            switch stop {
            case .full:
                continue
            case .wantsInput:
                if wrappedReadEnded {
                    fail(TLSErrorTable.truncated())
                } else {
                    setWrappedReading(true)
                }
                return
            case .closeNotify:
                readEndDelivered = true
                setWrappedReading(false)
                handler?.connectionDidReadEnd()
                return
            case .failed(let error):
                fail(error)
                return
            }
        }
        if case .open = phase { setWrappedReading(false) }
    }

    private func setWrappedReading(_ reading: Bool) {
        guard reading != wrappedReading else { return }
        wrappedReading = reading
        if reading { wrapped.startReading() } else { wrapped.stopReading() }
    }

    // MARK: Writing

    private var writeRefusal: TransportError? {
        switch phase {
        case .idle, .handshaking, .open:
            return outputShutDown ? .outputShutdown() : nil
        case .ending, .ended:
            return terminalError ?? .closedLocally()
        }
    }

    private func writeOnLoop(_ bytes: UnsafeRawBufferPointer, completion: WriteCompletion?) {
        if let refusal = writeRefusal {
            if let completion { eventLoop.execute { completion(refusal) } }
            return
        }
        guard let session else { return }
        if let error = session.write(bytes) {
            fail(error)
            if let completion { eventLoop.execute { completion(error) } }
            return
        }
        let wrote = session.withOutput { records in
            // One write for all of this write's records; the wrapped connection copies
            // only what the kernel does not take at once.
            wrapped.write(borrowing: records, completion: chained(completion))
        }
        if !wrote {
            // An empty write: nothing to send, done.
            if let completion { eventLoop.execute { completion(nil) } }
        }
    }

    /// The user's completion behind the wrapped write's; a write cut short by this side's
    /// TLS failure reports that failure, not the close it caused.
    private func chained(_ completion: WriteCompletion?) -> WriteCompletion? {
        guard let completion else { return nil }
        return { error in
            if let error, error.reason == .closed, let terminal = self.terminalError {
                completion(terminal)
            } else {
                completion(error)
            }
        }
    }

    /// Writes what OpenSSL produced (handshake messages, alerts, tickets, close_notify).
    private func flushOutput() {
        _ = session?.withOutput { output in wrapped.write(borrowing: output, completion: nil) }
    }

    // MARK: Ending

    /// Ends the connection for a TLS failure: the alert, then the wrapped connection's
    /// close; the end reports `error`.
    private func fail(_ error: TransportError) {
        guard case .open = phase else { return }
        flushOutput()
        terminalError = error
        phase = .ending
        wrapped.close()
    }

    private func onLoop(_ work: @escaping @Sendable () -> Void) {
        if eventLoop.inEventLoop { work() } else { eventLoop.execute(work) }
    }

    private func publishBuffered() {
        buffered.store(session?.bufferedInboundBytes ?? 0, ordering: .relaxed)
    }

    // MARK: The wrapped connection's events

    fileprivate func wrappedDidRead(_ bytes: UnsafeRawBufferPointer) {
        guard let session else { return }
        session.lend(bytes) {
            switch phase {
            case .handshaking: advanceHandshake()
            case .open: if userReading { pump() }
            case .idle, .ending, .ended: break
            }
        }
        // After the loan ended: what OpenSSL left unread is held now.
        publishBuffered()
    }

    fileprivate func wrappedDidReadEnd() {
        wrappedReadEnded = true
        switch phase {
        case .handshaking: advanceHandshake()
        case .open: if userReading { pump() }
        case .idle, .ending, .ended: return
        }
    }

    fileprivate func wrappedDidDrainWrites() {
        if case .open = phase { handler?.connectionDidDrainWrites() }
    }

    fileprivate func wrappedDidClose(_ error: TransportError?) {
        let wasHandshaking: Bool
        switch phase {
        case .ended: return
        case .idle, .handshaking: wasHandshaking = true
        case .open, .ending: wasHandshaking = false
        }
        phase = .ended
        // A local close ends with nil, as the contract says, even when the wrapped
        // connection saw an error first: the close_notify written to a peer that had
        // gone (the memory backend reports that write as a reset).
        if terminalError == nil && !closedLocally { terminalError = error }
        session = nil
        buffered.store(0, ordering: .relaxed)
        events.connection = nil
        if let endObserver {
            self.endObserver = nil
            endObserver()
        }
        if wasHandshaking {
            resumeHandshake(.failure(error ?? TLSErrorTable.closedDuringHandshake()))
        }
        // A handshake that failed has no user to tell; nor has a connection whose
        // handshake waiter is still pending (resumed just above).
        if let handler, !endReported {
            endReported = true
            self.handler = nil
            handler.connectionDidClose(error: terminalError)
        }
    }
}

/// The wrapped connection's handler: forwards its events to the ``TLSConnection``. It
/// holds the TLS connection strongly while the wrapped connection is open (the wrapped
/// connection's backend keeps it, so a TLS connection lives as long as the one under
/// it, whoever else holds it) and lets go when it ends, which breaks the cycle.
///
/// `@unchecked Sendable`: touched only on the wrapped connection's loop, except the one
/// store before the handler is installed.
private final class WrappedEvents: ConnectionHandler, @unchecked Sendable {
    var connection: TLSConnection?
    func connectionDidRead(_ bytes: UnsafeRawBufferPointer) { connection?.wrappedDidRead(bytes) }
    func connectionDidReadEnd() { connection?.wrappedDidReadEnd() }
    func connectionDidDrainWrites() { connection?.wrappedDidDrainWrites() }
    func connectionDidClose(error: TransportError?) { connection?.wrappedDidClose(error) }
}
