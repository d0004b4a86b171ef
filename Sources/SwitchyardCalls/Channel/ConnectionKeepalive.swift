import Switchyard
import SwitchyardHTTP2

/// Keepalive pings on one HTTP/2 connection (``Keepalive``, gRPC's A8): a
/// ``KeepalivePinger`` driven by a ``ConnectionTimer`` on the connection's loop.
///
/// Reads cost nothing here: `H2Connection` notes when it last read, and the timer
/// hands that to the pinger when it fires, once per keepalive period at most. With
/// nothing read for `time`, a PING goes out; with nothing read within `timeout` after
/// it (its ACK counts, as does any other frame), the connection is dead: `onDead` runs,
/// with the error to close it with (`unavailable`, reason `stalled`). The ACK also
/// re-arms the timer at once for `time` after it, so the pings of a healthy idle
/// connection are `time` apart whatever the timeout.
///
/// Safety of `@unchecked Sendable`: confined to the connection's loop.
final class ConnectionKeepalive: @unchecked Sendable {
    /// The payload of keepalive PINGs ("keepaliv"); its ACK is read like any frame.
    static let pingPayload: UInt64 = 0x6b65_6570_616c_6976

    private let h2: H2Connection
    private var pinger: KeepalivePinger
    /// The last read the pinger was told of.
    private var readNoted: ContinuousClock.Instant
    private let openCalls: () -> Int
    private let onDead: (TransportError) -> Void
    private var timer: ConnectionTimer?
    private var stopped = false

    /// Keepalive on `h2` with `keepalive` (whose `time` is set); `openCalls` counts the
    /// calls on the connection, `onDead` closes it. Call ``start()`` on the loop.
    init(h2: H2Connection, keepalive: Keepalive, openCalls: @escaping () -> Int, onDead: @escaping (TransportError) -> Void) {
        self.h2 = h2
        self.readNoted = h2.lastReadAt
        self.pinger = KeepalivePinger(keepalive, now: h2.lastReadAt)
        self.openCalls = openCalls
        self.onDead = onDead
    }

    /// The time between pings now (doubled by ``peerSaidTooManyPings()``).
    var time: Duration? { pinger.keepalive.time }

    /// Starts the timer. On the loop.
    func start() {
        timer = ConnectionTimer(on: h2.eventLoop) { [weak self] in self?.check() }
        check()
    }

    /// The connection closed: no more pings. On the loop.
    func stop() {
        stopped = true
        timer?.cancel()
        timer = nil
    }

    /// A PING's ACK came: if it was this keepalive's, the next ping is due `time` after
    /// it, not when the timer set for the timeout fires. On the loop.
    func pingAcknowledged(_ payload: UInt64) {
        guard payload == Self.pingPayload else { return }
        check()
    }

    /// The peer said `too_many_pings`: ping half as often on this connection.
    func peerSaidTooManyPings() {
        pinger.peerSaidTooManyPings()
    }

    private func check() {
        guard !stopped else { return }
        let lastRead = h2.lastReadAt
        if lastRead > readNoted {
            readNoted = lastRead
            pinger.didRead(now: lastRead)
        }
        let now = h2.clock.now
        switch pinger.check(now: now, openCalls: openCalls()) {
        case .wait(let until):
            if let until { timer?.arm(at: until) }
        case .sendPing(let until):
            h2.sendPing(Self.pingPayload)
            timer?.arm(at: until)
        case .closeConnection(let silentFor):
            stop()
            onDead(TransportError(
                code: .unavailable, reason: .stalled,
                message: "keepalive: no answer to a PING within \(pinger.keepalive.timeout) (nothing read for \(silentFor)); the path to the peer is taken for dead"))
        }
    }
}
