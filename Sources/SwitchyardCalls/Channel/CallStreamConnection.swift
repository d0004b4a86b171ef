import Switchyard
import SwitchyardHPACK
import SwitchyardHTTP2

/// One call's HTTP/2 stream, seen by the call engine as a `Connection` of its own.
///
/// ``Call`` speaks Switchyard's frames (``Frame``): a headers frame, messages, trailers
/// and a status, over a connection it owns. On gRPC's wire the call is one stream of a
/// channel's shared HTTP/2 connection: its metadata and status are HTTP/2 HEADERS, and
/// its messages are DATA in gRPC's length-prefixed format, which is the layout of
/// Switchyard's message frame (flag 0, a 32-bit big-endian length). This type translates
/// at that seam, so the engine, with its flow control and its contracts, runs unchanged:
///
/// - **Out.** Each write the call makes holds whole frames. A headers frame opens the
///   stream (client: gRPC's request headers, its method as the `:path`) or becomes the
///   response headers (server); message frames go out as DATA as they are (a server's
///   first message is preceded by response headers if it sent none; with an outbound
///   encoding, each message is compressed on the way, or goes as it is if that would
///   not make it smaller); trailers and the
///   status become the trailers, or a trailers-only response, with END_STREAM. A
///   half-close is END_STREAM; a close or a reset is RST_STREAM (`NO_ERROR` once this
///   side ended, else `CANCEL`).
/// - **In.** Request or response headers become a headers frame, DATA passes through
///   (its messages' flags checked: on a stream whose `grpc-encoding` is `identity` or
///   absent a compressed message ends the call with `internal`); on a gzip stream the
///   messages are inflated (``GRPCMessageDeframer``, bounded by the call's maximum
///   message size) and passed on as plain message frames; trailers become a trailers
///   frame and a status frame; all in arrival order, in one byte queue the call reads.
/// - **Flow control.** The stream's window is given back only for bytes the call read:
///   while the call does not read (its flow control asks for nothing), the peer can send
///   at most one window more. That is behaviour 5 of the design on HTTP/2.
///
/// Safety of `@unchecked Sendable`: the mutable state is confined to the HTTP/2
/// connection's loop; the methods a call may use off the loop hop there first.
final class CallStreamConnection: Connection, H2StreamDelegate, @unchecked Sendable {
    let h2: H2Connection
    let role: Call.Role
    /// Client: the request's HEADERS (the channel made and checked them).
    let requestFields: [HPACKField]
    /// Client: the channel's connection, which opens the stream (at once, or when the
    /// server's stream limit lets it).
    private let owner: ChannelConnection?
    /// Client: the request's fields while the stream waits to open, and the writes and
    /// half-close the call made meanwhile, in order.
    private var waitingFields: [HPACKField]?
    private var deferred: [() -> Void] = []
    /// The stream, once open (a client's opens with its headers frame); nil again once a
    /// retry let go of it (TransparentRetry.swift).
    var stream: H2StreamID?
    /// Client: the call's writes kept for a transparent retry, then the retry
    /// (TransparentRetry.swift); nil once the call can no longer be retried.
    var retryState: StreamRetry?

    private var handler: (any ConnectionHandler)?
    var reading = false
    /// What the call has not read yet, in Switchyard's frames.
    var inbound: [UInt8] = []
    /// DATA octets in `inbound` (padding included): given back as window once read.
    private var unreadFlowControlled = 0
    /// Where inbound DATA is in gRPC's messages: octets of the current message's
    /// prefix seen (0 to 4, the flag first), and of its body still to come.
    private var prefixSeen = 0
    private var prefixLength = 0
    private var bodyLeft = 0
    /// The peer ended its side: reported once `inbound` is read.
    var peerEnded = false
    /// Client: the server's status and trailing metadata, from the moment they arrived
    /// (in `inbound` until the call reads them; EarlyServerStatus.swift).
    private(set) var receivedStatus: (status: CallStatus, trailing: CallMetadata)?
    private var readEndReported = false
    /// The stream ended under the call (`nil` error: closed locally); reported at once.
    var ending: TransportError??
    private var closeReported = false
    /// This side ended its half (END_STREAM sent or queued).
    private var sentEnd = false
    /// Server: whether response headers went out (else the status is trailers-only).
    private var sentHeaders = false
    /// Client: whether response headers arrived (else an ending block is trailers-only).
    var receivedHeaders = false
    /// The encoding of what this side sends (client: the request's `grpc-encoding`;
    /// server: the response's) and its compressor; nil for `identity`, the path that
    /// costs nothing.
    let outboundEncoding: GRPCEncoding
    private let compressor: GRPCGzipCompressor?
    /// The encoding of what the peer sends (server: the request's `grpc-encoding`;
    /// client: the response's, once its headers came) and, once DATA came on a stream
    /// that is not `identity`, the deframer that inflates it.
    private var inboundEncoding: GRPCEncoding {
        didSet { inboundEncoded = inboundEncoding != .identity }
    }
    /// Whether ``inboundEncoding`` is not `identity` (a flag, so DATA on the plain path
    /// costs no comparison of names).
    private var inboundEncoded: Bool
    private var deframer: GRPCMessageDeframer?
    /// The largest message the call accepts, inflated (the call's
    /// ``CallConfiguration/maximumMessageSize``): a gzip message that inflates past it
    /// ends the call before it is inflated further.
    var maximumMessageSize = Frame.defaultMaximumMessageSize
    /// Server: trailing metadata from a trailers frame, sent with the status.
    private var pendingTrailers = CallMetadata()
    private var deliverScheduled = false
    /// Client: the channel's connection heard that the stream ended.
    private var released = false

    var backendName: String { h2.connection.backendName }
    var eventLoop: any TransportEventLoop { h2.eventLoop }
    var localAddress: Endpoint { h2.connection.localAddress }
    var remoteAddress: Endpoint { h2.connection.remoteAddress }

    /// Client: a stream to be opened with `requestFields` when the call writes its
    /// headers frame, its messages sent in `requestEncoding` (the `grpc-encoding` of
    /// `requestFields`); with `retry`, the call is retried transparently if the server
    /// refuses it unprocessed (TransparentRetry.swift).
    init(
        client owner: ChannelConnection, requestFields: [HPACKField], requestEncoding: GRPCEncoding = .identity,
        maximumMessageSize: Int = Frame.defaultMaximumMessageSize, retry: TransparentRetry? = nil
    ) {
        self.h2 = owner.h2
        self.owner = owner
        self.role = .client
        self.requestFields = requestFields
        self.outboundEncoding = requestEncoding
        self.compressor = requestEncoding == .gzip ? GRPCGzipCompressor() : nil
        self.inboundEncoding = .identity
        self.inboundEncoded = false
        self.maximumMessageSize = maximumMessageSize
        self.retryState = retry.map(StreamRetry.init(shared:))
        self.deadline = nil
    }

    /// Server: the call's deadline, when the request carried `grpc-timeout`
    /// (ServerDeadline.swift).
    let deadline: CallDeadline?

    /// Server: the stream `stream` a client opened with a request for `method` carrying
    /// `metadata`, with `deadline` if the request had one, its messages in
    /// `requestEncoding`; the responses go in `responseEncoding`.
    init(
        server h2: H2Connection, stream: H2StreamID, method: String, metadata: CallMetadata, endStream: Bool,
        deadline: CallDeadline? = nil, requestEncoding: GRPCEncoding = .identity, responseEncoding: GRPCEncoding = .identity
    ) {
        self.h2 = h2
        self.deadline = deadline
        self.role = .server
        self.requestFields = []
        self.owner = nil
        self.stream = stream
        self.outboundEncoding = responseEncoding
        self.compressor = responseEncoding == .gzip ? GRPCGzipCompressor() : nil
        self.inboundEncoding = requestEncoding
        self.inboundEncoded = requestEncoding != .identity
        h2.setDelegate(self, for: stream)
        inbound += CallMetadata.headersFrame(method: method, metadata: metadata)
        peerEnded = endStream
    }

    // MARK: the method and the path

    /// The `:path` of a call to `method`: the method itself when it is gRPC's
    /// `/service/method`, else `/` and the method.
    static func path(forMethod method: String) -> String {
        GRPCRequestHead.split(path: method) != nil ? method : "/" + method
    }

    /// The method a server's call sees for `path`: the inverse of ``path(forMethod:)``.
    static func method(forPath path: String) -> String {
        GRPCRequestHead.split(path: path) != nil ? path : String(path.dropFirst())
    }

    // MARK: Connection

    func setHandler(_ handler: any ConnectionHandler) {
        onLoop {
            self.handler = handler
            if self.ending != nil { self.reportClose() }
        }
    }

    func startReading() {
        onLoop {
            self.reading = true
            self.scheduleDelivery()
            self.retryState?.relayTarget?.startReading()
        }
    }

    func stopReading() {
        onLoop {
            self.reading = false
            self.retryState?.relayTarget?.stopReading()
        }
    }

    func write(_ bytes: [UInt8], completion: WriteCompletion?) {
        onLoop {
            var completion = completion
            if self.retryState == nil {
                completion = self.notInline(completion)
            } else if self.retryTakes(bytes, &completion) {
                return
            }
            self.insideCall = true
            self.send(frames: bytes, completion: completion)
            self.insideCall = false
        }
    }

    /// Whether a call into this connection runs: a completion never runs inside it
    /// (the `Connection` contract: at the end of the turn at the earliest).
    var insideCall = false

    /// `completion`, deferred to a later turn when it would run inside the call that
    /// gave it.
    func notInline(_ completion: WriteCompletion?) -> WriteCompletion? {
        guard let completion else { return nil }
        return { error in
            if self.insideCall {
                self.eventLoop.execute { completion(error) }
            } else {
                completion(error)
            }
        }
    }

    /// A message from this size up goes to HTTP/2 behind its prefix without the two being
    /// joined: its DATA frames are slices of it, so its bytes are copied once in user
    /// space (into the connection's write buffer) rather than three times. Below it, one
    /// copy into a joined array costs less than the prefix's own allocation and a frame
    /// that gathers the two.
    static let unjoinedMessageSize = 16 * 1024

    /// `header` is a message's prefix (the call's message frame and gRPC's agree).
    func writeNowOrQueue(header: UnsafeRawBufferPointer, payload: [UInt8], completion: WriteCompletion?) -> Bool {
        if payload.count >= Self.unjoinedMessageSize, eventLoop.inEventLoop, retryState == nil, compressor == nil,
            waitingFields == nil, ending == nil, let stream
        {
            insideCall = true
            send(stream, prefix: Array(header), message: payload, completion: notInline(completion))
            insideCall = false
            return false
        }
        var joined = [UInt8]()
        joined.reserveCapacity(header.count + payload.count)
        joined.append(contentsOf: header)
        joined.append(contentsOf: payload)
        write(joined, completion: completion)
        return false
    }

    func write(borrowing bytes: UnsafeRawBufferPointer, completion: WriteCompletion?) {
        write(Array(bytes), completion: completion)
    }

    var pendingWriteBytes: Int {
        guard eventLoop.inEventLoop, let stream, ending == nil else { return 0 }
        return h2.queuedBytes(stream)
    }

    func shutdownOutput(completion: WriteCompletion?) {
        onLoop {
            var completion = completion
            if self.retryState == nil {
                completion = self.notInline(completion)
            } else if self.retryTakes(nil, &completion) {
                return
            }
            self.insideCall = true
            self.halfClose(completion: completion)
            self.insideCall = false
        }
    }

    private func halfClose(completion: WriteCompletion?) {
        if waitingFields != nil {
            deferred.append { self.halfClose(completion: completion) }
            return
        }
        guard let stream, ending == nil else {
            completion?(closedError)
            return
        }
        if sentEnd {
            // A server's status already ended its half (trailers carry END_STREAM).
            completion?(nil)
            return
        }
        sentEnd = true
        do {
            try h2.sendData(stream, [], endStream: true, completion: completion)
        } catch {
            completion?(failure(error))
        }
    }

    func close() {
        onLoop {
            self.retryState?.relayTarget?.close()
            self.end(code: self.sentEnd ? .noError : .cancel)
        }
    }

    func reset() {
        onLoop {
            self.retryState?.relayTarget?.reset()
            self.end(code: .cancel)
        }
    }

    /// Server: the call's deadline passed (ServerDeadline.swift). The status goes out as
    /// trailers (trailers-only if no headers went out), then RST_STREAM NO_ERROR if the
    /// client's half is still open (an early response, as after any status). Only if this
    /// side already ended, or data still waits for window (a reset drops what is queued,
    /// and the status could only follow it), is the stream reset with CANCEL instead. The
    /// call hears its stream closed.
    func expire(status: CallStatus) {
        onLoop {
            guard self.ending == nil else { return }
            guard let stream = self.stream, !self.sentEnd, self.h2.queuedBytes(stream) == 0 else {
                self.end(code: .cancel)
                return
            }
            self.sentEnd = true
            let fields = self.sentHeaders
                ? ((try? GRPCResponse.trailersFields(status: status)) ?? [])
                : GRPCResponse.trailersOnlyFields(status: status)
            try? self.h2.sendHeaders(stream, fields, endStream: true)
            // Once both halves ended the stream is gone, and the reset sends nothing.
            self.end(code: .noError)
        }
    }

    /// Server: refuses the stream before any handler saw it (RST_STREAM REFUSED_STREAM):
    /// the client's call ends `unavailable`, reason `stream refused`, which says nothing
    /// was processed and a retry is safe.
    func refuse() {
        onLoop { self.end(code: .refusedStream) }
    }

    // MARK: out

    private func onLoop(_ work: @escaping @Sendable () -> Void) {
        if eventLoop.inEventLoop { work() } else { eventLoop.execute(work) }
    }

    private var closedError: TransportError {
        (ending ?? nil) ?? TransportError(code: .cancelled, reason: .closed, message: "the call's stream was closed")
    }

    private func failure(_ error: H2StreamError) -> TransportError {
        TransportError(code: .unavailable, reason: .closed, message: "the call's HTTP/2 stream: \(error)")
    }

    /// A large message, its prefix apart (``writeNowOrQueue(header:payload:completion:)``).
    private func send(_ stream: H2StreamID, prefix: [UInt8], message: [UInt8], completion: WriteCompletion?) {
        do {
            if role == .server && !sentHeaders { try sendResponseHeaders(stream, CallMetadata()) }
            try h2.sendData(stream, prefix: prefix, message, completion: completion)
        } catch {
            completion?(failure(error))
        }
    }

    /// Sends the frames of one write of the call's engine.
    private func send(frames bytes: [UInt8], completion: WriteCompletion?) {
        if waitingFields != nil {
            deferred.append { self.send(frames: bytes, completion: completion) }
            return
        }
        guard ending == nil else {
            completion?(closedError)
            return
        }
        var index = 0
        var messages: [UInt8] = []
        var status: CallStatus?
        while index + Frame.headerSize <= bytes.count {
            let kind = Frame.Kind(flags: bytes[index])!
            var length = 0
            for offset in 1...4 { length = length << 8 | Int(bytes[index + offset]) }
            let end = index + Frame.headerSize + length
            precondition(end <= bytes.count, "a call wrote part of a frame (a bug in Call)")
            let payload = bytes[(index + Frame.headerSize)..<end]
            switch kind {
            case .message:
                if let compressor {
                    appendCompressed(payload, or: bytes[index..<end], to: &messages, compressor)
                } else if messages.isEmpty && index == 0 && end == bytes.count {
                    messages = bytes
                } else {
                    messages += bytes[index..<end]
                }
            case .headers:
                guard sendHeadersFrame(Array(payload), completion: completion) else { return }
                if waitingFields != nil {
                    let rest = Array(bytes[end...])
                    deferred.append { self.send(frames: rest, completion: completion) }
                    return
                }
            case .trailers:
                pendingTrailers = (try? CallMetadata.decodeTrailers(Array(payload))) ?? CallMetadata()
            case .status:
                status = try? CallStatus(decoding: Array(payload))
            default:
                preconditionFailure("a call wrote a frame of kind \(kind) (a bug in Call)")
            }
            index = end
        }
        guard let stream else {
            completion?(closedError)
            return
        }
        do {
            if !messages.isEmpty {
                if role == .server && !sentHeaders { try sendResponseHeaders(stream, CallMetadata()) }
                try h2.sendData(stream, messages, endStream: false, completion: status == nil ? completion : nil)
            }
            if let status {
                try sendStatus(stream, status, completion: completion)
            } else if messages.isEmpty {
                completion?(nil)
            }
        } catch {
            completion?(failure(error))
        }
    }

    /// Appends the message `payload` compressed with its prefix (flag 1), or `framed`
    /// (the message as it came, flag 0) when compression would not make it smaller:
    /// gRPC lets each message of a compressed stream say whether it is compressed.
    private func appendCompressed(
        _ payload: ArraySlice<UInt8>, or framed: ArraySlice<UInt8>, to messages: inout [UInt8], _ compressor: GRPCGzipCompressor
    ) {
        let compressed = payload.withUnsafeBytes { GRPCMessageFramer.frame($0, compressingWith: compressor) }
        if compressed.count < framed.count {
            messages += compressed
        } else {
            messages += framed
        }
    }

    /// A headers frame: the client's opens the stream (with the fields the channel made
    /// from the same method and metadata), the server's is its response headers.
    /// Returns whether the write goes on.
    private func sendHeadersFrame(_ payload: [UInt8], completion: WriteCompletion?) -> Bool {
        if role == .server {
            guard let decoded = try? CallMetadata.decodeHeaders(payload) else {
                preconditionFailure("a call wrote a headers frame it cannot read back (a bug in Call)")
            }
            guard let stream else { return false }
            do {
                try sendResponseHeaders(stream, decoded.metadata)
            } catch {
                completion?(failure(error))
                return false
            }
            return true
        }
        let fields = requestFields
        guard let owner, owner.mayOpenNow else {
            // Above the server's stream limit: the stream opens when one ends (the
            // channel's connection calls openWaitingStream), and the call's writes wait.
            waitingFields = fields
            if let refusal = owner?.wait(self) {
                waitingFields = nil
                completion?(refusal)
                streamEnded(refusal)
                return false
            }
            // This write's messages wait too.
            return true
        }
        return openStream(fields, completion: completion)
    }

    /// Client: opens the stream with the request's `fields`; false (the call ended) if
    /// the connection cannot.
    private func openStream(_ fields: [HPACKField], completion: WriteCompletion?) -> Bool {
        do {
            stream = try h2.openStream(headers: fields, endStream: false, delegate: self)
            owner?.streamOpened()
            return true
        } catch {
            let refusal = TransportError(code: .unavailable, reason: .closed, message: "no HTTP/2 stream for the call: \(error)")
            completion?(refusal)
            streamEnded(refusal)
            return false
        }
    }

    /// Client: the stream may open now (the channel's connection had it wait), or never
    /// (`refusal`): the writes the call made meanwhile follow, or fail.
    func openWaitingStream(refusal: TransportError?, retryable: Bool = false) {
        guard let fields = waitingFields else { return }
        waitingFields = nil
        if let refusal {
            // Never sent: a retry replays every write it kept, so the deferred ones go.
            if retryable, retryState != nil, retryAfterRefusal() {
                deferred = []
                return
            }
            streamEnded(refusal)
        } else if ending == nil {
            _ = openStream(fields, completion: nil)
        }
        let writes = deferred
        deferred = []
        for write in writes { write() }
    }

    private func sendResponseHeaders(_ stream: H2StreamID, _ metadata: CallMetadata) throws(H2StreamError) {
        sentHeaders = true
        // Compressing: say so, and what this side reads.
        let accepted = compressor == nil ? [] : GRPCEncoding.supported
        let fields = (try? GRPCResponse.headersFields(encoding: outboundEncoding, acceptEncodings: accepted, metadata: metadata))
            ?? (try? GRPCResponse.headersFields(encoding: outboundEncoding, acceptEncodings: accepted, metadata: CallMetadata()))
            ?? GRPCResponse.trailersOnlyFields(status: .ok).prefix(2).map { $0 }
        try h2.sendHeaders(stream, fields, endStream: false)
    }

    /// Server: the status, as trailers (or a trailers-only response when no headers went
    /// out), ending this side. `completion` runs once the trailers are in the kernel:
    /// they follow the stream's data, so while data waits for the peer's window an empty
    /// DATA write queued behind it reports them (it rides on the frame with the last of
    /// that data, and the trailers go out in the same write; HEADERS carry no
    /// completion). Run earlier, it would let the call close the stream, and the reset
    /// would drop the data and the trailers still queued.
    private func sendStatus(_ stream: H2StreamID, _ status: CallStatus, completion: WriteCompletion?) throws(H2StreamError) {
        sentEnd = true
        let trailers = pendingTrailers
        let fields: [HPACKField]
        if sentHeaders {
            fields = (try? GRPCResponse.trailersFields(status: status, metadata: trailers)) ?? ((try? GRPCResponse.trailersFields(status: status)) ?? [])
        } else {
            fields = (try? GRPCResponse.trailersOnlyFields(status: status, metadata: trailers)) ?? GRPCResponse.trailersOnlyFields(status: status)
        }
        guard h2.queuedBytes(stream) > 0 else {
            try h2.sendHeaders(stream, fields, endStream: true)
            completion?(nil)
            closeEarly(stream)
            return
        }
        try h2.sendData(stream, [], endStream: false) { error in
            completion?(error)
            if error == nil { self.closeEarly(stream) }
        }
        try h2.sendHeaders(stream, fields, endStream: true)
    }

    /// Server, once its trailers are out: early server closure if the client's half is
    /// still open. RST_STREAM NO_ERROR tells it to stop sending (gRPC's PROTOCOL-HTTP2),
    /// and what it sent is not read.
    private func closeEarly(_ stream: H2StreamID) {
        guard !peerEnded, ending == nil else { return }
        h2.resetStream(stream, code: .noError)
        // The reset ends the stream for HTTP/2, which says nothing more of it: the call
        // hears its stream closed (after its own end, which is queued before this), and
        // lets go of it and of what the client sent unread.
        peerEnded = true
        ending = .some(nil)
        inbound.removeAll()
        reportClose()
    }

    /// Ends the stream from this side (close or reset): RST_STREAM unless both halves
    /// already ended, then the call hears its connection closed.
    private func end(code: H2ErrorCode) {
        guard ending == nil else { return }
        if retryState != nil { endRetry(TransportError(code: .cancelled, reason: .closed, message: "the call's stream was closed")) }
        if let stream { h2.resetStream(stream, code: code) }
        ending = .some(nil)
        inbound.removeAll()
        failDeferred()
        reportClose()
        releaseStream()
    }

    /// Tells the channel's connection, once, that this call's stream is over.
    func releaseStream() {
        guard stream != nil, !released else { return }
        released = true
        owner?.streamEnded()
    }

    /// The stream will never open: the writes that waited for it fail.
    private func failDeferred() {
        guard waitingFields != nil else { return }
        waitingFields = nil
        let writes = deferred
        deferred = []
        for write in writes { write() }
    }

    // MARK: in

    func h2Stream(_ stream: H2StreamID, didReceiveHeaders fields: [HPACKField], endStream: Bool) {
        guard role == .client, ending == nil, !peerEnded else { return }
        // The server answered: the call is never retried.
        if retryState != nil { releaseRetry() }
        if endStream {
            var (status, trailing) = receivedHeaders ? GRPCResponse.readTrailers(fields) : GRPCResponse.readTrailersOnly(fields)
            if let deframer, deframer.bufferedBytes > 0 {
                // The stream ended inside a gzip message.
                do throws(TransportError) { try deframer.finish() } catch { (status, trailing) = (CallStatus(error: error), CallMetadata()) }
            }
            deliverStatus(status, trailing)
            return
        }
        guard !receivedHeaders else {
            deliverStatus(protocolViolation("the server sent a second header block that does not end the stream"), CallMetadata())
            h2.resetStream(stream, code: .protocolError)
            return
        }
        // Any encoding this side reads, whatever it listed in grpc-accept-encoding.
        switch GRPCResponse.readHeaders(fields, acceptedEncodings: GRPCEncoding.supported) {
        case .informational:
            return
        case .head(let head):
            receivedHeaders = true
            inboundEncoding = head.encoding
            inbound += CallMetadata.headersFrame(method: "", metadata: head.metadata)
            scheduleDelivery()
        case .ended(let status, let metadata):
            deliverStatus(status, metadata)
            h2.resetStream(stream, code: .cancel)
        }
    }

    /// Client: the call's status (and trailing metadata) is what the call reads last.
    private func deliverStatus(_ status: CallStatus, _ trailing: CallMetadata) {
        receivedStatus = (status, trailing)
        if !trailing.isEmpty { inbound += CallMetadata.trailersFrame(trailing) }
        inbound += Frame.encode(.status, payload: status.encoded)
        peerEnded = true
        scheduleDelivery()
    }

    private func protocolViolation(_ message: String) -> CallStatus {
        CallStatus(error: TransportError(code: .internal, reason: .protocolViolation, message: message))
    }

    func h2Stream(_ stream: H2StreamID, didReceiveData bytes: [UInt8], endStream: Bool, flowControlledLength: Int) {
        guard ending == nil, !peerEnded || role == .server else {
            h2.consumed(stream, bytes: flowControlledLength)
            return
        }
        if retryState != nil { releaseRetry() }
        if role == .client && !receivedHeaders {
            h2.consumed(stream, bytes: flowControlledLength)
            deliverStatus(protocolViolation("the server sent a message before its response headers"), CallMetadata())
            h2.resetStream(stream, code: .protocolError)
            return
        }
        if inboundEncoded {
            receiveEncoded(stream, bytes, endStream: endStream, flowControlledLength: flowControlledLength)
            return
        }
        if let problem = checkMessageFlags(bytes) {
            h2.consumed(stream, bytes: flowControlledLength)
            refuse(stream, problem)
            return
        }
        inbound += bytes
        unreadFlowControlled += flowControlledLength
        if endStream { peerEnded = true }
        scheduleDelivery()
    }

    /// DATA on a stream whose encoding is not `identity`: its whole messages, inflated,
    /// become message frames for the call. The octets of a message not yet whole are
    /// held by the deframer, not the call, so their window is given back at once when
    /// the call has nothing else to read (else it would wait for a read that a
    /// message larger than the window never lets come); what the deframer holds is
    /// bounded by the maximum message size.
    private func receiveEncoded(_ stream: H2StreamID, _ bytes: [UInt8], endStream: Bool, flowControlledLength: Int) {
        if deframer == nil {
            deframer = GRPCMessageDeframer(maximumMessageSize: maximumMessageSize, decompressor: GRPCGzipDecompressor())
        }
        deframer!.append(bytes)
        do throws(TransportError) {
            while let message = try deframer!.next() {
                inbound += Frame.encode(.message, payload: message)
            }
            if endStream { try deframer!.finish() }
        } catch {
            h2.consumed(stream, bytes: flowControlledLength)
            refuse(stream, error)
            return
        }
        if inbound.isEmpty {
            h2.consumed(stream, bytes: unreadFlowControlled + flowControlledLength)
            unreadFlowControlled = 0
        } else {
            unreadFlowControlled += flowControlledLength
        }
        if endStream { peerEnded = true }
        scheduleDelivery()
    }

    /// Walks `bytes` through gRPC's message prefixes: the reason the stream cannot be
    /// read (a compressed message, or a flag gRPC does not define), or nil.
    private func checkMessageFlags(_ bytes: [UInt8]) -> String? {
        var index = 0
        while index < bytes.count {
            if bodyLeft > 0 {
                let take = min(bodyLeft, bytes.count - index)
                bodyLeft -= take
                index += take
                continue
            }
            let byte = bytes[index]
            index += 1
            if prefixSeen == 0 {
                switch byte {
                case 0: break
                case 1: return "the peer sent a compressed message on a stream whose grpc-encoding is identity (or absent)"
                default: return "the peer sent a message with flags \(byte), which gRPC does not define"
                }
                prefixLength = 0
            } else {
                prefixLength = prefixLength << 8 | Int(byte)
            }
            prefixSeen += 1
            if prefixSeen == Frame.headerSize {
                prefixSeen = 0
                bodyLeft = prefixLength
            }
        }
        return nil
    }

    /// Ends the call at once with `internal`: the peer sent what it cannot read.
    private func refuse(_ stream: H2StreamID, _ message: String) {
        refuse(stream, TransportError(code: .internal, reason: .protocolViolation, message: message))
    }

    /// Ends the call at once with `error`: the peer sent what it cannot read.
    private func refuse(_ stream: H2StreamID, _ error: TransportError) {
        if role == .client {
            inbound.removeAll()
            deliverStatus(CallStatus(error: error), CallMetadata())
            h2.resetStream(stream, code: .cancel)
        } else {
            try? h2.sendHeaders(stream, GRPCResponse.trailersOnlyFields(status: CallStatus(error: error)), endStream: true)
            h2.resetStream(stream, code: .noError)
            streamEnded(error)
        }
    }

    func h2StreamWindowOpened(_ stream: H2StreamID) {
        // The engine learns of sent bytes through write completions; nothing to do.
    }

    func h2Stream(_ stream: H2StreamID, didEndWith ending: H2StreamEnding) {
        defer { releaseStream() }
        switch ending {
        case .closed:
            // Both halves ended: what is queued is still read, then the end.
            peerEnded = true
            scheduleDelivery()
        case .reset(let code, let processed):
            if role == .client && peerEnded {
                // The status is in: a reset after it changes nothing.
                return
            }
            // Unprocessed: the call may start again on another stream (TransparentRetry.swift).
            if !processed, retryState != nil, retryAfterRefusal() { return }
            var error = CallStatus(resetWithHTTP2ErrorCode: code.rawValue).error
                ?? TransportError(code: .internal, reason: .reset, message: "the stream was reset (\(code))")
            if !processed, error.reason != .streamRefused {
                error = TransportError(
                    code: .unavailable, reason: .streamRefused,
                    message: "the server did not process the call's stream (\(code))", native: error.native)
            }
            streamEnded(error)
        case .connectionEnded(let error):
            if role == .client && peerEnded { return }
            streamEnded(error)
        }
    }

    func streamEnded(_ error: TransportError) {
        guard self.ending == nil else { return }
        if retryState != nil { endRetry(error) }
        self.ending = .some(error)
        inbound.removeAll()
        failDeferred()
        reportClose()
    }

    func scheduleDelivery() {
        guard reading, !inbound.isEmpty || (peerEnded && !readEndReported), !deliverScheduled else { return }
        deliverScheduled = true
        // What the call answers to this delivery gathers with the rest of the read that
        // brought it, and leaves in one write once the last delivery of it ran.
        h2.holdWrites()
        eventLoop.execute {
            self.deliverScheduled = false
            self.deliver()
            self.h2.releaseWrites()
        }
    }

    /// Hands what waits to the call while it reads: the bytes, then the peer's end.
    private func deliver() {
        guard reading, let handler, ending == nil else { return }
        if !inbound.isEmpty {
            let bytes = inbound
            inbound.removeAll(keepingCapacity: true)
            if unreadFlowControlled > 0, let stream {
                h2.consumed(stream, bytes: unreadFlowControlled)
                unreadFlowControlled = 0
            }
            bytes.withUnsafeBytes { handler.connectionDidRead($0) }
        }
        if peerEnded, !readEndReported, reading, ending == nil, inbound.isEmpty {
            readEndReported = true
            handler.connectionDidReadEnd()
        }
    }

    private func reportClose() {
        guard !closeReported, let ending, let handler else { return }
        closeReported = true
        self.handler = nil
        eventLoop.execute { handler.connectionDidClose(error: ending) }
    }
}
