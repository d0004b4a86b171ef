import SwitchyardHPACK

/// The state of one HTTP/2 connection (RFC 9113), for either role, without I/O: frames go
/// in through ``receive(_:now:into:)``, frames to write come out of ``takeOutbound(into:)``,
/// and what the upper layer must know comes out as ``H2Event``s. No thread, no clock: time
/// comes in as `now` where a rule needs it (rate limits, the graceful shutdown's wait).
///
/// Call order:
/// 1. `init` queues this side's SETTINGS (the client's preface octets are the driver's to
///    write before it) and the WINDOW_UPDATE that raises the connection window.
/// 2. Each decoded inbound frame goes to ``receive(_:now:into:)``, in order. The peer's
///    first frame must be SETTINGS.
/// 3. After receiving and after the upper layer's calls, the driver takes the frames with
///    ``takeOutbound(into:)`` and the events the calls (or the frames taken) caused with
///    ``takeEvents(into:)`` (a stream closes when its last frame is taken; `drained`).
///    ``receive(_:now:into:)`` gives those pending events first, so the order holds.
/// 4. After ``H2Event/connectionError(_:)`` or ``abort(_:message:)`` the last outbound
///    frame is the GOAWAY: nothing is received or sent after it, and calls that would
///    send throw ``H2StreamError/Code/connectionClosed``.
///
/// Flow control: this side's receive windows are granted back only as the upper layer
/// reports ``consumed(_:bytes:)``, so a stream nobody reads holds at most one stream window
/// in memory. Send windows are never exceeded: data waits in the stream's queue, whose size
/// (``queuedBytes(_:)``) the upper layer bounds.
package struct H2ConnectionStateMachine: Sendable {
    package let role: H2Role
    package let configuration: H2Configuration

    /// This side's settings as the peer acknowledged them (the RFC's initial values before).
    package internal(set) var localSettings = H2Settings()
    /// The peer's settings as received.
    package internal(set) var remoteSettings = H2Settings()
    /// This side's SETTINGS sent and not yet acknowledged, oldest first.
    var unacknowledgedSettings: [H2Settings] = []
    var receivedRemoteSettings = false

    var encoder: HPACKEncoder
    var decoder: HPACKDecoder

    var streams: [H2StreamID: H2StreamState] = [:]
    /// Streams this side opened (client) that are open or half-closed.
    var localStreamCount = 0
    /// Streams the peer opened that are open or half-closed.
    var remoteStreamCount = 0
    /// The identifier of the next stream this side opens.
    var nextLocalStreamID: UInt32
    /// The highest stream identifier the peer used.
    package internal(set) var lastRemoteStreamID = H2StreamID.connection
    var recentlyReset: H2RecentlyResetStreams
    /// The last streams the peer reset: a frame after its own RST_STREAM is a stream error
    /// STREAM_CLOSED (section 5.1), not a connection error.
    var recentlyResetByPeer: H2RecentlyResetStreams

    /// What the peer lets this side send on the connection.
    var connectionSendWindow = 65_535
    /// What this side lets the peer send on the connection.
    var connectionReceiveWindow = 65_535
    /// Consumed (or discarded) bytes not yet granted back on the connection.
    var connectionPendingGrant = 0

    /// A header block waiting for its CONTINUATION frames.
    var headerBlock: PendingHeaderBlock?
    /// The octets of `headerBlock`, kept between blocks for its capacity.
    var headerBlockBuffer: [UInt8] = []

    /// Frames in wire order, not yet taken.
    var outbound: [H2Outbound] = []
    /// Frames in `outbound` that answer the peer (acks, RST_STREAM after its errors).
    var queuedResponseFrames = 0
    /// Events caused by the upper layer's calls or by frames taken, not yet given.
    var pendingEvents: [H2Event] = []
    /// Streams that may have something to send, in round-robin order (may name streams
    /// since removed; they are skipped).
    var sendReady: [H2StreamID] = []

    var resetLimiter: H2RateLimiter
    var refusedLimiter: H2RateLimiter
    var pingLimiter: H2RateLimiter
    var settingsLimiter: H2RateLimiter
    var emptyFrameLimiter: H2RateLimiter

    var shutdown = Shutdown.none
    /// The last stream id of the GOAWAY the peer sent (the lowest if several).
    var remoteGoAwayLastStreamID: H2StreamID?
    var drainedReported = false

    /// This side's way out of the connection.
    enum Shutdown: Sendable, Equatable {
        case none
        /// Server: GOAWAY(2^31 - 1) and a PING are sent; the final GOAWAY waits for the
        /// PING's acknowledgement (streams already in flight are still accepted).
        case awaitingPingAcknowledgement(since: ContinuousClock.Instant)
        /// The final GOAWAY is sent: streams above `lastStreamID` are refused.
        case goAwaySent(lastStreamID: H2StreamID)
        /// After a connection error or ``H2ConnectionStateMachine/abort(_:message:)``.
        case closed
    }

    struct PendingHeaderBlock: Sendable {
        var stream: H2StreamID
        var endStream: Bool
        var continuationFrames = 0
    }

    /// The PING payload of a server's graceful shutdown ("shutdown" in ASCII, 8 octets).
    static let shutdownPingPayload: UInt64 = 0x7368_7574_646f_776e

    /// A state machine whose first outbound frames are this side's SETTINGS and the
    /// connection WINDOW_UPDATE.
    package init(role: H2Role, configuration: H2Configuration = H2Configuration()) {
        self.role = role
        self.configuration = configuration
        encoder = HPACKEncoder(peerMaxTableSize: 4096)
        decoder = HPACKDecoder(maxTableSize: 4096, maxHeaderListSize: configuration.maxHeaderListSize)
        nextLocalStreamID = role == .client ? 1 : 2
        recentlyReset = H2RecentlyResetStreams(capacity: configuration.recentlyResetStreams)
        recentlyResetByPeer = H2RecentlyResetStreams(capacity: configuration.recentlyResetStreams)
        resetLimiter = H2RateLimiter(configuration.streamResetRate)
        refusedLimiter = H2RateLimiter(configuration.refusedStreamRate)
        pingLimiter = H2RateLimiter(configuration.pingRate)
        settingsLimiter = H2RateLimiter(configuration.settingsRate)
        emptyFrameLimiter = H2RateLimiter(configuration.emptyFrameRate)

        let announced = configuration.settings(for: role)
        var settings = H2Settings()
        Self.apply(announced, to: &settings)
        unacknowledgedSettings.append(settings)
        outbound.append(H2Outbound(.settings(announced)))
        let connectionWindow = min(max(configuration.connectionWindowSize, 65_535), Int(H2Settings.maxWindowSize))
        if connectionWindow > connectionReceiveWindow {
            outbound.append(H2Outbound(.windowUpdate(.connection, increment: UInt32(connectionWindow - connectionReceiveWindow))))
            connectionReceiveWindow = connectionWindow
        }
    }

    // MARK: State the upper layer reads

    /// Whether ``openStream(headers:endStream:)`` would succeed now: a client, below the
    /// peer's SETTINGS_MAX_CONCURRENT_STREAMS, not going away, identifiers left.
    package var canOpenStream: Bool {
        role == .client && !isGoingAway && nextLocalStreamID <= H2StreamID.maximum.rawValue
            && localStreamCount < remoteSettings.maxConcurrentStreams.map { Int($0) } ?? Int.max
    }

    /// A GOAWAY was sent or received (or the connection ended).
    package var isGoingAway: Bool { shutdown != .none || remoteGoAwayLastStreamID != nil }

    /// The connection ended: after a connection error or ``abort(_:message:)``.
    package var isClosed: Bool { shutdown == .closed }

    /// The number of streams open or half-closed.
    package var openStreamCount: Int { streams.count }

    /// Data accepted by ``sendData(_:_:endStream:token:)`` for `stream` and not yet in
    /// outbound frames: the upper layer's backpressure. 0 for an unknown stream.
    package func queuedBytes(_ stream: H2StreamID) -> Int { streams[stream]?.queuedBytes ?? 0 }

    // MARK: Inbound

    /// Feeds one decoded inbound frame, appending what the upper layer must know to
    /// `events`, in order (events pending from earlier calls first). Never throws: a
    /// stream error of the peer resets the stream (RST_STREAM queued,
    /// ``H2Event/streamReset(_:_:processed:)``); a connection error queues the GOAWAY and
    /// ends with ``H2Event/connectionError(_:)``. After the connection ended, frames are
    /// ignored.
    package mutating func receive(_ frame: H2Frame, now: ContinuousClock.Instant, into events: inout [H2Event]) {
        takeEvents(into: &events)
        guard !isClosed else { return }
        do throws(H2ProtocolViolation) {
            do throws(H2ProtocolViolation) {
                try process(frame, now: now, into: &events)
            } catch {
                guard let stream = error.stream else { throw error }
                try failStream(stream, error.code, now: now, into: &events)
            }
            if case .awaitingPingAcknowledgement(let since) = shutdown, now - since >= configuration.gracefulShutdownPingTimeout {
                sendFinalGoAway()
            }
        } catch {
            failConnection(error, into: &events)
            return
        }
        reportDrainedIfDone(into: &events)
    }

    /// Feeds one decoded inbound frame and returns the events it caused (see
    /// ``receive(_:now:into:)``, which appends to a reused array instead).
    package mutating func receive(_ frame: H2Frame, now: ContinuousClock.Instant) -> [H2Event] {
        var events: [H2Event] = []
        receive(frame, now: now, into: &events)
        return events
    }

    /// Appends the events caused by the upper layer's calls and by frames taken since the
    /// last ``receive(_:now:into:)`` or `takeEvents`: ``H2Event/streamClosed(_:)`` when
    /// this side's END_STREAM finished a stream, ``H2Event/drained``.
    package mutating func takeEvents(into events: inout [H2Event]) {
        guard !pendingEvents.isEmpty else { return }
        events.append(contentsOf: pendingEvents)
        pendingEvents.removeAll(keepingCapacity: true)
    }

    private mutating func process(_ frame: H2Frame, now: ContinuousClock.Instant, into events: inout [H2Event]) throws(H2ProtocolViolation) {
        if let block = headerBlock {
            guard case .continuation(let id, let fragment, let endHeaders) = frame, id == block.stream else {
                throw H2ProtocolViolation(
                    connection: .protocolError, "\(Self.kind(of: frame)) on \(frame.stream) inside the header block of \(block.stream)")
            }
            try receiveContinuation(fragment, endHeaders: endHeaders, block: block, now: now, into: &events)
            return
        }
        if !receivedRemoteSettings {
            guard case .settings = frame else {
                throw H2ProtocolViolation(connection: .protocolError, "the peer's first frame is \(Self.kind(of: frame)), not SETTINGS")
            }
        }
        switch frame {
        case .data(let id, let payload, let endStream, _):
            try receiveData(id, Array(payload), endStream: endStream, flowControlledLength: frame.flowControlledLength, now: now, into: &events)
        case .headers(let id, let block, let endStream, let endHeaders, _):
            try receiveHeaders(id, block, endStream: endStream, endHeaders: endHeaders, now: now, into: &events)
        case .continuation(let id, _, _):
            throw H2ProtocolViolation(connection: .protocolError, "CONTINUATION on \(id) without a HEADERS before it")
        case .priority, .unknown:
            // Section 5.3.2: priority signals carry no meaning here; section 5.5: unknown
            // frame types are ignored.
            break
        case .rstStream(let id, let code):
            try receiveReset(id, code, now: now, into: &events)
        case .settings(let settings):
            try receiveSettings(settings, now: now, into: &events)
        case .settingsAck:
            receiveSettingsAck()
        case .pushPromise(let id, _, _, _):
            // A client announces ENABLE_PUSH 0; a client never pushes (section 8.4).
            throw H2ProtocolViolation(connection: .protocolError, "PUSH_PROMISE on \(id): push is disabled")
        case .ping(let payload, let ack):
            try receivePing(payload, ack: ack, now: now, into: &events)
        case .goAway(let lastStreamID, let code, let debugData):
            receiveGoAway(lastStreamID: lastStreamID, code, debugData: debugData, into: &events)
        case .windowUpdate(let id, let increment):
            try receiveWindowUpdate(id, increment: increment, into: &events)
        }
    }

    // MARK: Settings and PING

    private mutating func receiveSettings(_ settings: [H2Setting], now: ContinuousClock.Instant, into events: inout [H2Event]) throws(H2ProtocolViolation) {
        guard settingsLimiter.take(now: now) else {
            throw H2ProtocolViolation(connection: .enhanceYourCalm, "SETTINGS frames above \(configuration.settingsRate)")
        }
        var updated = remoteSettings
        for setting in settings {
            switch setting.identifier {
            case .enablePush:
                guard setting.value <= 1 else {
                    throw H2ProtocolViolation(connection: .protocolError, "SETTINGS_ENABLE_PUSH \(setting.value)")
                }
                guard role == .server || setting.value == 0 else {
                    throw H2ProtocolViolation(connection: .protocolError, "a server sent SETTINGS_ENABLE_PUSH 1")
                }
            case .initialWindowSize:
                guard setting.value <= H2Settings.maxWindowSize else {
                    throw H2ProtocolViolation(connection: .flowControlError, "SETTINGS_INITIAL_WINDOW_SIZE \(setting.value) above 2^31 - 1")
                }
            case .maxFrameSize:
                guard H2Settings.maxFrameSizeRange.contains(setting.value) else {
                    throw H2ProtocolViolation(connection: .protocolError, "SETTINGS_MAX_FRAME_SIZE \(setting.value) out of range")
                }
            default:
                break
            }
            Self.apply(setting, to: &updated)
        }
        // Section 6.9.2: a new initial window moves every stream's send window by the delta.
        let delta = Int(updated.initialWindowSize) - Int(remoteSettings.initialWindowSize)
        if delta != 0 {
            for index in streams.indices {
                let before = streams.values[index].sendWindow
                let after = before + delta
                guard after <= Int(H2Settings.maxWindowSize) else {
                    throw H2ProtocolViolation(
                        connection: .flowControlError,
                        "SETTINGS_INITIAL_WINDOW_SIZE \(updated.initialWindowSize) takes \(streams.keys[index])'s window past 2^31 - 1")
                }
                streams.values[index].sendWindow = after
                if before <= 0, after > 0, streams.values[index].hasPendingOutput {
                    markSendReady(index)
                    events.append(.windowOpened(streams.keys[index]))
                }
            }
        }
        if updated.headerTableSize != remoteSettings.headerTableSize {
            encoder.setPeerMaxTableSize(Int(updated.headerTableSize))
        }
        remoteSettings = updated
        receivedRemoteSettings = true
        try queueResponse(.settingsAck)
        events.append(.remoteSettingsChanged(updated))
    }

    private mutating func receiveSettingsAck() {
        // An acknowledgement of nothing is ignored: no rule names it an error.
        guard !unacknowledgedSettings.isEmpty else { return }
        let acknowledged = unacknowledgedSettings.removeFirst()
        let delta = Int(acknowledged.initialWindowSize) - Int(localSettings.initialWindowSize)
        if delta != 0 {
            for index in streams.indices { streams.values[index].receiveWindow += delta }
        }
        if acknowledged.headerTableSize != localSettings.headerTableSize {
            decoder.setMaxTableSizeLimit(Int(acknowledged.headerTableSize))
        }
        localSettings = acknowledged
    }

    static func apply(_ settings: [H2Setting], to values: inout H2Settings) {
        for setting in settings { apply(setting, to: &values) }
    }

    static func apply(_ setting: H2Setting, to values: inout H2Settings) {
        switch setting.identifier {
        case .headerTableSize: values.headerTableSize = setting.value
        case .enablePush: values.enablePush = setting.value == 1
        case .maxConcurrentStreams: values.maxConcurrentStreams = setting.value
        case .initialWindowSize: values.initialWindowSize = setting.value
        case .maxFrameSize: values.maxFrameSize = setting.value
        case .maxHeaderListSize: values.maxHeaderListSize = setting.value
        default: break  // Section 6.5.2: unknown settings are ignored.
        }
    }

    private mutating func receivePing(_ payload: UInt64, ack: Bool, now: ContinuousClock.Instant, into events: inout [H2Event]) throws(H2ProtocolViolation) {
        if ack {
            if case .awaitingPingAcknowledgement = shutdown, payload == Self.shutdownPingPayload {
                sendFinalGoAway()
            }
            events.append(.pingAcknowledged(payload))
            return
        }
        guard pingLimiter.take(now: now) else {
            throw H2ProtocolViolation(connection: .enhanceYourCalm, "PING frames above \(configuration.pingRate)")
        }
        try queueResponse(.ping(payload, ack: true))
        events.append(.pingReceived(payload))
    }

    /// Sends a PING; its acknowledgement comes as ``H2Event/pingAcknowledged(_:)``.
    package mutating func sendPing(_ payload: UInt64) {
        guard !isClosed else { return }
        outbound.append(H2Outbound(.ping(payload, ack: false)))
    }

    // MARK: Errors

    /// Queues a frame that answers the peer, bounded by
    /// ``H2Configuration/maxQueuedResponseFrames``.
    mutating func queueResponse(_ frame: H2Frame) throws(H2ProtocolViolation) {
        queuedResponseFrames += 1
        guard queuedResponseFrames <= configuration.maxQueuedResponseFrames else {
            throw H2ProtocolViolation(
                connection: .enhanceYourCalm, "more than \(configuration.maxQueuedResponseFrames) answers queued and not written")
        }
        outbound.append(H2Outbound(frame))
    }

    /// A stream error of the peer (section 5.4.2): RST_STREAM, the stream's state goes,
    /// its unread bytes go back to the connection window; counted against
    /// ``H2Configuration/streamResetRate`` on a server.
    mutating func failStream(_ id: H2StreamID, _ code: H2ErrorCode, now: ContinuousClock.Instant, into events: inout [H2Event]) throws(H2ProtocolViolation) {
        try queueResponse(.rstStream(id, code))
        recentlyReset.insert(id)
        if let index = streams.index(forKey: id) {
            removeStream(at: index)
            events.append(.streamReset(id, code, processed: true))
        }
        if role == .server, !resetLimiter.take(now: now) {
            throw H2ProtocolViolation(connection: .enhanceYourCalm, "stream resets above \(configuration.streamResetRate)")
        }
    }

    /// A connection error (section 5.4.1): GOAWAY as the last frame, then nothing.
    mutating func failConnection(_ violation: H2ProtocolViolation, into events: inout [H2Event]) {
        close(with: violation.code, debugData: Array(violation.message.utf8))
        events.append(.connectionError(violation))
    }

    mutating func close(with code: H2ErrorCode, debugData: [UInt8]) {
        outbound.append(H2Outbound(.goAway(lastStreamID: lastRemoteStreamID, code, debugData: debugData)))
        shutdown = .closed
        streams.removeAll()
        sendReady.removeAll()
        headerBlock = nil
        localStreamCount = 0
        remoteStreamCount = 0
    }

    // MARK: Streams

    /// Removes a stream's state; its unread bytes go back to the connection window (the
    /// upper layer's later ``consumed(_:bytes:)`` for it is ignored).
    mutating func removeStream(at index: Dictionary<H2StreamID, H2StreamState>.Index) {
        let stream = streams.values[index]
        if stream.isRemote(for: role) { remoteStreamCount -= 1 } else { localStreamCount -= 1 }
        returnConnectionWindow(stream.unconsumed)
        streams.remove(at: index)
    }

    /// Closes the stream when both directions ended; true when it did.
    @discardableResult
    mutating func closeIfEnded(_ id: H2StreamID, into events: inout [H2Event]) -> Bool {
        guard let index = streams.index(forKey: id), streams.values[index].localEnded, streams.values[index].remoteEnded else {
            return false
        }
        removeStream(at: index)
        events.append(.streamClosed(id))
        return true
    }

    /// Whether `id` names a stream that was never opened and may still be (idle): above
    /// the last one its initiator opened.
    func isIdle(_ id: H2StreamID) -> Bool {
        if id.isClientInitiated == (role == .client) {
            return id.rawValue >= nextLocalStreamID
        }
        return id > lastRemoteStreamID
    }

    static func kind(of frame: H2Frame) -> String {
        switch frame {
        case .data: "DATA"
        case .headers: "HEADERS"
        case .priority: "PRIORITY"
        case .rstStream: "RST_STREAM"
        case .settings, .settingsAck: "SETTINGS"
        case .pushPromise: "PUSH_PROMISE"
        case .ping: "PING"
        case .goAway: "GOAWAY"
        case .windowUpdate: "WINDOW_UPDATE"
        case .continuation: "CONTINUATION"
        case .unknown(let type, _, _): "frame type 0x\(String(type, radix: 16))"
        }
    }
}
