public import Switchyard

/// Keepalive pings (gRPC's A8, "client-side keepalive"): after ``time`` without
/// anything read from the connection, a PING is sent; if nothing is read within
/// ``timeout`` after it (its ack, or any other frame), the connection is taken for dead
/// and closed, and its calls end `unavailable`. This is how a path that went dead with
/// no data in flight is found: a write would have shown nothing.
///
/// Off by default (`time` nil), as in gRPC. A server must permit pings this often
/// (``KeepaliveEnforcement``): gRPC servers by default allow one every 5 minutes, and
/// only while a call is open; more often, they close the connection with GOAWAY
/// `ENHANCE_YOUR_CALM` and debug data `too_many_pings`, after which the channel doubles
/// its ``time``.
public struct Keepalive: Sendable, Hashable {
    /// How long the connection may go without reading anything before a PING is sent;
    /// nil: no keepalive pings.
    public var time: Duration?
    /// How long to wait for something to be read after a PING before the connection is
    /// closed. Default 20 s.
    public var timeout: Duration
    /// Whether pings go out while no call is open. Default false.
    public var permitWithoutCalls: Bool

    public init(time: Duration? = nil, timeout: Duration = .seconds(20), permitWithoutCalls: Bool = false) {
        self.time = time
        self.timeout = timeout
        self.permitWithoutCalls = permitWithoutCalls
    }

    /// Checks the values.
    /// - Throws: `invalidArgument`, reason `invalid option`, for a `time` or `timeout`
    ///   that is not positive.
    public func validate() throws(TransportError) {
        if let time, time <= .zero {
            throw TransportError(code: .invalidArgument, reason: .invalidOption, message: "invalid keepalive time \(time) (it must be positive; nil for none)")
        }
        guard timeout > .zero else {
            throw TransportError(code: .invalidArgument, reason: .invalidOption, message: "invalid keepalive timeout \(timeout) (it must be positive)")
        }
    }
}

/// The sending side of keepalive on one connection, without clocks or I/O: the driver
/// tells it what was read and when its timer fired, and does what it answers.
package struct KeepalivePinger: Sendable {
    package enum Action: Sendable, Hashable {
        /// Nothing to do now; look again at `until` (nil: no timer needed).
        case wait(until: ContinuousClock.Instant?)
        /// Send a PING now, then look again at `until` (its timeout).
        case sendPing(until: ContinuousClock.Instant)
        /// Nothing was read within the timeout after a PING: the connection is dead.
        case closeConnection(silentFor: Duration)
    }

    private(set) var keepalive: Keepalive
    private var lastRead: ContinuousClock.Instant
    /// When the outstanding PING went out, if one is outstanding.
    private var pingSentAt: ContinuousClock.Instant?

    package init(_ keepalive: Keepalive, now: ContinuousClock.Instant) {
        self.keepalive = keepalive
        self.lastRead = now
    }

    /// Something was read (any frame: a ping's ack counts, as does data).
    package mutating func didRead(now: ContinuousClock.Instant) {
        lastRead = now
        pingSentAt = nil
    }

    /// The server said `too_many_pings`: ping half as often from now on (gRPC's rule).
    package mutating func peerSaidTooManyPings() {
        if let time = keepalive.time { keepalive.time = time * 2 }
    }

    /// What to do at `now`, with `openCalls` calls on the connection.
    package mutating func check(now: ContinuousClock.Instant, openCalls: Int) -> Action {
        guard let time = keepalive.time else { return .wait(until: nil) }
        if let pingSentAt {
            let deadline = pingSentAt + keepalive.timeout
            return now >= deadline ? .closeConnection(silentFor: now - lastRead) : .wait(until: deadline)
        }
        let due = lastRead + time
        guard now >= due else { return .wait(until: due) }
        guard openCalls > 0 || keepalive.permitWithoutCalls else {
            // Nothing to keep alive: look again a whole period later (a call that opens
            // meanwhile is checked then, as gRPC does).
            return .wait(until: now + time)
        }
        pingSentAt = now
        return .sendPing(until: now + keepalive.timeout)
    }
}
