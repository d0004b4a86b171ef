package import SwitchyardHPACK

/// The upper layer's side: opening streams, headers, data behind the send windows, resets,
/// and the outbound frames in wire order.
extension H2ConnectionStateMachine {
    /// Client: opens a stream with the request `headers` (HEADERS, and CONTINUATIONs past
    /// the peer's SETTINGS_MAX_FRAME_SIZE, queued at once).
    ///
    /// - Throws: ``H2StreamError`` with ``H2StreamError/Code/notAllowed`` (a server),
    ///   ``H2StreamError/Code/connectionClosed``, ``H2StreamError/Code/goingAway``,
    ///   ``H2StreamError/Code/streamIDsExhausted``,
    ///   ``H2StreamError/Code/streamLimitReached`` (see ``canOpenStream``), or
    ///   ``H2StreamError/Code/headerListTooLarge`` (the peer's
    ///   SETTINGS_MAX_HEADER_LIST_SIZE); then nothing changed.
    package mutating func openStream(headers: [HPACKField], endStream: Bool) throws(H2StreamError) -> H2StreamID {
        guard role == .client else { throw H2StreamError(.notAllowed, "a server does not open streams") }
        try checkOpen()
        guard !isGoingAway else { throw H2StreamError(.goingAway, "the connection is going away") }
        guard nextLocalStreamID <= H2StreamID.maximum.rawValue else {
            throw H2StreamError(.streamIDsExhausted, "no stream identifier is left on this connection")
        }
        if let limit = remoteSettings.maxConcurrentStreams, localStreamCount >= Int(limit) {
            throw H2StreamError(.streamLimitReached, "\(localStreamCount) streams open, the peer allows \(limit)")
        }
        try checkHeaderListSize(headers)
        let id = H2StreamID(nextLocalStreamID)
        nextLocalStreamID += 2
        var stream = H2StreamState(
            id: id, sendWindow: Int(remoteSettings.initialWindowSize), receiveWindow: Int(localSettings.initialWindowSize),
            headersSent: true)
        stream.isHeadRequest = headers.contains { $0.name == Self.methodName && $0.value == Self.headMethod }
        stream.localEnded = endStream
        stream.localEndQueued = endStream
        appendHeaderFrames(id, headers, endStream: endStream)
        streams[id] = stream
        localStreamCount += 1
        return id
    }

    /// Sends headers on an open stream: a server's response headers (the first call on a
    /// stream), or trailers (`endStream` must be true), which wait behind the stream's
    /// queued data. `endStream` true ends this side of the stream.
    ///
    /// - Throws: ``H2StreamError`` with ``H2StreamError/Code/unknownStream``,
    ///   ``H2StreamError/Code/streamEnded``, ``H2StreamError/Code/notAllowed`` (trailers
    ///   without `endStream`), ``H2StreamError/Code/headerListTooLarge`` or
    ///   ``H2StreamError/Code/connectionClosed``; then nothing changed.
    package mutating func sendHeaders(_ id: H2StreamID, _ fields: [HPACKField], endStream: Bool) throws(H2StreamError) {
        let index = try sendableStream(id)
        try checkHeaderListSize(fields)
        if streams.values[index].headersSent {
            guard endStream else { throw H2StreamError(.notAllowed, "trailers on \(id) must end the stream") }
            streams.values[index].localEndQueued = true
            if streams.values[index].hasQueuedData {
                streams.values[index].queuedTrailers = fields
                return
            }
        } else {
            streams.values[index].headersSent = true
            streams.values[index].localEndQueued = endStream
        }
        appendHeaderFrames(id, fields, endStream: endStream)
        if endStream { commitLocalEnd(id) }
    }

    /// Queues `bytes` on the stream, sent in DATA frames of at most the peer's
    /// SETTINGS_MAX_FRAME_SIZE as the stream and connection send windows allow (streams
    /// with queued data take turns, a frame each). `token` comes back with the outbound
    /// frame that carries the last of these bytes. `endStream` true ends this side of the
    /// stream after them (trailers are then not possible: send them with
    /// ``sendHeaders(_:_:endStream:)`` instead).
    ///
    /// - Throws: ``H2StreamError`` with ``H2StreamError/Code/unknownStream``,
    ///   ``H2StreamError/Code/streamEnded``, ``H2StreamError/Code/notAllowed`` (a response's
    ///   data before its headers) or ``H2StreamError/Code/connectionClosed``; then nothing
    ///   changed.
    package mutating func sendData(_ id: H2StreamID, _ bytes: [UInt8], endStream: Bool, token: H2WriteToken?) throws(H2StreamError) {
        let index = try sendableStream(id)
        guard streams.values[index].headersSent else {
            throw H2StreamError(.notAllowed, "data on \(id) before the response's headers")
        }
        if !bytes.isEmpty || token != nil {
            streams.values[index].queue.append(H2QueuedChunk(bytes: bytes, token: token))
            streams.values[index].queuedBytes += bytes.count
        }
        if endStream { streams.values[index].localEndQueued = true }
        markSendReady(index)
    }

    /// Ends this side of the stream: an empty DATA frame with END_STREAM once the queued
    /// data is out.
    ///
    /// - Throws: as ``sendData(_:_:endStream:token:)``.
    package mutating func endStream(_ id: H2StreamID) throws(H2StreamError) {
        try sendData(id, [], endStream: true, token: nil)
    }

    /// Resets the stream (RST_STREAM with `code`): its queued data is dropped, its unread
    /// bytes go back to the connection window, and the frames the peer already sent on it
    /// are ignored. No event follows. A stream that is gone is ignored.
    package mutating func resetStream(_ id: H2StreamID, code: H2ErrorCode) {
        guard !isClosed, let index = streams.index(forKey: id) else { return }
        outbound.append(H2Outbound(.rstStream(id, code)))
        recentlyReset.insert(id)
        removeStream(at: index)
        queueDrainedIfDone()
    }

    /// Appends the frames to write now, in order: those queued by earlier calls and by
    /// received frames, then DATA as the windows allow, round robin over the streams with
    /// data. Taking a stream's END_STREAM may close it (``takeEvents(into:)``).
    package mutating func takeOutbound(into frames: inout [H2Outbound]) {
        if !isClosed { scheduleData() }
        frames.append(contentsOf: outbound)
        outbound.removeAll(keepingCapacity: true)
        queuedResponseFrames = 0
    }

    // MARK: Scheduling DATA

    /// Moves queued data into `outbound`, a frame per stream per turn, until the windows or
    /// the queues are empty.
    private mutating func scheduleData() {
        while !sendReady.isEmpty {
            var progress = false
            var kept = 0
            for position in sendReady.indices {
                let id = sendReady[position]
                guard let index = streams.index(forKey: id) else { continue }
                switch emitFrame(index) {
                case .more(let emitted):
                    progress = progress || emitted
                    sendReady[kept] = id
                    kept += 1
                case .blocked:
                    streams.values[index].isSendReady = false
                case .done:
                    streams.values[index].isSendReady = false
                    progress = true
                    commitLocalEndIfSent(id)
                }
            }
            sendReady.removeSubrange(kept...)
            if !progress { break }
        }
    }

    private enum FrameResult {
        /// Something is left; `emitted` says whether a frame went out this turn.
        case more(emitted: Bool)
        /// The stream's own window is exhausted: it leaves the list until a WINDOW_UPDATE.
        case blocked
        /// Nothing is left.
        case done
    }

    /// One DATA frame (and the trailers, when the data before them is out) of one stream.
    private mutating func emitFrame(_ index: Dictionary<H2StreamID, H2StreamState>.Index) -> FrameResult {
        let id = streams.keys[index]
        let hasData = streams.values[index].queuedBytes > 0
        let limit = max(0, min(Int(remoteSettings.maxFrameSize), streams.values[index].sendWindow, connectionSendWindow))
        if hasData, limit == 0 {
            return streams.values[index].sendWindow <= 0 ? .blocked : .more(emitted: false)
        }
        var payload: ArraySlice<UInt8> = []
        var tokens: [H2WriteToken] = []
        streams.values[index].takePayload(upTo: limit, into: &payload, tokens: &tokens)
        let drained = !streams.values[index].hasQueuedData
        let trailers = drained ? streams.values[index].queuedTrailers : nil
        let endStream = drained && trailers == nil && streams.values[index].localEndQueued && !streams.values[index].localEnded
        if !payload.isEmpty || endStream || !tokens.isEmpty {
            streams.values[index].sendWindow -= payload.count
            connectionSendWindow -= payload.count
            outbound.append(H2Outbound(.data(id, payload: payload, endStream: endStream), writeTokens: tokens))
        }
        if let trailers {
            streams.values[index].queuedTrailers = nil
            appendHeaderFrames(id, trailers, endStream: true)
        }
        if endStream || trailers != nil { streams.values[index].localEnded = true }
        return drained ? .done : .more(emitted: true)
    }

    // MARK: Helpers

    /// The index of a stream this side may still send on.
    private func sendableStream(_ id: H2StreamID) throws(H2StreamError) -> Dictionary<H2StreamID, H2StreamState>.Index {
        try checkOpen()
        guard let index = streams.index(forKey: id) else { throw H2StreamError(.unknownStream, "no open \(id)") }
        guard !streams.values[index].localEndQueued else { throw H2StreamError(.streamEnded, "\(id) is already ended") }
        return index
    }

    private func checkOpen() throws(H2StreamError) {
        guard !isClosed else { throw H2StreamError(.connectionClosed, "the connection ended") }
    }

    private func checkHeaderListSize(_ fields: [HPACKField]) throws(H2StreamError) {
        guard let limit = remoteSettings.maxHeaderListSize else { return }
        var size = 0
        for field in fields { size += field.size }
        guard size <= Int(limit) else {
            throw H2StreamError(.headerListTooLarge, "a header list of \(size) octets, the peer's limit is \(limit)")
        }
    }

    /// This side's END_STREAM is in `outbound`: the stream is half-closed (local), or closed.
    private mutating func commitLocalEnd(_ id: H2StreamID) {
        guard let index = streams.index(forKey: id) else { return }
        streams.values[index].localEnded = true
        var events = pendingEvents
        pendingEvents = []
        if closeIfEnded(id, into: &events) { reportDrainedIfDone(into: &events) }
        pendingEvents = events
    }

    private mutating func commitLocalEndIfSent(_ id: H2StreamID) {
        guard let stream = streams[id], stream.localEnded else { return }
        commitLocalEnd(id)
    }

    /// Queues HEADERS, then CONTINUATIONs when the block is larger than the peer's
    /// SETTINGS_MAX_FRAME_SIZE. The block is encoded now: HPACK blocks must reach the peer
    /// in the order they were encoded, which is `outbound`'s order.
    mutating func appendHeaderFrames(_ id: H2StreamID, _ fields: [HPACKField], endStream: Bool) {
        var block: [UInt8] = []
        encoder.encode(fields, into: &block)
        let maximum = Int(remoteSettings.maxFrameSize)
        guard block.count > maximum else {
            outbound.append(H2Outbound(.headers(id, headerBlock: block, endStream: endStream, endHeaders: true)))
            return
        }
        var start = 0
        while start < block.count {
            let end = min(block.count, start + maximum)
            let fragment = Array(block[start..<end])
            if start == 0 {
                outbound.append(H2Outbound(.headers(id, headerBlock: fragment, endStream: endStream, endHeaders: false)))
            } else {
                outbound.append(H2Outbound(.continuation(id, headerBlock: fragment, endHeaders: end == block.count)))
            }
            start = end
        }
    }

    static let methodName = Array(":method".utf8)
    static let headMethod = Array("HEAD".utf8)
}

extension H2StreamState {
    /// Data is queued (bytes, or a token still to report).
    var hasQueuedData: Bool { queueHead < queue.count }

    /// Takes up to `limit` queued octets into `payload`, appending the tokens of chunks
    /// whose last octet it takes. A frame within one chunk is a slice of the chunk's own
    /// array (no copy: a large write goes out in frames that share its storage); only a
    /// frame that gathers several chunks copies them.
    mutating func takePayload(upTo limit: Int, into payload: inout ArraySlice<UInt8>, tokens: inout [H2WriteToken]) {
        var room = limit
        while queueHead < queue.count {
            let chunk = queue[queueHead]
            let take = min(room, chunk.remaining)
            if take == 0, chunk.remaining > 0 { break }
            if payload.isEmpty {
                payload = chunk.bytes[chunk.sent..<(chunk.sent + take)]
            } else {
                if payload.capacity < limit { payload.reserveCapacity(min(limit, queuedBytes)) }
                payload.append(contentsOf: chunk.bytes[chunk.sent..<(chunk.sent + take)])
            }
            room -= take
            queuedBytes -= take
            if take == chunk.remaining {
                if let token = chunk.token { tokens.append(token) }
                queue[queueHead] = H2QueuedChunk(bytes: [])
                queueHead += 1
            } else {
                queue[queueHead].sent += take
                break
            }
        }
        if queueHead == queue.count {
            queue.removeAll(keepingCapacity: true)
            queueHead = 0
        } else if queueHead >= 64, queueHead * 2 >= queue.count {
            queue.removeSubrange(..<queueHead)
            queueHead = 0
        }
    }
}
