import SwitchyardHPACK

@testable import SwitchyardHTTP2

/// A client and a server state machine wired to each other: ``exchange()`` moves each
/// side's outbound frames into the other's `receive` until neither has anything to send.
/// Time is virtual (``advance(by:)``).
struct H2ConnectionPair {
    var client: H2ConnectionStateMachine
    var server: H2ConnectionStateMachine
    /// Everything each side was told, in order, since the last ``takeClientEvents()`` /
    /// ``takeServerEvents()``.
    var clientEvents: [H2Event] = []
    var serverEvents: [H2Event] = []
    /// Every frame each side wrote, in order.
    var clientWrote: [H2Outbound] = []
    var serverWrote: [H2Outbound] = []
    var now = ContinuousClock.now

    init(client: H2Configuration = H2Configuration(), server: H2Configuration = H2Configuration()) {
        self.client = H2ConnectionStateMachine(role: .client, configuration: client)
        self.server = H2ConnectionStateMachine(role: .server, configuration: server)
        exchange()
    }

    mutating func advance(by duration: Duration) { now = now.advanced(by: duration) }

    /// Shuttles frames both ways until both sides are quiet.
    mutating func exchange() {
        var frames: [H2Outbound] = []
        while true {
            frames.removeAll()
            client.takeOutbound(into: &frames)
            client.takeEvents(into: &clientEvents)
            clientWrote += frames
            for frame in frames { server.receive(frame.frame, now: now, into: &serverEvents) }
            let clientSent = frames.count
            frames.removeAll()
            server.takeOutbound(into: &frames)
            server.takeEvents(into: &serverEvents)
            serverWrote += frames
            for frame in frames { client.receive(frame.frame, now: now, into: &clientEvents) }
            if clientSent == 0 && frames.isEmpty { break }
        }
        client.takeEvents(into: &clientEvents)
        server.takeEvents(into: &serverEvents)
    }

    mutating func takeClientEvents() -> [H2Event] {
        defer { clientEvents.removeAll() }
        return clientEvents
    }

    mutating func takeServerEvents() -> [H2Event] {
        defer { serverEvents.removeAll() }
        return serverEvents
    }
}

/// One state machine under test and a scripted peer: the test writes the peer's frames
/// by hand (``send(_:)``), with a peer-side HPACK encoder for header blocks.
struct H2ScriptedPeer {
    var machine: H2ConnectionStateMachine
    var encoder = HPACKEncoder()
    var now = ContinuousClock.now
    var events: [H2Event] = []

    /// The machine with the peer's (empty) SETTINGS received and its own acknowledged, and
    /// its first outbound frames taken.
    init(_ role: H2Role, _ configuration: H2Configuration = H2Configuration(), peerSettings: [H2Setting] = []) {
        machine = H2ConnectionStateMachine(role: role, configuration: configuration)
        send(.settings(peerSettings))
        send(.settingsAck)
        _ = takeFrames()
        events.removeAll()
    }

    mutating func advance(by duration: Duration) { now = now.advanced(by: duration) }

    /// Feeds a frame and returns the events it caused.
    @discardableResult
    mutating func send(_ frame: H2Frame) -> [H2Event] {
        var caused: [H2Event] = []
        machine.receive(frame, now: now, into: &caused)
        events += caused
        return caused
    }

    /// The machine's outbound frames.
    mutating func takeFrames() -> [H2Frame] {
        var outbound: [H2Outbound] = []
        machine.takeOutbound(into: &outbound)
        machine.takeEvents(into: &events)
        return outbound.map(\.frame)
    }

    func block(_ fields: [HPACKField]) -> [UInt8] {
        var copy = encoder
        return copy.encode(fields)
    }

    /// Encodes with the peer's encoder (its table moves on, as a real peer's).
    mutating func encode(_ fields: [HPACKField]) -> [UInt8] { encoder.encode(fields) }

    /// A request's HEADERS frame.
    mutating func request(_ id: UInt32, endStream: Bool = false, extra: [HPACKField] = []) -> H2Frame {
        .headers(H2StreamID(id), headerBlock: encode(H2Fields.request + extra), endStream: endStream, endHeaders: true)
    }

    /// The connection error the machine reported, if any.
    var connectionError: H2ProtocolViolation? {
        for case .connectionError(let violation) in events { return violation }
        return nil
    }
}

enum H2Fields {
    static let request = [
        HPACKField(":method", "POST"), HPACKField(":scheme", "http"), HPACKField(":path", "/echo.Echo/Get"),
        HPACKField(":authority", "localhost"), HPACKField("content-type", "application/grpc"), HPACKField("te", "trailers"),
    ]
    static let response = [HPACKField(":status", "200"), HPACKField("content-type", "application/grpc")]
    static let trailers = [HPACKField("grpc-status", "0"), HPACKField("grpc-message", "OK")]
}

extension [H2Frame] {
    /// The GOAWAY among the frames, if any.
    var goAway: (lastStreamID: H2StreamID, code: H2ErrorCode, debugData: [UInt8])? {
        for case .goAway(let last, let code, let debugData) in self { return (last, code, debugData) }
        return nil
    }

    /// The RST_STREAM codes among the frames, by stream.
    var resets: [H2StreamID: H2ErrorCode] {
        var resets: [H2StreamID: H2ErrorCode] = [:]
        for case .rstStream(let id, let code) in self { resets[id] = code }
        return resets
    }
}
