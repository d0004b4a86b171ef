import Synchronization
public import Switchyard
import SwitchyardHTTP2

/// One bidirectional stream of messages, ending with a status: on gRPC's wire, one
/// HTTP/2 stream of its channel's connection (or, on a server, its client's).
///
/// A client call comes from ``CallChannel/startCall(method:metadata:options:handler:)``; a server call is
/// handed to a ``CallServer``'s handler. Both are driven by the same engine, on the
/// connection's event loop (the engine speaks to its stream through `CallStreamConnection`,
/// which translates to HTTP/2):
///
/// - **Sending.** ``send(_:)`` frames a message and writes it; messages go out in order.
///   Sent from off the loop, messages queue for the loop, which wakes once for all that
///   queued meanwhile and writes them together (one write of the connection).
///   With flow control on, each reports ``CallHandler/callDidWriteData(_:)`` once it is
///   in the kernel, so a sender that waits for it has at most one message pending.
///   The client ends its side with ``finishSending(completion:)`` (END_STREAM); the server
///   ends the call with ``finish(_:completion:)`` (the status in trailers, with END_STREAM).
/// - **Receiving.** With flow control off, messages are delivered as they arrive. With
///   it on, nothing is delivered until ``receiveNextMessage()`` or
///   ``receiveNextMessages(_:)`` asks; requests stack; while nothing is asked for the
///   call reads ahead only until one whole message waits and then stops reading its
///   stream, whose HTTP/2 window is then given back no further, so the sender is pushed
///   back, the call holds at most one message plus one stream window (``bufferedBytes``),
///   and a status, end of stream or reset that follows what was asked for is still seen.
/// - **CallMetadata.** The client names the call's ``method`` and sends its ``metadata``
///   first, in the request's HEADERS sent when the call starts (``CallChannel/startCall(method:metadata:options:handler:)``).
///   A server makes the call's handler once they have arrived, so ``method`` and
///   ``metadata`` are set before the handler is made and before any message reaches it. The server may send
///   ``responseMetadata`` before its first message (``sendResponseMetadata(_:completion:)``)
///   and ``trailingMetadata`` with its status (``setTrailingMetadata(_:)``); the client
///   has them before the first message, and before `didClose`, is handed over. Each is
///   encoded once per call; messages carry none of it.
/// - **Ending.** ``CallHandler/call(_:didCloseWith:)`` runs once: on the client with the
///   server's status; on the server once its status is in the kernel; on either side
///   with `unavailable` if the connection broke first (the transport's error: reset,
///   timed out, ...; reason `closed` when it ended cleanly before the status), with a
///   protocol error after a bad frame (`resourceExhausted`/`frame too large`,
///   `internal`/`unknown frame flags`, `internal`/`truncated frame`,
///   `internal`/`protocol violation`; for a metadata frame over
///   ``CallConfiguration/maximumMetadataSize``, `resourceExhausted`/`metadata too large`), or
///   with `cancelled` after ``cancel()``.
///
/// Every method may be called from any thread; it acts on the call's loop, in call
/// order. Calls made after the call ended are ignored (the handler has heard why).
///
/// Safety of `@unchecked Sendable`: all mutable state is confined to the connection's
/// event loop (methods hop there first); ``bufferedBytes`` off the loop reads an atomic
/// snapshot.
public final class Call: @unchecked Sendable {
    /// Which end of the call this is.
    public struct Role: Sendable, Hashable, CustomStringConvertible {
        private let isClient: Bool
        private init(isClient: Bool) { self.isClient = isClient }
        public static let client = Role(isClient: true)
        public static let server = Role(isClient: false)
        public var description: String { isClient ? "client" : "server" }
    }

    public let role: Role
    /// The connection the call runs on: its channel's HTTP/2 connection (or, on a
    /// server, its client's), which the call shares with the other calls on it. Closing
    /// or resetting it ends every one of them.
    public let connection: any Connection
    /// The call's own stream of ``connection``, as the engine writes and reads it.
    let stream: any Connection
    public let options: CallConfiguration
    /// The loop the call's events run on.
    public let eventLoop: any TransportEventLoop

    // The state below is confined to the loop (see above), so the per-message hot
    // fields skip the runtime's dynamic exclusivity checks (each costs a thread-local
    // lookup, and a message touched them a dozen times).
    @exclusivity(unchecked) private var handler: (any CallHandler)?
    @exclusivity(unchecked) private var flow: any FlowController
    @exclusivity(unchecked) private var decoder: FrameDecoder
    @exclusivity(unchecked) private var reading = false
    @exclusivity(unchecked) private var peerEnded = false
    private var peerEndReported = false
    @exclusivity(unchecked) private var sentEnd = false
    private var status: CallStatus?
    /// Whether the call ended (``status`` is set). Checked on every message: reading the
    /// optional status instead copies it (four strings) through its value witnesses.
    @exclusivity(unchecked) private var ended = false
    /// The completion each reported write gets when the sender passed none: made once
    /// per call, so a write with flow control on allocates no closure. Holds the call
    /// until it ends (`end` drops it).
    @exclusivity(unchecked) private var writeReport: WriteCompletion?
    /// Whether ``deliver()`` is running its loop: the handler is being called from it,
    /// so what the handler does there (asks for more, sends) is picked up by that loop
    /// once the handler returns, never nested inside the handler's call.
    @exclusivity(unchecked) private var dispatching = false
    /// Messages the handler sent while ``dispatching`` that went into the kernel at once:
    /// their `didWriteData` is reported by the dispatch loop after the handler returns
    /// (no deferred completion per message).
    @exclusivity(unchecked) private var owedWriteReports = 0
    /// The unread rest of the read being handled, when it arrived with nothing buffered:
    /// frames are handed over straight from it, and only what is left when the dispatch
    /// loop stops is copied into the decoder. Borrowed: valid only inside ``didRead(_:)``.
    @exclusivity(unchecked) private var input = UnsafeRawBufferPointer(start: nil, count: 0)
    /// Server, after its status: reading only to see the client's end before closing,
    /// so unread bytes never turn the close into a reset that could lose the status.
    private var draining = false
    private let bufferedSnapshot = Atomic<Int>(0)
    private var adapter: Adapter?
    /// Server: makes the handler once the client's headers (or its first other frame)
    /// arrived, or when the call ended first; nil once used, and on a client.
    private var makeHandler: (@Sendable (Call) -> any CallHandler)?
    /// Where the peer's frames are, for the checks of frame order; anything but `.open`
    /// takes the message path's one slow branch.
    @exclusivity(unchecked) private var peerPhase = PeerPhase.awaitingHeaders
    private enum PeerPhase {
        /// No frame yet: headers may come (on a client, the server's optional ones).
        case awaitingHeaders
        /// Headers, or a first message, came: messages flow.
        case open
        /// Client: the server's trailers came; only its status may follow.
        case trailersReceived
    }
    /// The call's metadata, read from any thread (touched once per call, never per message).
    private let metadataState: Mutex<MetadataState>
    private struct MetadataState {
        var method: String
        var metadata: CallMetadata
        var response = CallMetadata()
        var responseSent = false
        var trailing = CallMetadata()
    }
    /// Whether the call ended because its connection broke (not by a status or a cancel).
    private(set) var endedByBrokenConnection = false
    /// Whether ``start(handler:)`` took effect: no reading before the handler is set.
    private var started = false
    /// Messages sent from off the loop, waiting to go out together (OffLoopSendBatching.swift).
    private let offLoopSends = OffLoopSendBatching()
    /// The HTTP/2 connection of the call's stream, whose writes a batch holds; nil on a
    /// plain connection.
    private let h2: H2Connection?

    /// A call on `connection`; a client's names `method` and carries `metadata` (checked
    /// by the channel: ``CallMetadata/problem(method:)``).
    init(role: Role, connection: any Connection, options: CallConfiguration, method: String = "", metadata: CallMetadata = CallMetadata()) {
        self.role = role
        self.stream = connection
        self.h2 = (connection as? CallStreamConnection)?.h2
        self.connection = h2?.connection ?? connection
        self.eventLoop = connection.eventLoop
        self.options = options
        self.flow = options.makeFlowController()
        self.decoder = FrameDecoder(maximumMessageSize: options.maximumMessageSize, maximumMetadataSize: options.maximumMetadataSize)
        self.metadataState = Mutex(MetadataState(method: method, metadata: metadata))
    }

    /// Client: sends the headers frame, attaches the handler and starts reading as the
    /// policy allows. Call once, before the call is handed out (so the headers go first:
    /// a connection writes in call order from any thread).
    func start(handler: any CallHandler) {
        if role == .client {
            let (method, metadata) = metadataState.withLock { ($0.method, $0.metadata) }
            stream.write(CallMetadata.headersFrame(method: method, metadata: metadata), completion: nil)
        }
        let adapter = Adapter(call: self)
        self.adapter = adapter
        onLoop {
            if self.ended, let status = self.status {
                // Ended before it started: the channel holds a call from before its start,
                // so a cancel or a terminate (another call's connection broke, the network
                // changed) can reach it first. Its handler still hears why, once. The
                // adapter never reaches the connection, which would let go of it at the
                // close: let go of it here (it holds the call).
                self.adapter = nil
                self.eventLoop.execute { handler.call(self, didCloseWith: status) }
                return
            }
            self.handler = handler
            self.stream.setHandler(adapter)
            self.started = true
            self.updateReading()
        }
    }

    /// Server: starts reading; the handler is made by `makeHandler` once the client's
    /// headers arrived (``method`` and ``metadata`` are set then), or its first frame
    /// without them, or when the call ended before either. Call once.
    func start(makeHandler: @escaping @Sendable (Call) -> any CallHandler) {
        precondition(role == .server, "start(makeHandler:) is for server calls (a bug in CallServer)")
        let adapter = Adapter(call: self)
        self.adapter = adapter
        onLoop {
            self.makeHandler = makeHandler
            self.stream.setHandler(adapter)
            self.started = true
            self.updateReading()
        }
    }

    // MARK: metadata

    /// The method the client named (`""` for none). On a server, set before its handler
    /// is made.
    public var method: String { metadataState.withLock { $0.method } }

    /// The client's request metadata. On a server, set before its handler is made.
    public var metadata: CallMetadata { metadataState.withLock { $0.metadata } }

    /// The server's response metadata: on a client, what arrived (empty until then, and
    /// for a server that sent none), set before the first message or the status is
    /// handed to the handler; on a server, what it sent.
    public var responseMetadata: CallMetadata { metadataState.withLock { $0.response } }

    /// The server's trailing metadata: on a client, what arrived with the status, set
    /// before `didClose`; on a server, what ``setTrailingMetadata(_:)`` set.
    public var trailingMetadata: CallMetadata { metadataState.withLock { $0.trailing } }

    /// Server: sends response metadata (a headers frame). Call it at most once and
    /// before the first ``send(_:)``: the client ends a call whose response metadata
    /// comes after a message with `internal`, reason `protocol violation`. `completion`
    /// runs once it is in the kernel, or with the error that stopped it
    /// (`failedPrecondition`, reason `misuse`, for a second call).
    public func sendResponseMetadata(_ metadata: CallMetadata, completion: WriteCompletion? = nil) {
        precondition(role == .server, "sendResponseMetadata(_:) is for server calls; a client gives its metadata to startCall (a programming error)")
        onLoop {
            guard !self.ended, !self.sentEnd else {
                completion?(self.endedError(sending: true))
                return
            }
            let first = self.metadataState.withLock { state in
                defer { state.responseSent = true }
                if !state.responseSent { state.response = metadata }
                return !state.responseSent
            }
            guard first else {
                completion?(TransportError(code: .failedPrecondition, reason: .misuse, message: "the call's response metadata was already sent"))
                return
            }
            self.stream.write(CallMetadata.headersFrame(method: "", metadata: metadata)) { error in
                completion?(self.failure(error))
                if let error { self.end(CallStatus(error: error), closeConnection: true) }
            }
        }
    }

    /// Server: the trailing metadata ``finish(_:completion:)`` sends with the status (a
    /// trailers frame right before it; none when empty). Replaces what was set before;
    /// set after the status went out, it is not sent.
    public func setTrailingMetadata(_ metadata: CallMetadata) {
        precondition(role == .server, "setTrailingMetadata(_:) is for server calls (a programming error)")
        metadataState.withLock { $0.trailing = metadata }
    }

    /// Bytes received and not yet delivered: at most about one message plus one read.
    public var bufferedBytes: Int {
        eventLoop.inEventLoop ? decoder.bufferedBytes + input.count : bufferedSnapshot.load(ordering: .relaxed)
    }

    // MARK: sending

    /// Sends a message. With flow control on, ``CallHandler/callDidWriteData(_:)``
    /// follows once it is in the kernel.
    public func send(_ message: [UInt8]) {
        send(message, completion: nil)
    }

    /// Sends a message; `completion` runs on the loop once it is in the kernel, or with
    /// the error that stopped it. (The async face uses this.)
    public func send(_ message: [UInt8], completion: WriteCompletion?) {
        // On the loop (the usual case: a handler answering) the message goes straight out.
        // Off it, it joins the batch the loop sends in one write (OffLoopSendBatching.swift).
        guard eventLoop.inEventLoop else {
            if offLoopSends.enqueue(.init(message: message, completion: completion)) {
                eventLoop.execute { self.sendOffLoopBatch() }
            }
            return
        }
        guard !ended, !sentEnd else {
            completion?(endedError(sending: true))
            return
        }
        let reports = flow.reportsWrites
        if let completion {
            write(message: message) { error in
                completion(self.failure(error))
                self.writeDidComplete(error, reports: reports)
            }
        } else if reports {
            let report: WriteCompletion
            if let made = writeReport {
                report = made
            } else {
                report = { error in self.writeDidComplete(error, reports: true) }
                writeReport = report
            }
            if dispatching {
                // Inside a handler callback of the dispatch loop: when the kernel takes
                // the frame at once, that loop reports it after the handler returns.
                let sentNow = Frame.withHeader(.message, count: message.count) { header in
                    stream.writeNowOrQueue(header: header, payload: message, completion: report)
                }
                if sentNow { owedWriteReports += 1 }
            } else {
                write(message: message, completion: report)
            }
        } else {
            // Prefix and message gathered into one send: the message is not copied.
            _ = Frame.withHeader(.message, count: message.count) { header in
                stream.writeNowOrQueue(header: header, payload: message, completion: nil)
            }
        }
    }

    /// Writes `message` behind its prefix without joining them first (the call's stream
    /// hands a large message to HTTP/2 as it is); `completion` runs as a write's does, on
    /// a later turn when the connection wrote it all at once.
    private func write(message: [UInt8], completion: @escaping WriteCompletion) {
        let sentNow = Frame.withHeader(.message, count: message.count) { header in
            stream.writeNowOrQueue(header: header, payload: message, completion: completion)
        }
        if sentNow { eventLoop.execute { completion(nil) } }
    }

    /// On the loop: sends every message queued off the loop, in order, as one write of
    /// the HTTP/2 connection (each still with its own completion and report).
    private func sendOffLoopBatch() {
        h2?.holdWrites()
        offLoopSends.drain { item in send(item.message, completion: item.completion) }
        h2?.releaseWrites()
    }

    /// A sent message is in the kernel (`error` nil), or could not be sent. The report
    /// goes through the dispatch loop like one owed inline, so a handler that asks for
    /// the next message from `didWriteData` gets it after returning, not inside its call.
    private func writeDidComplete(_ error: TransportError?, reports: Bool) {
        if let error {
            // Cut short by the reset after the server's status: the call reads on to the
            // status (EarlyServerStatus.swift).
            guard receivedServerStatus == nil else { return }
            end(CallStatus(error: error), closeConnection: true)
        } else if reports, !ended {
            owedWriteReports += 1
            deliver()
        }
    }

    /// Client: no more messages will be sent (a TCP half-close after queued messages).
    /// `completion` runs once the half-close is in the kernel, or without an error when
    /// the call ends with status OK first (the server answered).
    public func finishSending(completion: WriteCompletion? = nil) {
        precondition(role == .client, "finishSending() is for client calls; a server ends with finish(_:) (a programming error)")
        onLoop {
            guard !self.ended, !self.sentEnd else {
                completion?(self.endedError(sending: true))
                return
            }
            self.sentEnd = true
            guard let completion else {
                self.stream.shutdownOutput(completion: nil)
                return
            }
            self.stream.shutdownOutput { error in completion(self.halfCloseFailure(error)) }
        }
    }

    /// What a half-close's completion reports. The server's status can arrive before the
    /// half-close completes: over TLS the server reads the close_notify record, and
    /// answers, before the FIN is out, and libuv reports its shutdown a loop turn later.
    /// The call then closes its connection, which cuts the half-close short (`cancelled`,
    /// `closed`). A call that ended with status OK was answered: its half-close did its
    /// work, so it completes without an error.
    private func halfCloseFailure(_ error: TransportError?) -> TransportError? {
        // The stream was closed (or reset, on HTTP/2) once the status was in.
        if let error, error.code == .cancelled, error.reason == .closed || error.reason == .reset, status?.isOK == true { return nil }
        // Or reset by the server after its OK status, before the call read it (EarlyServerStatus.swift).
        if let error, error.reason == .closed || error.reason == .reset, status == nil, receivedServerStatus?.status.isOK == true { return nil }
        return failure(error)
    }

    /// Server: ends the call with `status` (a trailer frame, then a half-close). The
    /// handler's `didClose` runs with `status` once it is in the kernel.
    public func finish(_ status: CallStatus = .ok, completion: WriteCompletion? = nil) {
        precondition(role == .server, "finish(_:) is for server calls; a client ends with finishSending() (a programming error)")
        onLoop {
            guard !self.ended, !self.sentEnd else {
                completion?(self.endedError(sending: true))
                return
            }
            self.sentEnd = true
            let trailing = self.metadataState.withLock { $0.trailing }
            var frames = trailing.isEmpty ? [] : CallMetadata.trailersFrame(trailing)
            frames += Frame.encode(.status, payload: status.encoded)
            self.stream.write(frames) { error in
                completion?(self.failure(error))
                self.end(error.map { CallStatus(error: $0) } ?? status, closeConnection: error != nil)
            }
            self.stream.shutdownOutput(completion: nil)
        }
    }

    // MARK: receiving

    /// Asks for one more message (flow control on); requests stack.
    public func receiveNextMessage() { receiveNextMessages(1) }

    /// Asks for `count` more messages (flow control on); requests stack.
    public func receiveNextMessages(_ count: Int) {
        precondition(count >= 0, "receiveNextMessages was given \(count): it needs a count >= 0 (a programming error)")
        guard eventLoop.inEventLoop else {
            eventLoop.execute { self.receiveNextMessages(count) }
            return
        }
        guard !ended else { return }
        flow.request(count)
        deliver()
    }

    /// Ends the call now with `cancelled` and resets its stream (RST_STREAM CANCEL: the
    /// peer's call ends `cancelled`, reason `reset`); the connection and its other calls
    /// go on. A client whose server's status already arrived, unread, ends with that
    /// status instead: the server's answer is final (EarlyServerStatus.swift).
    public func cancel() {
        onLoop {
            guard !self.ended else { return }
            if let received = self.receivedServerStatus {
                self.metadataState.withLock { $0.trailing = received.trailing }
                self.end(received.status, closeConnection: false, deferHandler: true)
                self.stream.reset()
                return
            }
            let error = TransportError(code: .cancelled, reason: .callCancelled, message: "the call was cancelled")
            self.end(CallStatus(error: error), closeConnection: false, deferHandler: true)
            self.stream.reset()
        }
    }

    /// Ends the call now with `error` and resets its stream (the channel uses this when
    /// the network under it changed, before it closes the connection).
    func terminate(with error: TransportError) {
        onLoop {
            guard !self.ended else { return }
            self.end(CallStatus(error: error), closeConnection: false, deferHandler: true)
            self.stream.reset()
        }
    }

    /// Server: the call's deadline passed (ServerDeadline.swift). Ends the call now with
    /// `error`, as a client's cancel ends it (the handler hears `didClose` with it), and
    /// ends its stream with the status sent to the client (`CallStreamConnection.expire(status:)`).
    func expire(with error: TransportError) {
        onLoop {
            guard !self.ended else { return }
            let status = CallStatus(error: error)
            self.end(status, closeConnection: false, deferHandler: true)
            if let stream = self.stream as? CallStreamConnection {
                stream.expire(status: status)
            } else {
                self.stream.reset()
            }
        }
    }

    // MARK: the engine

    private func onLoop(_ work: @escaping @Sendable () -> Void) {
        if eventLoop.inEventLoop { work() } else { eventLoop.execute(work) }
    }

    /// The error a write's completion reports: once the call has ended with an error (a
    /// cancel, the network changed), that error, which says why, rather than the
    /// connection's local close that stopped the write.
    private func failure(_ error: TransportError?) -> TransportError? {
        guard let error else { return nil }
        if let status { return status.error ?? error }
        return earlyStatusFailure ?? error
    }

    private func endedError(sending: Bool) -> TransportError {
        if let error = status?.error { return error }
        if status != nil {
            return TransportError(code: .failedPrecondition, reason: .callEnded, message: "the call has ended")
        }
        return TransportError(code: .failedPrecondition, reason: .outputShutdown, message: "this end of the call has finished sending")
    }

    fileprivate func didRead(_ bytes: UnsafeRawBufferPointer) {
        // After the status (draining, or ended) incoming bytes are discarded.
        guard !ended else { return }
        guard decoder.isEmpty, !dispatching else {
            didReadBehindBuffered(bytes)
            return
        }
        borrow(bytes)
    }

    /// Hands over frames straight from `bytes` (nothing is buffered), then keeps the rest.
    @inline(__always)
    private func borrow(_ bytes: UnsafeRawBufferPointer) {
        input = bytes
        deliver()
        if !input.isEmpty {
            stashInput()
            bufferedSnapshot.store(decoder.bufferedBytes, ordering: .relaxed)
        }
    }

    /// A read that arrives with bytes already in the decoder, or while the dispatch loop
    /// runs. A large frame's payload being assembled takes the bytes it lacks straight
    /// from the read (each payload byte is copied once); once it is whole it is handed
    /// over, and the rest of the read is borrowed as usual, so the next frame's payload
    /// also goes straight from the read into its own array. Anything else goes through
    /// the decoder.
    @inline(never)
    private func didReadBehindBuffered(_ bytes: UnsafeRawBufferPointer) {
        let taken = dispatching ? 0 : decoder.appendPayload(bytes)
        guard taken > 0, taken < bytes.count else {
            if taken == 0 { decoder.append(bytes) }
            deliver()
            return
        }
        deliver()
        guard !ended else { return }
        let rest = UnsafeRawBufferPointer(rebasing: bytes[taken...])
        if decoder.isEmpty {
            borrow(rest)
        } else {
            // The whole frame waits (nothing asked for it): the rest waits behind it.
            decoder.append(rest)
            bufferedSnapshot.store(decoder.bufferedBytes, ordering: .relaxed)
        }
    }

    /// Moves the unread rest of a borrowed read into the decoder.
    private func stashInput() {
        if !ended { decoder.append(input) }
        input = UnsafeRawBufferPointer(start: nil, count: 0)
    }

    /// What waits next: in the borrowed read, else in the decoder.
    private var pendingFrame: FrameDecoder.Pending {
        @inline(__always) get {
            input.isEmpty
                ? decoder.pending
                : FrameDecoder.pending(
                    in: input, maximumMessageSize: decoder.maximumMessageSize, maximumMetadataSize: decoder.maximumMetadataSize)
        }
    }

    /// Takes the whole frame ``pendingFrame`` found.
    @inline(__always)
    private func takePayload() -> [UInt8] {
        if input.isEmpty { return decoder.takePayload() }
        let (payload, size) = FrameDecoder.payload(in: input)
        input = UnsafeRawBufferPointer(rebasing: input[size...])
        return payload
    }

    fileprivate func didReadEnd() {
        peerEnded = true
        if draining {
            stream.close()
            return
        }
        deliver()
    }

    fileprivate func connectionDidClose(error: TransportError?) {
        adapter = nil
        guard !ended else { return }
        let failure = error ?? TransportError(code: .cancelled, reason: .closed, message: "the call's connection was closed")
        endedByBrokenConnection = failure.code == .unavailable
        end(CallStatus(error: failure), closeConnection: false)
    }

    /// Hands over every frame the policy allows (and reports the writes that went out
    /// while handing them over), then decides whether to read.
    ///
    /// Called while it already runs (the handler asked for more from inside one of its
    /// callbacks), it returns at once: the running loop looks again after each callback.
    private func deliver() {
        guard !dispatching else { return }
        dispatching = true
        defer { dispatching = false }
        var pending = pendingFrame
        delivering: while !ended {
            if owedWriteReports > 0 {
                owedWriteReports -= 1
                handler?.callDidWriteData(self)
                pending = pendingFrame
                continue
            }
            switch pending {
            case .none:
                guard peerEnded else { break delivering }
                stashInput()
                do {
                    try decoder.finish()
                } catch {
                    end(CallStatus(error: error), closeConnection: true)
                    return
                }
                if role == .client {
                    endedByBrokenConnection = true
                    end(CallStatus(error: TransportError(
                        code: .unavailable, reason: .closed,
                        message: "the connection ended before the call's status arrived")), closeConnection: true)
                    return
                }
                if peerEndReported { break delivering }
                peerEndReported = true
                makeHandlerIfNeeded()
                handler?.callDidReceiveEnd(self)
            case .message:
                if _slowPath(peerPhase != .open) {
                    guard messageMayFollow() else { return }
                }
                guard flow.mayDeliver else { break delivering }
                let payload = takePayload()
                flow.didDeliver(bytes: payload.count)
                handler?.call(self, didReceive: payload)
            case .status:
                let payload = takePayload()
                guard role == .client else {
                    protocolViolation("a client sent a status frame")
                    return
                }
                do {
                    end(try CallStatus(decoding: payload), closeConnection: true)
                } catch {
                    end(CallStatus(error: error), closeConnection: true)
                }
                return
            case .headers:
                guard didReceiveHeaders(takePayload()) else { return }
            case .trailers:
                guard didReceiveTrailers(takePayload()) else { return }
            case .invalid:
                stashInput()
                do {
                    _ = try decoder.next()
                    // Unreachable by input: `.invalid` means next() throws for these very bytes.
                    preconditionFailure("the frame decoder accepted a frame it had called invalid (a bug in FrameDecoder)")
                } catch {
                    end(CallStatus(error: error), closeConnection: true)
                }
                return
            }
            // The handler may have asked for more, sent, or ended the call.
            pending = pendingFrame
        }
        guard !ended else { return }
        updateReading(hasFrame: pending != .none)
    }

    /// A message is next while the peer's phase is not `.open`: the first message
    /// without headers (a server then serves the call with no method and empty
    /// metadata), or one after the server's trailers. Returns whether it may be delivered.
    @inline(never)
    private func messageMayFollow() -> Bool {
        switch peerPhase {
        case .open:
            return true
        case .awaitingHeaders:
            peerPhase = .open
            makeHandlerIfNeeded()
            return !ended
        case .trailersReceived:
            protocolViolation("the server sent a message after its trailers")
            return false
        }
    }

    /// A headers frame: the client's method and metadata (server), or the server's
    /// response metadata (client). Returns whether the call goes on.
    @inline(never)
    private func didReceiveHeaders(_ payload: [UInt8]) -> Bool {
        guard peerPhase == .awaitingHeaders else {
            protocolViolation(
                role == .server
                    ? "the client sent a headers frame after its first frame"
                    : "the server sent a headers frame after \(peerPhase == .open ? "a message or its headers" : "its trailers")")
            return false
        }
        let decoded: (method: String, metadata: CallMetadata)
        do {
            decoded = try CallMetadata.decodeHeaders(payload)
        } catch {
            end(CallStatus(error: error), closeConnection: true)
            return false
        }
        peerPhase = .open
        if role == .server {
            metadataState.withLock { state in
                state.method = decoded.method
                state.metadata = decoded.metadata
            }
            makeHandlerIfNeeded()
        } else {
            metadataState.withLock { $0.response = decoded.metadata }
        }
        return !ended
    }

    /// A trailers frame: the server's trailing metadata, before its status. Returns
    /// whether the call goes on.
    @inline(never)
    private func didReceiveTrailers(_ payload: [UInt8]) -> Bool {
        guard role == .client else {
            protocolViolation("a client sent a trailers frame")
            return false
        }
        guard peerPhase != .trailersReceived else {
            protocolViolation("the server sent a second trailers frame")
            return false
        }
        do {
            let trailing = try CallMetadata.decodeTrailers(payload)
            metadataState.withLock { $0.trailing = trailing }
        } catch {
            end(CallStatus(error: error), closeConnection: true)
            return false
        }
        peerPhase = .trailersReceived
        return true
    }

    /// Server: makes the handler, once (see ``start(makeHandler:)``). A handler whose
    /// making ended the call (it cancelled it) hears `didClose` at once.
    private func makeHandlerIfNeeded() {
        guard let make = makeHandler else { return }
        makeHandler = nil
        let made = make(self)
        if ended, let status {
            eventLoop.execute { made.call(self, didCloseWith: status) }
        } else {
            handler = made
        }
    }

    private func protocolViolation(_ what: String) {
        end(CallStatus(error: TransportError(code: .internal, reason: .protocolViolation, message: what)), closeConnection: true)
    }

    private func updateReading() {
        updateReading(hasFrame: pendingFrame != .none)
    }

    private func updateReading(hasFrame: Bool) {
        bufferedSnapshot.store(decoder.bufferedBytes + input.count, ordering: .relaxed)
        guard started else { return }
        let want: Bool
        if draining {
            want = !peerEnded
        } else {
            // Read ahead to one whole frame even when nothing is asked for, so the
            // status, the peer's end or a reset is seen; stop once a frame waits.
            want = !ended && !peerEnded && !hasFrame
        }
        guard want != reading else { return }
        reading = want
        if want { stream.startReading() } else { stream.stopReading() }
    }

    /// Ends the call once with `status`.
    private func end(_ status: CallStatus, closeConnection: Bool, deferHandler: Bool = false) {
        guard !ended else { return }
        ended = true
        self.status = status
        writeReport = nil
        decoder = FrameDecoder(maximumMessageSize: options.maximumMessageSize, maximumMetadataSize: options.maximumMetadataSize)
        input = UnsafeRawBufferPointer(start: nil, count: 0)
        if closeConnection {
            stream.close()
        } else if role == .server, sentEnd, status.isOK {
            // The status is out: wait for the client's end, then close.
            draining = true
            if peerEnded { stream.close() }
        }
        updateReading()
        // A server call that ended before its first frame still gets its handler, which
        // hears only this end (its server learns the call is over through it).
        if let make = makeHandler {
            makeHandler = nil
            self.handler = make(self)
        }
        let handler = self.handler
        self.handler = nil
        if deferHandler {
            eventLoop.execute { handler?.call(self, didCloseWith: status) }
        } else {
            handler?.call(self, didCloseWith: status)
        }
    }

    /// The connection's handler: forwards to the call (which it keeps alive while the
    /// connection lives). `@unchecked Sendable`: the connection calls it only on the
    /// call's loop.
    private final class Adapter: ConnectionHandler, @unchecked Sendable {
        let call: Call
        init(call: Call) { self.call = call }
        func connectionDidRead(_ bytes: UnsafeRawBufferPointer) { call.didRead(bytes) }
        func connectionDidReadEnd() { call.didReadEnd() }
        func connectionDidClose(error: TransportError?) { call.connectionDidClose(error: error) }
    }
}

extension TransportError.Reason {
    /// The call was cancelled by the application.
    public static let callCancelled = TransportError.Reason("call cancelled")
    /// An operation on a call that has already ended.
    public static let callEnded = TransportError.Reason("call ended")
}
