import Synchronization
import Switchyard
import SwitchyardHPACK
import SwitchyardHTTP2

/// A channel's HTTP/2 connection: every call of the channel is a stream on it, until it
/// breaks, goes away (GOAWAY) or the network under it changes.
///
/// With the channel's keepalive (``ChannelConfiguration/keepalive``), the connection
/// pings when it has read nothing for the keepalive time (``ConnectionKeepalive``), and
/// closes when a PING goes unanswered: its calls end `unavailable`, reason `stalled`.
/// A GOAWAY `ENHANCE_YOUR_CALM` with `too_many_pings` doubles the channel's keepalive
/// time for its next connections (``ChannelKeepalive``).
///
/// Calls above the server's stream limit (`SETTINGS_MAX_CONCURRENT_STREAMS`) wait, in
/// order, and open as streams end; at most ``maximumWaitingStreams`` wait, and a call
/// beyond that ends at once with `resourceExhausted`. When the connection goes away or
/// breaks, the waiting calls end `unavailable`: they never reached the server.
///
/// Safety of `@unchecked Sendable`: `waiting` is confined to the connection's loop; the
/// state other threads read is in a `Mutex`.
final class ChannelConnection: H2ConnectionDelegate, @unchecked Sendable {
    let h2: H2Connection
    let maximumWaitingStreams: Int
    /// Runs on the loop when the connection can take no new call: once when it goes away
    /// (GOAWAY, `closed` false) and once when it closes (`closed` true; the only call if
    /// it closes without GOAWAY).
    private let onUnusable: @Sendable (ChannelConnection, _ closed: Bool) -> Void

    private enum Phase { case open, goingAway, closed }
    private let phase = Mutex(Phase.open)
    private var unusableReported: Phase?
    /// Why the connection can take no new call (on the loop): what a call that comes
    /// too late hears.
    private var endError: TransportError?
    /// Streams waiting for the server's limit, oldest first.
    private var waiting: [CallStreamConnection] = []
    private var waitingHead = 0
    /// The channel's keepalive, shared by its connections (nil: none).
    private let channelKeepalive: ChannelKeepalive?
    /// This connection's pings, from ``start()`` while a keepalive time is set.
    private var keepalive: ConnectionKeepalive?

    init(
        connection: any Connection, configuration: H2Configuration, maximumWaitingStreams: Int,
        keepalive: ChannelKeepalive? = nil, onUnusable: @escaping @Sendable (ChannelConnection, _ closed: Bool) -> Void
    ) {
        self.h2 = H2Connection(connection: connection, role: .client, configuration: configuration)
        self.maximumWaitingStreams = maximumWaitingStreams
        self.channelKeepalive = keepalive
        self.onUnusable = onUnusable
    }

    var eventLoop: any TransportEventLoop { h2.eventLoop }
    var localAddress: Endpoint { h2.connection.localAddress }

    /// Sends the preface and starts reading; on any thread.
    func start() {
        let work: @Sendable () -> Void = {
            self.h2.start(delegate: self)
            self.startKeepalive()
        }
        if eventLoop.inEventLoop { work() } else { eventLoop.execute(work) }
    }

    /// On the loop: pings, if the channel has a keepalive time.
    private func startKeepalive() {
        guard let settings = channelKeepalive?.keepalive, settings.time != nil, unusableReported == nil else { return }
        let keepalive = ConnectionKeepalive(h2: h2, keepalive: settings) { [unowned self] in
            openStreams + waiting.count - waitingHead
        } onDead: { [unowned self] error in
            h2.close(with: error)
        }
        self.keepalive = keepalive
        keepalive.start()
    }

    /// The time between this connection's keepalive pings (nil: none); on the loop.
    var keepaliveTime: Duration? { keepalive?.time }

    /// Whether a new call may use this connection.
    var isUsable: Bool { phase.withLock { $0 == .open } }

    /// On the loop: whether a stream may open now, with no call waiting before it.
    var mayOpenNow: Bool { waitingHead == waiting.count && h2.canOpenStream }

    /// On the loop: `stream` waits for the server's limit; the refusal if it cannot.
    func wait(_ stream: CallStreamConnection) -> TransportError? {
        guard phase.withLock({ $0 == .open }) else {
            return endError ?? TransportError(code: .unavailable, reason: .closed, message: "the channel's HTTP/2 connection is going away")
        }
        guard waiting.count - waitingHead < maximumWaitingStreams else {
            return TransportError(
                code: .resourceExhausted, reason: .streamRefused,
                message: "\(maximumWaitingStreams) calls already wait for the server's stream limit on this connection")
        }
        waiting.append(stream)
        return nil
    }

    /// On the loop: streams ended or the limit rose; open what may.
    private func openWaiting() {
        while waitingHead < waiting.count, h2.canOpenStream {
            let next = waiting[waitingHead]
            waitingHead += 1
            next.openWaitingStream(refusal: nil)
        }
        compactWaiting()
    }

    private func compactWaiting() {
        if waitingHead == waiting.count {
            waiting.removeAll(keepingCapacity: true)
            waitingHead = 0
        } else if waitingHead > 64 && waitingHead * 2 > waiting.count {
            waiting.removeFirst(waitingHead)
            waitingHead = 0
        }
    }

    /// On the loop: the calls waiting for the server's stream limit will not open here.
    /// With `retryable` (a GOAWAY: the connection is going away, not broken) they never
    /// left the client and may start again on the channel's next connection
    /// (TransparentRetry.swift); a broken connection ends them with it.
    private func failWaiting(_ error: TransportError, retryable: Bool = false) {
        let failed = waiting[waitingHead...]
        waiting = []
        waitingHead = 0
        for stream in failed { stream.openWaitingStream(refusal: error, retryable: retryable) }
    }

    /// Streams open on this connection (on the loop).
    private var openStreams = 0
    /// The channel is gone: close once the last call ended.
    private var closesWhenIdle = false

    /// A stream of this connection opened.
    func streamOpened() { openStreams += 1 }

    /// A stream of this connection ended: one waiting may take its place.
    func streamEnded() {
        openStreams -= 1
        if waitingHead < waiting.count { openWaiting() }
        closeIfIdleAndOrphaned()
    }

    /// The channel was let go of while calls may still run on this connection: it closes
    /// once they ended (at once if none is open).
    func closeWhenIdle() {
        let work: @Sendable () -> Void = {
            self.closesWhenIdle = true
            self.closeIfIdleAndOrphaned()
        }
        if eventLoop.inEventLoop { work() } else { eventLoop.execute(work) }
    }

    private func closeIfIdleAndOrphaned() {
        guard closesWhenIdle, openStreams == 0, waitingHead == waiting.count else { return }
        h2.close(with: nil)
    }

    /// Closes the connection (the network under it changed, or the channel closed).
    func close(with error: TransportError?) {
        let work: @Sendable () -> Void = { self.h2.close(with: error) }
        if eventLoop.inEventLoop { work() } else { eventLoop.execute(work) }
    }

    private func becameUnusable(_ next: Phase) {
        phase.withLock { if $0 == .open || next == .closed { $0 = next } }
        guard unusableReported != .closed, unusableReported != next else { return }
        unusableReported = next
        onUnusable(self, next == .closed)
    }

    // MARK: H2ConnectionDelegate

    func h2Connection(_ connection: H2Connection, didOpen stream: H2StreamID, headers: [HPACKField], endStream: Bool) {
        // A server does not open streams on a gRPC client (no push): refuse it.
        connection.resetStream(stream, code: .refusedStream)
    }

    func h2Connection(_ connection: H2Connection, didReceiveGoAway lastStreamID: H2StreamID, code: H2ErrorCode, debugData: [UInt8]) {
        let error = TransportError(code: .unavailable, reason: .closed, message: "the server is going away (GOAWAY \(code)) before the call's stream opened")
        endError = error
        if code == .enhanceYourCalm, debugData == KeepaliveEnforcement.tooManyPings, let keepalive, let time = keepalive.time {
            // gRPC's A8: the server found the pings too frequent; ping half as often.
            channelKeepalive?.peerSaidTooManyPings(toConnectionPingingEvery: time)
            keepalive.peerSaidTooManyPings()
        }
        becameUnusable(.goingAway)
        failWaiting(error, retryable: true)
    }

    func h2Connection(_ connection: H2Connection, didReceivePing payload: UInt64) {}

    func h2Connection(_ connection: H2Connection, didAcknowledgePing payload: UInt64) {
        keepalive?.pingAcknowledged(payload)
    }

    func h2ConnectionSettingsChanged(_ connection: H2Connection, settings: H2Settings) {
        openWaiting()
    }

    func h2Connection(_ connection: H2Connection, didCloseWith error: TransportError?) {
        let ended = error ?? TransportError(code: .unavailable, reason: .closed, message: "the channel's HTTP/2 connection closed before the call's stream opened")
        endError = ended
        keepalive?.stop()
        keepalive = nil
        becameUnusable(.closed)
        failWaiting(ended)
    }
}
