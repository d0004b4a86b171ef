/// GOAWAY both ways (RFC 9113 section 6.8): a graceful drain, where streams already open
/// go on and new ones are refused, and an abort.
extension H2ConnectionStateMachine {
    /// Begins a graceful shutdown.
    ///
    /// A server sends GOAWAY(2^31 - 1, NO_ERROR) and a PING; when the PING is acknowledged
    /// (or ``H2Configuration/gracefulShutdownPingTimeout`` after `now`, noticed at the
    /// next received frame or at a second call), it sends GOAWAY with the last stream it
    /// processed, and streams above it are refused (RST_STREAM REFUSED_STREAM). The round
    /// trip lets requests already in flight arrive. A client sends GOAWAY(last, NO_ERROR)
    /// and opens no more streams. Streams already open go on; ``H2Event/drained`` comes
    /// (through ``takeEvents(into:)`` or the next receive) when none is left.
    package mutating func beginGracefulShutdown(now: ContinuousClock.Instant) {
        switch shutdown {
        case .none:
            if role == .server {
                outbound.append(H2Outbound(.goAway(lastStreamID: .maximum, .noError, debugData: [])))
                outbound.append(H2Outbound(.ping(Self.shutdownPingPayload, ack: false)))
                shutdown = .awaitingPingAcknowledgement(since: now)
            } else {
                sendFinalGoAway()
            }
        case .awaitingPingAcknowledgement(let since):
            if now - since >= configuration.gracefulShutdownPingTimeout { sendFinalGoAway() }
        case .goAwaySent, .closed:
            break
        }
        queueDrainedIfDone()
    }

    /// Ends the connection at once: GOAWAY with `code` and `message` as its debug data is
    /// the last outbound frame; queued data is dropped, nothing more is received or sent.
    package mutating func abort(_ code: H2ErrorCode, message: String) {
        guard !isClosed else { return }
        close(with: code, debugData: Array(message.utf8))
    }

    mutating func sendFinalGoAway() {
        outbound.append(H2Outbound(.goAway(lastStreamID: lastRemoteStreamID, .noError, debugData: [])))
        shutdown = .goAwaySent(lastStreamID: lastRemoteStreamID)
    }

    mutating func receiveGoAway(lastStreamID: H2StreamID, _ code: H2ErrorCode, debugData: [UInt8], into events: inout [H2Event]) {
        let last = min(lastStreamID, remoteGoAwayLastStreamID ?? .maximum)
        remoteGoAwayLastStreamID = last
        events.append(.goAwayReceived(lastStreamID: lastStreamID, code, debugData: debugData))
        // Streams this side opened above `last` were never processed: gone, retryable.
        var unprocessed: [H2StreamID] = []
        for (id, stream) in streams where !stream.isRemote(for: role) && id > last { unprocessed.append(id) }
        unprocessed.sort()
        for id in unprocessed {
            guard let index = streams.index(forKey: id) else { continue }
            removeStream(at: index)
            events.append(.streamReset(id, .refusedStream, processed: false))
        }
    }

    /// ``reportDrainedIfDone(into:)`` into the events given by ``takeEvents(into:)``.
    mutating func queueDrainedIfDone() {
        var events = pendingEvents
        pendingEvents = []
        reportDrainedIfDone(into: &events)
        pendingEvents = events
    }

    /// Appends ``H2Event/drained`` once, when this side or the peer is going away and no
    /// stream is left (a server waiting for its shutdown PING is not done yet).
    mutating func reportDrainedIfDone(into events: inout [H2Event]) {
        guard !drainedReported, streams.isEmpty else { return }
        switch shutdown {
        case .goAwaySent: break
        case .none, .awaitingPingAcknowledgement: guard remoteGoAwayLastStreamID != nil else { return }
        case .closed: return
        }
        drainedReported = true
        events.append(.drained)
    }
}
