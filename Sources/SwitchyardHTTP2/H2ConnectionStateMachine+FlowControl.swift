/// Inbound DATA and both directions' windows (RFC 9113 sections 5.2 and 6.9): the peer may
/// not send past this side's windows; this side grants window back only as the upper layer
/// consumes, in batches of half a window.
extension H2ConnectionStateMachine {
    mutating func receiveData(
        _ id: H2StreamID, _ payload: [UInt8], endStream: Bool, flowControlledLength length: Int, now: ContinuousClock.Instant,
        into events: inout [H2Event]
    ) throws(H2ProtocolViolation) {
        guard !id.isConnection else { throw H2ProtocolViolation(connection: .protocolError, "DATA on stream 0") }
        guard length <= connectionReceiveWindow else {
            throw H2ProtocolViolation(
                connection: .flowControlError, "\(length) octets of DATA on \(id), the connection window is \(connectionReceiveWindow)")
        }
        connectionReceiveWindow -= length
        if payload.isEmpty, !endStream, !emptyFrameLimiter.take(now: now) {
            throw H2ProtocolViolation(connection: .enhanceYourCalm, "empty DATA frames above \(configuration.emptyFrameRate)")
        }
        guard let index = streams.index(forKey: id) else {
            if isIdle(id) { throw H2ProtocolViolation(connection: .protocolError, "DATA on idle \(id)") }
            guard recentlyReset.contains(id) || recentlyResetByPeer.contains(id) else {
                throw H2ProtocolViolation(connection: .streamClosed, "DATA on closed \(id)")
            }
            // Its window comes back either way.
            returnConnectionWindow(length)
            // Section 5.1: sent before the peer saw our RST_STREAM: ignored.
            if recentlyReset.contains(id) { return }
            throw H2ProtocolViolation(stream: id, .streamClosed, "DATA after the peer's own RST_STREAM")
        }
        var failure: H2ProtocolViolation?
        if streams.values[index].remoteEnded {
            failure = H2ProtocolViolation(stream: id, .streamClosed, "DATA after END_STREAM")
        } else if role == .client, !streams.values[index].finalHeadersReceived {
            failure = H2ProtocolViolation(stream: id, .protocolError, "DATA before the response's headers")
        } else if length > streams.values[index].receiveWindow {
            failure = H2ProtocolViolation(
                stream: id, .flowControlError, "\(length) octets of DATA, the stream window is \(streams.values[index].receiveWindow)")
        }
        if let failure {
            returnConnectionWindow(length)
            throw failure
        }
        streams.values[index].receiveWindow -= length
        streams.values[index].unconsumed += length
        streams.values[index].receivedDataLength += payload.count
        try checkContentLength(index, atEnd: endStream)
        if endStream { streams.values[index].remoteEnded = true }
        if length > 0 || endStream {
            events.append(.data(id, payload, endStream: endStream, flowControlledLength: length))
        }
        if endStream { closeIfEnded(id, into: &events) }
    }

    mutating func receiveWindowUpdate(_ id: H2StreamID, increment: UInt32, into events: inout [H2Event]) throws(H2ProtocolViolation) {
        let maximum = Int(H2Settings.maxWindowSize)
        if id.isConnection {
            guard increment > 0 else { throw H2ProtocolViolation(connection: .protocolError, "WINDOW_UPDATE of 0 on the connection") }
            let before = connectionSendWindow
            guard before + Int(increment) <= maximum else {
                throw H2ProtocolViolation(connection: .flowControlError, "WINDOW_UPDATE takes the connection window past 2^31 - 1")
            }
            connectionSendWindow += Int(increment)
            if before <= 0, connectionSendWindow > 0 { events.append(.windowOpened(.connection)) }
            return
        }
        guard let index = streams.index(forKey: id) else {
            if isIdle(id) { throw H2ProtocolViolation(connection: .protocolError, "WINDOW_UPDATE on idle \(id)") }
            return  // Section 5.1: may arrive after this side ended or reset the stream.
        }
        guard increment > 0 else { throw H2ProtocolViolation(stream: id, .protocolError, "WINDOW_UPDATE of 0") }
        let before = streams.values[index].sendWindow
        guard before + Int(increment) <= maximum else {
            throw H2ProtocolViolation(stream: id, .flowControlError, "WINDOW_UPDATE takes the stream window past 2^31 - 1")
        }
        streams.values[index].sendWindow += Int(increment)
        if before <= 0, streams.values[index].sendWindow > 0, streams.values[index].hasPendingOutput {
            markSendReady(index)
            events.append(.windowOpened(id))
        }
    }

    mutating func receiveReset(_ id: H2StreamID, _ code: H2ErrorCode, now: ContinuousClock.Instant, into events: inout [H2Event]) throws(H2ProtocolViolation) {
        guard !id.isConnection else { throw H2ProtocolViolation(connection: .protocolError, "RST_STREAM on stream 0") }
        guard let index = streams.index(forKey: id) else {
            if isIdle(id) { throw H2ProtocolViolation(connection: .protocolError, "RST_STREAM on idle \(id)") }
            return  // Section 5.1: crossed with our END_STREAM or RST_STREAM.
        }
        removeStream(at: index)
        recentlyResetByPeer.insert(id)
        events.append(.streamReset(id, code, processed: code != .refusedStream))
        if role == .server, !resetLimiter.take(now: now) {
            throw H2ProtocolViolation(connection: .enhanceYourCalm, "stream resets above \(configuration.streamResetRate)")
        }
    }

    /// Reports that the application read `bytes` flow-controlled octets of `stream` (the
    /// `flowControlledLength` of its ``H2Event/data(_:_:endStream:flowControlledLength:)``
    /// events). The stream's window is granted back once half of it is consumed, the
    /// connection's likewise; no window is granted otherwise. More than the stream
    /// received is capped; a stream that is gone is ignored (its unread bytes went back to
    /// the connection window when it closed or was reset).
    package mutating func consumed(_ stream: H2StreamID, bytes: Int) {
        guard !isClosed, bytes > 0, let index = streams.index(forKey: stream) else { return }
        let count = min(bytes, streams.values[index].unconsumed)
        guard count > 0 else { return }
        streams.values[index].unconsumed -= count
        if !streams.values[index].remoteEnded {
            streams.values[index].pendingGrant += count
            let grant = streams.values[index].pendingGrant
            if grant >= max(1, Int(localSettings.initialWindowSize) / 2) {
                streams.values[index].pendingGrant = 0
                streams.values[index].receiveWindow += grant
                outbound.append(H2Outbound(.windowUpdate(stream, increment: UInt32(grant))))
            }
        }
        returnConnectionWindow(count)
    }

    /// Gives `count` octets back to the connection's receive window, in batches of half
    /// the configured window.
    mutating func returnConnectionWindow(_ count: Int) {
        guard count > 0, !isClosed else { return }
        connectionPendingGrant += count
        let threshold = max(1, min(max(configuration.connectionWindowSize, 65_535), Int(H2Settings.maxWindowSize)) / 2)
        guard connectionPendingGrant >= threshold else { return }
        let grant = connectionPendingGrant
        connectionPendingGrant = 0
        connectionReceiveWindow += grant
        outbound.append(H2Outbound(.windowUpdate(.connection, increment: UInt32(grant))))
    }

    /// Puts the stream in the round-robin list of streams with something to send.
    mutating func markSendReady(_ index: Dictionary<H2StreamID, H2StreamState>.Index) {
        guard !streams.values[index].isSendReady else { return }
        streams.values[index].isSendReady = true
        sendReady.append(streams.keys[index])
    }
}
