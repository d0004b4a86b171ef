package import Switchyard
package import SwitchyardHPACK

/// What happens to one stream of an ``H2Connection``, on the connection's loop.
package protocol H2StreamDelegate: AnyObject {
    /// Response headers, trailers, or (server) nothing: a server's request headers come
    /// through ``H2ConnectionDelegate/h2Connection(_:didOpen:headers:endStream:)``.
    func h2Stream(_ stream: H2StreamID, didReceiveHeaders fields: [HPACKField], endStream: Bool)
    /// DATA, `flowControlledLength` of which must be given back with
    /// ``H2Connection/consumed(_:bytes:)`` once the reader took it.
    func h2Stream(_ stream: H2StreamID, didReceiveData bytes: [UInt8], endStream: Bool, flowControlledLength: Int)
    /// Queued data can move again.
    func h2StreamWindowOpened(_ stream: H2StreamID)
    /// The stream ended: closed both ways (`error` nil), reset by either side (the code,
    /// and whether the peer can have processed it), or its connection ended.
    func h2Stream(_ stream: H2StreamID, didEndWith ending: H2StreamEnding)
}

/// How a stream ended.
package enum H2StreamEnding: Sendable, Hashable {
    /// Both sides ended it normally.
    case closed
    /// Reset, with the code of the RST_STREAM: by the peer, or by this side because the
    /// peer broke a rule of the stream (a stream error). `processed` false: the peer cannot
    /// have processed it (refused, or above a GOAWAY's last stream), so a client may send
    /// it again elsewhere.
    case reset(H2ErrorCode, processed: Bool)
    /// The connection ended under it (`error` from the transport, or a protocol error).
    case connectionEnded(TransportError)
}

/// What happens to the connection as a whole, on its loop.
package protocol H2ConnectionDelegate: AnyObject {
    /// Server: a client opened a stream. Set its delegate with ``H2Connection/setDelegate(_:for:)``
    /// before returning, or reset it.
    func h2Connection(_ connection: H2Connection, didOpen stream: H2StreamID, headers: [HPACKField], endStream: Bool)
    func h2Connection(_ connection: H2Connection, didReceiveGoAway lastStreamID: H2StreamID, code: H2ErrorCode, debugData: [UInt8])
    func h2Connection(_ connection: H2Connection, didReceivePing payload: UInt64)
    func h2Connection(_ connection: H2Connection, didAcknowledgePing payload: UInt64)
    /// The peer's settings changed (its stream limit, say): waiting streams may start.
    func h2ConnectionSettingsChanged(_ connection: H2Connection, settings: H2Settings)
    /// The connection ended: `nil` for a close after draining, else why.
    func h2Connection(_ connection: H2Connection, didCloseWith error: TransportError?)
}

/// HTTP/2 over one Switchyard `Connection`: the frame decoder and encoder around an
/// ``H2ConnectionStateMachine``, driven by the connection's reads and writes.
///
/// Everything runs on the connection's loop; methods must be called there (the calls
/// module hops first). Bytes read are decoded into frames and fed to the state machine;
/// what it has to send is encoded into one buffer and written borrowed (the backend
/// copies only what the kernel does not take at once).
///
/// Write coalescing: while writes are held (``holdWrites()``), frames are encoded into
/// that buffer and not written; the release of the last hold writes them all in one
/// write. Handling a read holds writes until it is done, and the calls module holds
/// them from the moment it schedules a delivery of what was read until that delivery
/// ran (later in the same loop turn), so the answers to everything one read brought (a
/// unary call's HEADERS, DATA and trailers, the echoes of pipelined messages, their
/// WINDOW_UPDATEs) leave in one write. Nothing waits for a timer or a later turn: with
/// no hold, a frame is written at once, as is everything once the connection is
/// closing. Write completions (``sendData(_:_:endStream:completion:)``) still run only
/// once the write that carries their last byte is in the kernel.
///
/// Backpressure: while more than ``writeHighWater`` bytes wait in the connection's write
/// queue (the peer is not reading), the connection stops reading, so a peer cannot make
/// this side queue acknowledgements (PING, SETTINGS) without bound; reading resumes once
/// the queue drains.
///
/// Safety of `@unchecked Sendable`: all mutable state is confined to the connection's
/// loop.
package final class H2Connection: @unchecked Sendable {
    package let connection: any Connection
    package let role: H2Role
    package var eventLoop: any TransportEventLoop { connection.eventLoop }
    /// Above this many bytes waiting in the connection's write queue, reading stops.
    package let writeHighWater: Int

    private var machine: H2ConnectionStateMachine
    private var decoder: H2FrameDecoder
    private var events: [H2Event] = []
    private var outbound: [H2Outbound] = []
    private var writeBuffer: [UInt8] = []
    /// The completions of data encoded into `writeBuffer` and not yet written.
    private var gatheredCompletions: [WriteCompletion] = []
    /// Holds on writing (``holdWrites()``): while above zero, frames gather in
    /// `writeBuffer`.
    private var writeHolds = 0
    private var streams: [H2StreamID: any H2StreamDelegate] = [:]
    private var delegate: (any H2ConnectionDelegate)?
    /// The completions of data not yet written, by token, with their stream: a stream
    /// reset before its data went out fails them (the state machine drops that data).
    private var completions: [H2WriteToken: (stream: H2StreamID, completion: WriteCompletion)] = [:]
    private var nextToken: UInt64 = 0
    private var reading = false
    /// Whether ``dispatchEvents()`` is running: a delegate that calls back into the
    /// driver (and so adds events) is served by the running loop, never by a nested one.
    private var dispatching = false
    private var blockedOnWrites = false
    private var closing = false
    /// Why the connection is closing, when it is not a graceful drain (a protocol error,
    /// an abort): what the delegate hears once it is closed.
    private var closingError: TransportError?
    private var closed = false
    private var adapter: Adapter?
    /// The peer's GOAWAY when it carried an error (`ENHANCE_YOUR_CALM` and
    /// `too_many_pings`, say): said again when the peer then closes the connection.
    private var peerGoAwayError: String?

    /// When bytes were last read from the peer (at start: when the connection was made).
    /// Keepalive reads it when its timer fires, so a read costs no timer work.
    package private(set) var lastReadAt: ContinuousClock.Instant
    /// HEADERS and DATA frames written so far: a server's keepalive enforcement forgives a
    /// client's pings once it sent either since (gRPC's ping strikes).
    package private(set) var headersOrDataFramesSent: UInt64 = 0
    /// Since when no stream has been open (nil while one is): a server's maximum idle
    /// time counts from it.
    package private(set) var idleSince: ContinuousClock.Instant?
    /// The connection's loop's clock (the system's, or a simulated network's).
    package let clock: any TransportClock

    package init(connection: any Connection, role: H2Role, configuration: H2Configuration, writeHighWater: Int = 1 << 20) {
        self.connection = connection
        self.role = role
        let clock = connection.eventLoop.clock
        self.clock = clock
        lastReadAt = clock.now
        idleSince = lastReadAt
        self.writeHighWater = writeHighWater
        self.machine = H2ConnectionStateMachine(role: role, configuration: configuration)
        self.decoder = H2FrameDecoder(
            role: role == .client ? .client : .server, maxFrameSize: configuration.maxFrameSize, expectsServerPreface: role == .client)
    }

    /// Starts the connection: the client's preface, both sides' SETTINGS, and reading.
    package func start(delegate: any H2ConnectionDelegate) {
        precondition(eventLoop.inEventLoop, "H2Connection.start must run on the connection's loop (a bug in its caller)")
        self.delegate = delegate
        let adapter = Adapter(self)
        self.adapter = adapter
        connection.setHandler(adapter)
        if role == .client {
            writeBuffer.append(contentsOf: h2ConnectionPreface)
        }
        // Writes the preface and SETTINGS, and starts reading.
        flush()
    }

    // MARK: streams

    /// Streams open now (both directions).
    package var openStreamCount: Int { machine.openStreamCount }

    /// Whether a new stream may open now (client): below the peer's stream limit, not
    /// going away.
    package var canOpenStream: Bool { !closing && !closed && machine.canOpenStream }

    /// Client: opens a stream with `headers`; its events go to `delegate`.
    package func openStream(headers: [HPACKField], endStream: Bool, delegate: any H2StreamDelegate) throws(H2StreamError) -> H2StreamID {
        let id = try machine.openStream(headers: headers, endStream: endStream)
        streams[id] = delegate
        flush()
        return id
    }

    /// Server: the delegate of a stream the client opened.
    package func setDelegate(_ delegate: any H2StreamDelegate, for stream: H2StreamID) {
        streams[stream] = delegate
    }

    package func sendHeaders(_ stream: H2StreamID, _ fields: [HPACKField], endStream: Bool) throws(H2StreamError) {
        try machine.sendHeaders(stream, fields, endStream: endStream)
        flush()
    }

    /// Sends `bytes` on `stream`; `completion` runs once the last of them is in the
    /// kernel (they may first wait for flow-control window), or with the error that
    /// stopped them.
    package func sendData(_ stream: H2StreamID, _ bytes: [UInt8], endStream: Bool, completion: WriteCompletion?) throws(H2StreamError) {
        var token: H2WriteToken?
        if let completion {
            nextToken &+= 1
            let made = H2WriteToken(nextToken)
            completions[made] = (stream, completion)
            token = made
        }
        do {
            try machine.sendData(stream, bytes, endStream: endStream, token: token)
        } catch {
            if let token { completions[token] = nil }
            throw error
        }
        flush()
    }

    /// Queues `prefix`, then `bytes`, as one write of `stream` (gRPC's message prefix and
    /// a large message): neither is copied into the other, and the DATA frames of `bytes`
    /// share its storage (`H2Frame.data`).
    /// `completion` runs once both are written, as for ``sendData(_:_:endStream:completion:)``.
    package func sendData(_ stream: H2StreamID, prefix: [UInt8], _ bytes: [UInt8], completion: WriteCompletion?) throws(H2StreamError) {
        try machine.sendData(stream, prefix, endStream: false, token: nil)
        try sendData(stream, bytes, endStream: false, completion: completion)
    }

    package func endStream(_ stream: H2StreamID) throws(H2StreamError) {
        try machine.endStream(stream)
        flush()
    }

    /// Resets `stream` (RST_STREAM `code`): its delegate hears nothing more, and data of
    /// it not yet written completes with `cancelled`.
    package func resetStream(_ stream: H2StreamID, code: H2ErrorCode) {
        machine.resetStream(stream, code: code)
        streams[stream] = nil
        failCompletions(of: stream, TransportError(code: .cancelled, reason: .reset, message: "the stream was reset (\(code))"))
        flush()
    }

    /// Fails the completions of `stream`'s data that will never be written.
    private func failCompletions(of stream: H2StreamID, _ error: TransportError) {
        guard !completions.isEmpty else { return }
        let dropped = completions.filter { $0.value.stream == stream }
        for (token, entry) in dropped {
            completions[token] = nil
            entry.completion(error)
        }
    }

    /// The reader took `bytes` of `stream`'s flow-controlled data: window may be granted.
    package func consumed(_ stream: H2StreamID, bytes: Int) {
        machine.consumed(stream, bytes: bytes)
        flush()
    }

    /// Bytes accepted for `stream` and not yet in frames (waiting for window).
    package func queuedBytes(_ stream: H2StreamID) -> Int { machine.queuedBytes(stream) }

    // MARK: the connection

    package func sendPing(_ payload: UInt64) {
        machine.sendPing(payload)
        flush()
    }

    /// GOAWAY, gracefully: streams open go on, new ones are refused; the connection
    /// closes once none is left.
    package func beginGracefulShutdown() {
        machine.beginGracefulShutdown(now: clock.now)
        flush()
    }

    /// GOAWAY with `code` and `message`, then close once it is written.
    package func abort(_ code: H2ErrorCode, message: String) {
        guard !closed else { return }
        machine.abort(code, message: message)
        closing = true
        closingError = TransportError(code: .unavailable, reason: .closed, message: "the HTTP/2 connection was aborted (\(code)): \(message)")
        flush()
    }

    // MARK: coalescing

    /// Holds writing: frames gather until every hold is released
    /// (``releaseWrites()``), then leave in one write. For work that will run later in
    /// this loop turn and send frames (the delivery of what a read brought); a hold must
    /// be released in the same turn. On the loop.
    package func holdWrites() {
        writeHolds += 1
    }

    /// Releases a hold of ``holdWrites()``; the last one writes what gathered.
    package func releaseWrites() {
        precondition(writeHolds > 0, "H2Connection.releaseWrites without a hold (a bug in its caller)")
        writeHolds -= 1
        guard writeHolds == 0, !closed else { return }
        writeGathered()
        updateReading()
    }

    /// Closes the connection now; every open stream ends with `error` (nil: closed
    /// locally, `cancelled`/`closed`), and the delegate hears `error`.
    package func close(with error: TransportError?) {
        guard !closed else { return }
        // What gathered goes first, as it would have without coalescing.
        if !writeBuffer.isEmpty { writeGathered(closeAfter: false) }
        connection.close()
        didClose(error)
    }

    // MARK: the engine

    fileprivate func didRead(_ bytes: UnsafeRawBufferPointer) {
        guard !closed, !closing else { return }
        // What the frames of this read make this side send leaves in one write, at the
        // end (or once the deliveries it scheduled ran).
        writeHolds += 1
        decoder.append(bytes)
        let now = clock.now
        lastReadAt = now
        while !closing {
            let frame: H2Frame
            do {
                guard let next = try decoder.nextFrame() else { break }
                frame = next
            } catch {
                if let stream = error.stream {
                    // A stream error: that stream ends, the others go on.
                    machine.resetStream(stream, code: error.code)
                    let ended = TransportError(code: .internal, reason: .protocolViolation, message: "HTTP/2: \(error)")
                    failCompletions(of: stream, ended)
                    streams.removeValue(forKey: stream)?.h2Stream(stream, didEndWith: .reset(error.code, processed: true))
                    continue
                }
                machine.abort(error.code, message: error.message)
                closing = true
                closingError = TransportError(code: error.peerIsNotHTTP2 ? .unavailable : .internal, reason: .protocolViolation, message: "HTTP/2: \(error)")
                endStreams(closingError!)
                break
            }
            machine.receive(frame, now: now, into: &events)
            dispatchEvents()
        }
        flush()
        releaseWrites()
    }

    private func dispatchEvents() {
        guard !dispatching else { return }
        dispatching = true
        defer { dispatching = false }
        var index = 0
        while index < events.count {
            let event = events[index]
            index += 1
            switch event {
            case .streamOpened(let id, let headers, let endStream):
                delegate?.h2Connection(self, didOpen: id, headers: headers, endStream: endStream)
                if streams[id] == nil {
                    machine.resetStream(id, code: .refusedStream)
                }
            case .headers(let id, let fields, let endStream):
                streams[id]?.h2Stream(id, didReceiveHeaders: fields, endStream: endStream)
            case .data(let id, let bytes, let endStream, let length):
                if let stream = streams[id] {
                    stream.h2Stream(id, didReceiveData: bytes, endStream: endStream, flowControlledLength: length)
                } else {
                    machine.consumed(id, bytes: length)
                }
            case .streamReset(let id, let code, let processed):
                failCompletions(of: id, TransportError(code: .unavailable, reason: .reset, message: "the stream was reset (\(code))"))
                if let stream = streams.removeValue(forKey: id) {
                    stream.h2Stream(id, didEndWith: .reset(code, processed: processed))
                }
            case .streamClosed(let id):
                streams.removeValue(forKey: id)?.h2Stream(id, didEndWith: .closed)
            case .windowOpened(let id):
                if id.isConnection {
                    for (id, stream) in streams { stream.h2StreamWindowOpened(id) }
                } else {
                    streams[id]?.h2StreamWindowOpened(id)
                }
            case .pingAcknowledged(let payload):
                delegate?.h2Connection(self, didAcknowledgePing: payload)
            case .pingReceived(let payload):
                delegate?.h2Connection(self, didReceivePing: payload)
            case .goAwayReceived(let last, let code, let debug):
                if code != .noError {
                    let text = String(decoding: debug.prefix(128), as: UTF8.self)
                    peerGoAwayError = debug.isEmpty ? "\(code)" : "\(code), \"\(text)\""
                }
                delegate?.h2Connection(self, didReceiveGoAway: last, code: code, debugData: debug)
            case .remoteSettingsChanged(let settings):
                delegate?.h2ConnectionSettingsChanged(self, settings: settings)
            case .drained:
                closing = true
            case .connectionError(let violation):
                closing = true
                closingError = TransportError(code: .internal, reason: .protocolViolation, message: "HTTP/2: \(violation)")
                endStreams(closingError!)
            }
        }
        events.removeAll(keepingCapacity: true)
    }

    /// Encodes what the state machine has to send into the write buffer and writes it,
    /// unless writes are held (``holdWrites()``) and the connection is not closing.
    private func flush() {
        guard !closed else { return }
        if !blockedOnWrites {
            machine.takeOutbound(into: &outbound)
        }
        // Events no frame brought in: a stream closed by our END_STREAM going out, the
        // end of a graceful drain.
        machine.takeEvents(into: &events)
        for item in outbound {
            switch item.frame {
            case .headers, .data: headersOrDataFramesSent &+= 1
            default: break
            }
            H2FrameEncoder.encode(item.frame, into: &writeBuffer)
            for token in item.writeTokens {
                if let entry = completions.removeValue(forKey: token) { gatheredCompletions.append(entry.completion) }
            }
        }
        outbound.removeAll(keepingCapacity: true)
        if machine.openStreamCount == 0 {
            if idleSince == nil { idleSince = clock.now }
        } else {
            idleSince = nil
        }
        if writeHolds == 0 || closing {
            writeGathered()
            if closed { return }
        }
        updateReading()
        if !events.isEmpty && !dispatching {
            dispatchEvents()
            // What the delegates did in answer.
            if !closed { flush() }
        }
    }

    /// Writes the gathered frames as one borrowed write, their completions run once it
    /// is in the kernel; with `closeAfter` (the connection is closing), closes the
    /// connection after it, or at once when nothing gathered.
    private func writeGathered(closeAfter: Bool? = nil) {
        guard !closed else { return }
        let closeAfter = closeAfter ?? closing
        if !writeBuffer.isEmpty {
            let completion: WriteCompletion?
            if gatheredCompletions.isEmpty && !closeAfter {
                completion = nil
            } else {
                let done = gatheredCompletions
                gatheredCompletions = []
                completion = { error in
                    for report in done { report(error) }
                    if closeAfter { self.close(with: error ?? self.closingError) }
                }
            }
            writeBuffer.withUnsafeBytes { connection.write(borrowing: $0, completion: completion) }
            writeBuffer.removeAll(keepingCapacity: true)
        } else if closeAfter {
            close(with: closingError)
        }
    }

    private func updateReading() {
        guard !closed else { return }
        let overWater = connection.pendingWriteBytes > writeHighWater
        blockedOnWrites = overWater
        let want = !closing && !overWater
        guard want != reading else { return }
        reading = want
        if want { connection.startReading() } else { connection.stopReading() }
    }

    fileprivate func didDrainWrites() {
        blockedOnWrites = false
        flush()
    }

    fileprivate func didReadEnd() {
        let after = peerGoAwayError.map { " after GOAWAY \($0)" } ?? ""
        close(with: TransportError(code: .unavailable, reason: .closed, message: "the peer closed the HTTP/2 connection\(after)"))
    }

    fileprivate func didClose(_ error: TransportError?) {
        guard !closed else { return }
        closed = true
        let why = error ?? TransportError(code: .cancelled, reason: .closed, message: "the HTTP/2 connection was closed")
        endStreams(why)
        for (_, entry) in completions { entry.completion(why) }
        completions.removeAll()
        // Encoded but never written (the connection closed while writes were held).
        let gathered = gatheredCompletions
        gatheredCompletions = []
        for completion in gathered { completion(why) }
        adapter = nil
        let delegate = self.delegate
        self.delegate = nil
        delegate?.h2Connection(self, didCloseWith: error)
    }

    private func endStreams(_ error: TransportError) {
        let ending = streams
        streams.removeAll()
        for (id, stream) in ending { stream.h2Stream(id, didEndWith: .connectionEnded(error)) }
    }

    /// The connection's handler; holds the driver while the connection lives.
    private final class Adapter: ConnectionHandler, @unchecked Sendable {
        let driver: H2Connection
        init(_ driver: H2Connection) { self.driver = driver }
        func connectionDidRead(_ bytes: UnsafeRawBufferPointer) { driver.didRead(bytes) }
        func connectionDidReadEnd() { driver.didReadEnd() }
        func connectionDidDrainWrites() { driver.didDrainWrites() }
        func connectionDidClose(error: TransportError?) { driver.didClose(error) }
    }
}
