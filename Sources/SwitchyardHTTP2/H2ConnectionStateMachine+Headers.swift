import SwitchyardHPACK

/// Inbound header blocks: HEADERS and CONTINUATION sequencing (RFC 9113 section 6.10),
/// HPACK decoding of the whole block, stream opening (section 5.1.1), responses and
/// trailers (section 8.1), and the limits on blocks (CONTINUATION flood, HPACK bomb).
extension H2ConnectionStateMachine {
    mutating func receiveHeaders(
        _ id: H2StreamID, _ fragment: [UInt8], endStream: Bool, endHeaders: Bool, now: ContinuousClock.Instant,
        into events: inout [H2Event]
    ) throws(H2ProtocolViolation) {
        guard !id.isConnection else { throw H2ProtocolViolation(connection: .protocolError, "HEADERS on stream 0") }
        try checkBlockSize(fragment.count)
        if endHeaders {
            try receiveHeaderBlock(id, fragment, endStream: endStream, now: now, into: &events)
            return
        }
        headerBlockBuffer.removeAll(keepingCapacity: true)
        headerBlockBuffer.append(contentsOf: fragment)
        headerBlock = PendingHeaderBlock(stream: id, endStream: endStream)
    }

    mutating func receiveContinuation(
        _ fragment: [UInt8], endHeaders: Bool, block: PendingHeaderBlock, now: ContinuousClock.Instant, into events: inout [H2Event]
    ) throws(H2ProtocolViolation) {
        var block = block
        block.continuationFrames += 1
        guard block.continuationFrames <= configuration.maxContinuationFrames else {
            throw H2ProtocolViolation(
                connection: .enhanceYourCalm, "more than \(configuration.maxContinuationFrames) CONTINUATION frames in one header block")
        }
        try checkBlockSize(headerBlockBuffer.count + fragment.count)
        headerBlockBuffer.append(contentsOf: fragment)
        guard endHeaders else {
            headerBlock = block
            return
        }
        headerBlock = nil
        let octets = headerBlockBuffer
        headerBlockBuffer.removeAll(keepingCapacity: true)
        try receiveHeaderBlock(block.stream, octets, endStream: block.endStream, now: now, into: &events)
    }

    private func checkBlockSize(_ size: Int) throws(H2ProtocolViolation) {
        guard size <= configuration.maxHeaderBlockSize else {
            throw H2ProtocolViolation(
                connection: .enhanceYourCalm, "a header block of more than \(configuration.maxHeaderBlockSize) octets before END_HEADERS")
        }
    }

    /// A complete header block: decoded first, whatever the stream (the HPACK table must
    /// follow the peer's even for a block that is then ignored), then applied.
    private mutating func receiveHeaderBlock(
        _ id: H2StreamID, _ block: [UInt8], endStream: Bool, now: ContinuousClock.Instant, into events: inout [H2Event]
    ) throws(H2ProtocolViolation) {
        var fields: [HPACKField] = []
        do {
            try decoder.decode(block, into: &fields)
        } catch {
            // The list went past the SETTINGS_MAX_HEADER_LIST_SIZE this side announced: the
            // table is in step, so this is no compression error, but a peer that ignores
            // the announced limit (typically a small block that expands to a huge list)
            // is treated as abusive rather than refused stream by stream, which would let
            // it make this side decode megabytes per stream.
            if error.code == .headerListTooLarge {
                throw H2ProtocolViolation(connection: .enhanceYourCalm, "header list on \(id): \(error.message)")
            }
            throw H2ProtocolViolation(connection: .compressionError, "header block on \(id): \(error)")
        }
        if let index = streams.index(forKey: id) {
            try receiveHeadersOnOpenStream(index, fields, endStream: endStream, into: &events)
        } else if role == .server, id.isClientInitiated, id > lastRemoteStreamID {
            try openRemoteStream(id, fields, endStream: endStream, now: now, into: &events)
        } else if isIdle(id) {
            // A server's stream (no push) or a client stream this side never opened.
            throw H2ProtocolViolation(connection: .protocolError, "HEADERS on idle \(id), which the peer may not open")
        } else if recentlyReset.contains(id) {
            // Section 5.1: frames the peer sent before it saw our RST_STREAM.
            return
        } else if recentlyResetByPeer.contains(id) {
            throw H2ProtocolViolation(stream: id, .streamClosed, "HEADERS after the peer's own RST_STREAM")
        } else if role == .server, id.isClientInitiated {
            // Section 5.1.1: a new stream's id must be above every id the peer used.
            throw H2ProtocolViolation(
                connection: .protocolError, "HEADERS on \(id), not above the last stream the peer opened (\(lastRemoteStreamID))")
        } else {
            throw H2ProtocolViolation(connection: .streamClosed, "HEADERS on closed \(id)")
        }
    }

    private mutating func openRemoteStream(
        _ id: H2StreamID, _ fields: [HPACKField], endStream: Bool, now: ContinuousClock.Instant, into events: inout [H2Event]
    ) throws(H2ProtocolViolation) {
        lastRemoteStreamID = id
        let refusal: String?
        if case .goAwaySent(let last) = shutdown, id > last {
            refusal = "above the GOAWAY's last stream \(last)"
        } else if remoteStreamCount >= configuration.maxConcurrentStreams {
            refusal = "over SETTINGS_MAX_CONCURRENT_STREAMS \(configuration.maxConcurrentStreams)"
        } else {
            refusal = nil
        }
        if refusal != nil {
            try queueResponse(.rstStream(id, .refusedStream))
            recentlyReset.insert(id)
            guard refusedLimiter.take(now: now) else {
                throw H2ProtocolViolation(
                    connection: .enhanceYourCalm, "refused streams above \(configuration.refusedStreamRate) (\(id) \(refusal ?? ""))")
            }
            return
        }
        let checked: H2CheckedHeaders
        do {
            checked = try h2CheckHeaders(fields, as: .request)
        } catch {
            throw H2ProtocolViolation(stream: id, .protocolError, "malformed request: \(error.message)")
        }
        var stream = H2StreamState(
            id: id, sendWindow: Int(remoteSettings.initialWindowSize), receiveWindow: Int(localSettings.initialWindowSize),
            headersSent: false)
        stream.expectedContentLength = checked.contentLength
        stream.remoteEnded = endStream
        if endStream, let length = checked.contentLength, length != 0 {
            throw H2ProtocolViolation(stream: id, .protocolError, "content-length \(length) on a request without body")
        }
        streams[id] = stream
        remoteStreamCount += 1
        events.append(.streamOpened(id, headers: fields, endStream: endStream))
    }

    private mutating func receiveHeadersOnOpenStream(
        _ index: Dictionary<H2StreamID, H2StreamState>.Index, _ fields: [HPACKField], endStream: Bool, into events: inout [H2Event]
    ) throws(H2ProtocolViolation) {
        let id = streams.keys[index]
        guard !streams.values[index].remoteEnded else {
            throw H2ProtocolViolation(stream: id, .streamClosed, "HEADERS after END_STREAM")
        }
        if role == .client, !streams.values[index].finalHeadersReceived {
            let checked: H2CheckedHeaders
            do {
                checked = try h2CheckHeaders(fields, as: .response)
            } catch {
                throw H2ProtocolViolation(stream: id, .protocolError, "malformed response: \(error.message)")
            }
            let status = checked.status ?? 0
            if status >= 100, status < 200 {
                guard !endStream else {
                    throw H2ProtocolViolation(stream: id, .protocolError, "informational response \(status) with END_STREAM")
                }
                events.append(.headers(id, fields, endStream: false))
                return
            }
            streams.values[index].finalHeadersReceived = true
            if !streams.values[index].isHeadRequest, status != 304 {
                streams.values[index].expectedContentLength = checked.contentLength
            }
        } else {
            guard endStream else {
                throw H2ProtocolViolation(stream: id, .protocolError, "a second HEADERS without END_STREAM")
            }
            do {
                _ = try h2CheckHeaders(fields, as: .trailers)
            } catch {
                throw H2ProtocolViolation(stream: id, .protocolError, "malformed trailers: \(error.message)")
            }
        }
        if endStream {
            try checkContentLength(index, atEnd: true)
            streams.values[index].remoteEnded = true
        }
        events.append(.headers(id, fields, endStream: endStream))
        if endStream { closeIfEnded(id, into: &events) }
    }

    /// Section 8.1.1: the DATA received must not pass the content-length, and must equal it
    /// at END_STREAM.
    func checkContentLength(_ index: Dictionary<H2StreamID, H2StreamState>.Index, atEnd: Bool) throws(H2ProtocolViolation) {
        let stream = streams.values[index]
        guard let expected = stream.expectedContentLength else { return }
        if stream.receivedDataLength > expected || (atEnd && stream.receivedDataLength != expected) {
            throw H2ProtocolViolation(
                stream: stream.id, .protocolError, "\(stream.receivedDataLength) octets of DATA, content-length \(expected)")
        }
    }
}
