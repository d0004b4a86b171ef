package import SwitchyardHPACK

/// What the upper layer must know after an inbound frame (or, through
/// ``H2ConnectionStateMachine/takeEvents(into:)``, after its own calls), in order.
package enum H2Event: Sendable, Hashable {
    /// Server: a new request. `endStream` true: the request has no body.
    case streamOpened(H2StreamID, headers: [HPACKField], endStream: Bool)
    /// Client: response headers (informational 1xx ones with `endStream` false, then the
    /// final ones); both sides: trailers (always `endStream` true). A trailers-only
    /// response is final response headers with `endStream` true.
    case headers(H2StreamID, [HPACKField], endStream: Bool)
    /// Body bytes. `flowControlledLength` (payload and padding) is what the upper layer
    /// reports to ``H2ConnectionStateMachine/consumed(_:bytes:)`` once the reader took
    /// the bytes: no window is given back before.
    case data(H2StreamID, [UInt8], endStream: Bool, flowControlledLength: Int)
    /// The stream ended abnormally and its state is gone: reset by the peer (its code), by
    /// this side after a stream error of the peer (the RST_STREAM is already queued), or
    /// never processed by a peer that is going away. `processed` false means the peer
    /// cannot have acted on it (REFUSED_STREAM, or above a GOAWAY's last stream id): a
    /// client may retry it elsewhere. Streams the upper layer reset itself, or never
    /// heard of (a request refused or found malformed before `streamOpened`), have no event.
    case streamReset(H2StreamID, H2ErrorCode, processed: Bool)
    /// Both directions ended normally (END_STREAM received and sent); the stream's state
    /// is gone.
    case streamClosed(H2StreamID)
    /// Queued data of this stream (or of every stream: `.connection`) can move again: a
    /// window that was exhausted is open.
    case windowOpened(H2StreamID)
    /// The peer answered a PING this side sent.
    case pingAcknowledged(UInt64)
    /// The peer sent a PING; its acknowledgement is already queued. For keepalive
    /// enforcement by the upper layer.
    case pingReceived(UInt64)
    /// The peer is going away: no new stream may open; its streams above `lastStreamID`
    /// were reset (``streamReset(_:_:processed:)`` with `processed` false, after this event).
    case goAwayReceived(lastStreamID: H2StreamID, H2ErrorCode, debugData: [UInt8])
    /// The peer's settings changed (all of them, as now in effect): a new
    /// SETTINGS_MAX_CONCURRENT_STREAMS may let waiting calls start.
    case remoteSettingsChanged(H2Settings)
    /// One side is going away and no stream is left: close the connection. Given once.
    case drained
    /// The peer broke a connection-level rule; the GOAWAY is queued as the last outbound
    /// frame and nothing more is received or sent: flush and close. Open streams get no
    /// event of their own.
    case connectionError(H2ProtocolViolation)
}
