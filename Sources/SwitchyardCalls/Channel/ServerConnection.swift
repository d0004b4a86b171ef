import Synchronization
import Switchyard
import SwitchyardHPACK
import SwitchyardHTTP2

/// One client's HTTP/2 connection to a ``CallServer``: each stream the client opens is a
/// call, handed to the server's `makeCall`.
///
/// A request that is not a gRPC call the server can read (a `content-type` that is not
/// gRPC's, a `:method` other than POST, a malformed `grpc-timeout`, an encoding it does
/// not read) is answered at once, before any handler, as gRPC's PROTOCOL-HTTP2 says
/// (``GRPCRequestRejection``), and the connection goes on. A request with a
/// `grpc-timeout` has a deadline from the moment its headers arrived (ServerDeadline.swift).
///
/// The server's ``CallServerConfiguration`` applies to each connection:
/// - Keepalive enforcement: each PING from the client goes through ``PingStrikes``
///   (forgiven once the server sent HEADERS or DATA since the previous one); past the
///   strikes the connection ends with GOAWAY `ENHANCE_YOUR_CALM`, `too_many_pings`.
/// - The server's own keepalive pings (``ConnectionKeepalive``), if configured.
/// - Maximum idle time and age (``ServerConnectionLifetime``): a graceful GOAWAY, and a
///   close once the grace is over.
///
/// Safety of `@unchecked Sendable`: the delegate runs on the connection's loop; what
/// other threads touch goes through ``H2Connection``'s hops or the `Mutex`.
final class ServerConnection: H2ConnectionDelegate, @unchecked Sendable {
    let h2: H2Connection
    /// Makes the call for a stream (the server's bookkeeping and handler); on the loop.
    private let makeCall: @Sendable (CallStreamConnection) -> Void
    private let onClose: @Sendable (ServerConnection) -> Void
    private let settings: CallServerConfiguration
    private let pingTimeout: Duration

    // On the loop:
    private var strikes: PingStrikes
    /// `H2Connection/headersOrDataFramesSent` when the last PING came.
    private var framesSentAtLastPing: UInt64 = 0
    private var keepalive: ConnectionKeepalive?
    private var lifetime: ServerConnectionLifetime?
    private var lifetimeTimer: ConnectionTimer?
    private var closed = false

    init(
        connection: any Connection, configuration: H2Configuration, settings: CallServerConfiguration = CallServerConfiguration(),
        makeCall: @escaping @Sendable (CallStreamConnection) -> Void,
        onClose: @escaping @Sendable (ServerConnection) -> Void
    ) {
        self.h2 = H2Connection(connection: connection, role: .server, configuration: configuration)
        self.settings = settings
        self.pingTimeout = configuration.gracefulShutdownPingTimeout
        self.strikes = PingStrikes(settings.keepaliveEnforcement)
        self.makeCall = makeCall
        self.onClose = onClose
    }

    func start() {
        onLoop {
            self.h2.start(delegate: self)
            guard !self.closed else { return }
            self.startKeepalive()
            self.startLifetime()
        }
    }

    /// On the loop: the server's own pings, if configured.
    private func startKeepalive() {
        guard let settings = settings.keepalive, settings.time != nil else { return }
        let keepalive = ConnectionKeepalive(h2: h2, keepalive: settings) { [unowned self] in
            h2.openStreamCount
        } onDead: { [unowned self] error in
            h2.close(with: error)
        }
        self.keepalive = keepalive
        keepalive.start()
    }

    /// On the loop: the maximum idle time and age, if configured.
    private func startLifetime() {
        // A9: jitter of up to 10 % either way, so that connections made together do
        // not all go away together.
        let age = settings.maximumConnectionAge.map { $0 * h2.clock.random(in: 0.9...1.1) }
        let lifetime = ServerConnectionLifetime(
            maximumIdle: settings.maximumConnectionIdle, maximumAge: age, grace: settings.maximumConnectionAgeGrace,
            pingTimeout: pingTimeout, opened: h2.clock.now)
        guard lifetime.isActive else { return }
        self.lifetime = lifetime
        lifetimeTimer = ConnectionTimer(on: h2.eventLoop) { [weak self] in self?.checkLifetime() }
        checkLifetime()
    }

    private func checkLifetime() {
        guard !closed, var lifetime else { return }
        let action = lifetime.check(now: h2.clock.now, idleSince: h2.idleSince)
        self.lifetime = lifetime
        let next: ContinuousClock.Instant?
        switch action {
        case .wait(let until):
            next = until
        case .goAway(_, let until), .finishGoAway(let until):
            // Graceful: open calls go on; the connection closes once none is left. A
            // second call ends the PING round trip if it timed out.
            next = until
            h2.beginGracefulShutdown()
        case .close:
            next = nil
            h2.close(with: TransportError(
                code: .unavailable, reason: .closed,
                message: "the connection's maximum age grace (\(settings.maximumConnectionAgeGrace ?? .zero)) passed after its GOAWAY"))
        }
        if let next, !closed { lifetimeTimer?.arm(at: next) }
    }

    /// GOAWAY: calls open go on, new streams are refused; closes once none is left.
    func beginGracefulShutdown() {
        onLoop { self.h2.beginGracefulShutdown() }
    }

    /// Closes now: every call on it ends with `error`.
    func close(with error: TransportError) {
        onLoop { self.h2.close(with: error) }
    }

    private func onLoop(_ work: @escaping @Sendable () -> Void) {
        if h2.eventLoop.inEventLoop { work() } else { h2.eventLoop.execute(work) }
    }

    // MARK: H2ConnectionDelegate

    func h2Connection(_ connection: H2Connection, didOpen stream: H2StreamID, headers: [HPACKField], endStream: Bool) {
        let request: GRPCRequestHead
        do {
            request = try GRPCRequestHead(parsing: headers)
        } catch {
            try? connection.sendHeaders(stream, error.response, endStream: true)
            if !endStream { connection.resetStream(stream, code: .noError) }
            return
        }
        let call = CallStreamConnection(
            server: connection, stream: stream, method: CallStreamConnection.method(forPath: request.path),
            metadata: request.metadata, endStream: endStream, deadline: CallDeadline(server: request.timeout, clock: h2.clock),
            requestEncoding: request.encoding,
            responseEncoding: request.responseEncoding(preferring: settings.responseCompression.map(\.encoding)))
        makeCall(call)
    }

    func h2Connection(_ connection: H2Connection, didReceiveGoAway lastStreamID: H2StreamID, code: H2ErrorCode, debugData: [UInt8]) {}

    func h2Connection(_ connection: H2Connection, didReceivePing payload: UInt64) {
        let sent = connection.headersOrDataFramesSent
        if sent != framesSentAtLastPing {
            framesSentAtLastPing = sent
            strikes.didSendHeadersOrData()
        }
        guard strikes.pingReceived(now: h2.clock.now, openCalls: connection.openStreamCount) else { return }
        // gRPC's A8: the debug data gRPC clients recognise, and back off on.
        connection.abort(.enhanceYourCalm, message: String(decoding: KeepaliveEnforcement.tooManyPings, as: UTF8.self))
    }

    func h2Connection(_ connection: H2Connection, didAcknowledgePing payload: UInt64) {
        keepalive?.pingAcknowledged(payload)
    }

    func h2ConnectionSettingsChanged(_ connection: H2Connection, settings: H2Settings) {}

    func h2Connection(_ connection: H2Connection, didCloseWith error: TransportError?) {
        closed = true
        keepalive?.stop()
        keepalive = nil
        lifetimeTimer?.cancel()
        lifetimeTimer = nil
        onClose(self)
    }
}
