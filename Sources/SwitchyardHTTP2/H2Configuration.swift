/// What one end of an HTTP/2 connection announces in its SETTINGS and the limits it
/// enforces against a hostile peer.
///
/// A peer that passes a limit gets a connection error (GOAWAY), ENHANCE_YOUR_CALM unless a
/// limit says otherwise; nothing a peer sends is buffered without bound. One thing is the
/// upper layer's to bound: data queued by ``H2ConnectionStateMachine/sendData(_:_:endStream:token:)``
/// for a peer that never opens its window. The state machine queues whatever it is given;
/// the upper layer stops writing when ``H2ConnectionStateMachine/queuedBytes(_:)`` is
/// above its bound (a call's flow control waits for `didWriteData`).
package struct H2Configuration: Sendable, Hashable {
    // MARK: Announced in SETTINGS

    /// SETTINGS_MAX_CONCURRENT_STREAMS: streams the peer may have open towards this side.
    /// Default 100 (RFC 9113 section 6.5.2 recommends no less). Enforced from the start;
    /// a stream beyond it is refused (RST_STREAM REFUSED_STREAM, which a client retries).
    package var maxConcurrentStreams: Int = 100
    /// SETTINGS_INITIAL_WINDOW_SIZE: each stream's receive window, the most an unread
    /// stream holds in memory. Default 65,535 (the RFC's initial value). At most 2^31 - 1.
    package var initialStreamWindowSize: Int = 65_535
    /// The connection's receive window, raised to at start by a WINDOW_UPDATE on stream 0
    /// (the RFC's initial 65,535 cannot be announced in SETTINGS). Default 1 MiB; values
    /// below 65,535 count as 65,535 (a window cannot be lowered).
    package var connectionWindowSize: Int = 1 << 20
    /// SETTINGS_MAX_FRAME_SIZE: the largest frame payload the peer may send. Default
    /// 16,384 (the RFC's initial value); the frame decoder enforces it.
    package var maxFrameSize: Int = 16_384
    /// SETTINGS_MAX_HEADER_LIST_SIZE: the largest decoded header list (name + value + 32
    /// octets per field). Default 16 KiB. Enforced from the start: a larger list (an
    /// "HPACK bomb" among others) is a connection error ENHANCE_YOUR_CALM.
    package var maxHeaderListSize: Int = 16 << 10
    /// SETTINGS_HEADER_TABLE_SIZE: the largest HPACK dynamic table the peer's encoder may
    /// use. Default 4,096 (the RFC's initial value).
    package var headerTableSize: Int = 4096

    // MARK: Enforced against the peer

    /// How far a header block (HEADERS and its CONTINUATIONs, still encoded) may grow past
    /// ``maxHeaderListSize`` before END_HEADERS: the room for HPACK's table size updates
    /// and length prefixes. Default 1 KiB. A longer block is ENHANCE_YOUR_CALM without
    /// being decoded (a CONTINUATION flood).
    package var headerBlockSlack: Int = 1024
    /// The most CONTINUATION frames one header block may take. Default 32: a header list
    /// within the defaults needs at most one; many tiny frames are a flood.
    package var maxContinuationFrames: Int = 32
    /// Streams the peer resets (RST_STREAM on an open stream), or makes this side reset by
    /// a stream error: rapid reset (CVE-2023-44487) and its variant where the peer provokes
    /// the resets. Default 200 per 10 s. Counted on a server only (a server resetting
    /// many of a client's calls is not an attack on the client).
    package var streamResetRate = H2RateLimit(200, per: .seconds(10))
    /// Streams refused for being over ``maxConcurrentStreams`` (or after GOAWAY): a peer
    /// that keeps opening past the limit it was told. Default 200 per 10 s.
    package var refusedStreamRate = H2RateLimit(200, per: .seconds(10))
    /// PINGs the peer sends (each costs an acknowledgement). Default 1,000 per 10 s:
    /// generous, since bandwidth-estimating peers ping on every burst of data; keepalive
    /// policy (gRPC's `too_many_pings`) is the upper layer's, through ``H2Event/pingReceived(_:)``.
    package var pingRate = H2RateLimit(1000, per: .seconds(10))
    /// SETTINGS frames the peer sends (each costs an acknowledgement). Default 100 per 10 s.
    package var settingsRate = H2RateLimit(100, per: .seconds(10))
    /// DATA frames without payload and without END_STREAM (they cost work and move
    /// nothing). Default 100 per 10 s.
    package var emptyFrameRate = H2RateLimit(100, per: .seconds(10))
    /// Frames queued in answer to the peer (PING and SETTINGS acknowledgements,
    /// RST_STREAM) and not yet taken by ``H2ConnectionStateMachine/takeOutbound(into:)``:
    /// a peer that floods while not reading our writes. Default 1,000.
    package var maxQueuedResponseFrames: Int = 1000
    /// How many streams this side reset are remembered, so the frames the peer sent before
    /// it saw the RST_STREAM are ignored (RFC 9113 section 5.1) rather than a connection
    /// error. Default 1,000; a frame on a forgotten stream is a STREAM_CLOSED connection error.
    package var recentlyResetStreams: Int = 1000
    /// How long a server's graceful shutdown waits for the PING acknowledgement before
    /// sending its final GOAWAY anyway (checked at each received frame and at a second
    /// ``H2ConnectionStateMachine/beginGracefulShutdown(now:)``). Default 10 s.
    package var gracefulShutdownPingTimeout: Duration = .seconds(10)

    /// The defaults above.
    package init() {}

    /// The largest header block accepted before END_HEADERS: ``maxHeaderListSize`` plus
    /// ``headerBlockSlack``.
    package var maxHeaderBlockSize: Int { maxHeaderListSize + headerBlockSlack }

    /// The SETTINGS frame that announces this configuration.
    func settings(for role: H2Role) -> [H2Setting] {
        var list: [H2Setting] = []
        list.reserveCapacity(6)
        if headerTableSize != 4096 { list.append(H2Setting(.headerTableSize, Self.clamp(headerTableSize))) }
        // A server may not send ENABLE_PUSH 1 and need not send 0 (section 6.5.2).
        if role == .client { list.append(H2Setting(.enablePush, 0)) }
        list.append(H2Setting(.maxConcurrentStreams, Self.clamp(maxConcurrentStreams)))
        list.append(H2Setting(.initialWindowSize, min(Self.clamp(initialStreamWindowSize), H2Settings.maxWindowSize)))
        list.append(H2Setting(.maxFrameSize, Self.clamp(maxFrameSize, to: H2Settings.maxFrameSizeRange)))
        list.append(H2Setting(.maxHeaderListSize, Self.clamp(maxHeaderListSize)))
        return list
    }

    private static func clamp(_ value: Int, to range: ClosedRange<UInt32> = 0...UInt32.max) -> UInt32 {
        UInt32(clamping: value).clamped(to: range)
    }
}

extension Comparable {
    fileprivate func clamped(to range: ClosedRange<Self>) -> Self { min(max(self, range.lowerBound), range.upperBound) }
}
