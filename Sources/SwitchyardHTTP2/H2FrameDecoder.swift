/// Cuts the bytes a peer sends into HTTP/2 frames (RFC 9113 section 4) and checks each
/// frame on its own, as sections 4.2 and 6 require.
///
/// Feed it what the connection reads, in any pieces (`append(_:)`),
/// then call ``nextFrame()`` until it returns nil: nil means a whole frame has not arrived
/// yet. Bytes are kept behind a read index and compacted now and then, so many small frames
/// in one read cost time in proportion to their bytes, not their count times the buffer.
///
/// What it checks, and what it throws (``H2ProtocolViolation``, a connection error when its
/// `stream` is nil):
/// - server role: the client's connection preface (section 3.4) comes first, checked as
///   its bytes arrive; anything else is a connection `PROTOCOL_ERROR` whose message says the
///   peer does not speak HTTP/2 (and names the HTTP/1 method when it sent an HTTP/1 request,
///   as soon as the method and the space after it have arrived);
/// - a frame longer than ``maxFrameSize`` is a connection `FRAME_SIZE_ERROR`, thrown from its
///   9-octet header, before its payload is buffered;
/// - DATA, HEADERS, PRIORITY, RST_STREAM, PUSH_PROMISE and CONTINUATION on stream 0, and
///   SETTINGS, PING and GOAWAY on another stream: connection `PROTOCOL_ERROR`;
/// - a frame too short for its fixed fields (the Pad Length octet of a padded frame, the
///   priority fields of HEADERS, the promised stream of PUSH_PROMISE, GOAWAY under 8
///   octets), RST_STREAM or WINDOW_UPDATE not 4 octets, PING not 8, SETTINGS not a multiple
///   of 6 or an ACK with a payload: connection `FRAME_SIZE_ERROR`;
/// - padding that does not fit in the frame (section 6.1: Pad Length at least the rest of
///   the payload): connection `PROTOCOL_ERROR`;
/// - SETTINGS values out of range (section 6.5.2): SETTINGS_ENABLE_PUSH other than 0 or 1, or
///   1 sent by a server (client role), and SETTINGS_MAX_FRAME_SIZE outside 16,384...16,777,215:
///   connection `PROTOCOL_ERROR`; SETTINGS_INITIAL_WINDOW_SIZE above 2^31-1: connection
///   `FLOW_CONTROL_ERROR`;
/// - PRIORITY not 5 octets: stream `FRAME_SIZE_ERROR`; PRIORITY making a stream depend on
///   itself: stream `PROTOCOL_ERROR`;
/// - HEADERS whose priority fields make the stream depend on itself: connection
///   `PROTOCOL_ERROR`. Section 5.3.1 of RFC 7540 calls it a stream error, but the frame
///   carries a header block that must reach the connection's HPACK decoder (and may be
///   followed by CONTINUATION frames): a stream error that swallowed the frame would put the
///   two HPACK tables out of step. Section 5.4 lets any stream error end the connection.
/// - WINDOW_UPDATE with an increment of 0: stream `PROTOCOL_ERROR` on a stream, connection
///   `PROTOCOL_ERROR` on stream 0.
///
/// What it leaves alone: unknown frame types become ``H2Frame/unknown(type:_:length:)``
/// (their payload skipped, not kept); unknown flags are ignored, so is the reserved bit of
/// every stream identifier (and of the WINDOW_UPDATE increment); unknown settings are kept
/// in the list for the caller to ignore; padding is stripped (``H2Frame`` says how much).
///
/// Not checked here, because they need the connection's state: that CONTINUATION frames
/// follow a HEADERS or PUSH_PROMISE without END_HEADERS, on its stream, and nothing else
/// comes in between (section 6.10); that the client's first frame after the preface, and
/// the server's first frame, is SETTINGS (section 3.4); stream states, flow-control
/// windows, header list sizes, and whether PUSH_PROMISE is allowed at all. That is the
/// connection state machine's part.
///
/// After an error: a stream error (`stream` not nil) consumed its frame, and the next call
/// decodes the frame after it. A connection error leaves the decoder failed: every later
/// ``nextFrame()`` throws the same violation again, and appended bytes are dropped; the
/// connection must send GOAWAY and close (section 5.4.1).
package struct H2FrameDecoder: Sendable {
    /// Which end of the connection this decoder reads for.
    package enum Role: Sendable, Hashable {
        /// Decodes what a server sends: frames from the start.
        case client
        /// Decodes what a client sends: the connection preface, then frames.
        case server
    }

    /// The role given at creation.
    package let role: Role

    /// The largest frame payload accepted: the SETTINGS_MAX_FRAME_SIZE this side announced
    /// (16,384 until it announces another), within 16,384...16,777,215. Raise it when the
    /// SETTINGS that announces a larger value is sent; lower it only once the peer has
    /// acknowledged that SETTINGS (section 6.5.3), or frames the peer sent in between fail.
    package var maxFrameSize: Int {
        didSet {
            precondition(
                Int(H2Settings.maxFrameSizeRange.lowerBound)...Int(H2Settings.maxFrameSizeRange.upperBound) ~= maxFrameSize,
                "SETTINGS_MAX_FRAME_SIZE \(maxFrameSize) is outside 16384...16777215")
        }
    }

    private var buffer: [UInt8] = []
    /// Where the unread bytes of `buffer` begin.
    private var readIndex = 0
    /// How many octets of the connection preface have been matched; nil once all have.
    private var prefaceMatched: Int?
    /// Client: the server's first frame, which must be SETTINGS, has not arrived.
    private var awaitingServerSettings: Bool
    /// The connection error thrown, if any: thrown again by every later call.
    private var failure: H2ProtocolViolation?

    /// Compaction moves the unread bytes to the front only past this many read bytes, and
    /// only when they are at least half the buffer: each byte moves O(1) times on average.
    private static let compactionThreshold = 4096

    /// - Parameters:
    ///   - role: `.server` expects the client's connection preface first.
    ///   - maxFrameSize: this side's SETTINGS_MAX_FRAME_SIZE, within 16,384...16,777,215.
    /// - Parameter expectsServerPreface: a client at the start of a connection: the first
    ///   frame must be the server's SETTINGS (RFC 9113, 3.4), and anything else is a peer
    ///   that does not speak HTTP/2 (``H2ProtocolViolation/peerIsNotHTTP2``).
    package init(role: Role, maxFrameSize: Int = 16_384, expectsServerPreface: Bool = false) {
        precondition(
            Int(H2Settings.maxFrameSizeRange.lowerBound)...Int(H2Settings.maxFrameSizeRange.upperBound) ~= maxFrameSize,
            "SETTINGS_MAX_FRAME_SIZE \(maxFrameSize) is outside 16384...16777215")
        self.role = role
        self.maxFrameSize = maxFrameSize
        self.prefaceMatched = role == .server ? 0 : nil
        self.awaitingServerSettings = role == .client && expectsServerPreface
    }

    /// The octets received and not yet decoded.
    package var bufferedByteCount: Int { buffer.count - readIndex }

    /// Adds bytes the peer sent. After a connection error they are dropped.
    package mutating func append(_ bytes: UnsafeRawBufferPointer) {
        guard failure == nil, !bytes.isEmpty else { return }
        compactBeforeAppending()
        buffer.append(contentsOf: bytes)
    }

    /// Adds bytes the peer sent. After a connection error they are dropped.
    package mutating func append(_ bytes: [UInt8]) {
        guard failure == nil, !bytes.isEmpty else { return }
        compactBeforeAppending()
        buffer.append(contentsOf: bytes)
    }

    private mutating func compactBeforeAppending() {
        if readIndex == buffer.count {
            buffer.removeAll(keepingCapacity: true)
            readIndex = 0
        } else if readIndex >= Self.compactionThreshold && readIndex * 2 >= buffer.count {
            buffer.removeSubrange(0..<readIndex)
            readIndex = 0
        }
    }

    /// The next whole frame, or nil if it has not all arrived.
    ///
    /// - Throws: an ``H2ProtocolViolation`` with the code and kind the RFC gives (the type's
    ///   comment lists them). After a stream error the frame is consumed and decoding goes
    ///   on; after a connection error every call throws it again.
    package mutating func nextFrame() throws(H2ProtocolViolation) -> H2Frame? {
        if let failure { throw failure }
        do {
            return try decodeNextFrame()
        } catch {
            if error.isConnectionError {
                failure = error
                buffer = []
                readIndex = 0
            }
            throw error
        }
    }

    private mutating func decodeNextFrame() throws(H2ProtocolViolation) -> H2Frame? {
        if prefaceMatched != nil {
            guard try matchPreface() else { return nil }
        }
        guard bufferedByteCount >= 9 else { return nil }
        let header = FrameHeader(buffer, at: readIndex)
        if awaitingServerSettings {
            // A server's preface is a SETTINGS frame (RFC 9113, 3.4): anything else is a
            // peer that does not speak HTTP/2, told apart from a broken frame.
            guard header.type == 0x4 else {
                let first = buffer[readIndex..<readIndex + 9].map { $0 >= 0x20 && $0 < 0x7F ? String(UnicodeScalar($0)) : "." }.joined()
                var violation = H2ProtocolViolation(
                    connection: .protocolError,
                    "the server's first frame is not SETTINGS (its first bytes read \"\(first)\"): it does not speak HTTP/2")
                violation.peerIsNotHTTP2 = true
                throw violation
            }
            awaitingServerSettings = false
        }
        guard header.length <= maxFrameSize else {
            throw H2ProtocolViolation(
                connection: .frameSizeError,
                "a \(header.typeName) frame of \(header.length) octets is longer than the SETTINGS_MAX_FRAME_SIZE of \(maxFrameSize)"
            )
        }
        try header.checkBeforePayload()
        guard bufferedByteCount >= 9 + header.length else { return nil }
        let payload = readIndex + 9..<readIndex + 9 + header.length
        // Consumed before its payload is checked: a stream error leaves the decoder at the
        // next frame.
        readIndex = payload.upperBound
        return try header.decodePayload(buffer[payload], role: role)
    }

    /// Matches the unread bytes against the connection preface, as far as they go.
    /// - Returns: true once the whole preface has arrived (and been consumed).
    private mutating func matchPreface() throws(H2ProtocolViolation) -> Bool {
        guard var matched = prefaceMatched else { return true }
        while matched < h2ConnectionPreface.count && readIndex < buffer.count {
            guard buffer[readIndex] == h2ConnectionPreface[matched] else {
                // What the client sent from its first byte on: the matched part of the
                // preface, then what is still buffered.
                let sent = Array(h2ConnectionPreface[0..<matched]) + buffer[readIndex...]
                guard let message = Self.notAPrefaceMessage(sent) else {
                    // Perhaps an HTTP/1 method: wait for the space that ends it.
                    prefaceMatched = matched
                    return false
                }
                throw H2ProtocolViolation(connection: .protocolError, message)
            }
            matched += 1
            readIndex += 1
        }
        guard matched == h2ConnectionPreface.count else {
            prefaceMatched = matched
            return false
        }
        prefaceMatched = nil
        return true
    }

    /// The methods a client speaking HTTP/1 to this server would begin with.
    private static let http1Methods = ["GET", "POST", "PUT", "HEAD", "DELETE", "OPTIONS", "PATCH", "CONNECT", "TRACE"]
        .map { Array("\($0) ".utf8) }

    /// The message for a client whose first bytes `sent` are not the preface, or nil while
    /// they could still be the start of an HTTP/1 method and its space.
    private static func notAPrefaceMessage(_ sent: [UInt8]) -> String? {
        for method in http1Methods {
            if sent.starts(with: method) {
                let line = sent.prefix { $0 != UInt8(ascii: "\r") && $0 != UInt8(ascii: "\n") }.prefix(64)
                let printable = line.allSatisfy { (0x20..<0x7f).contains($0) }
                let shown = printable ? String(decoding: line, as: UTF8.self) : String(decoding: method, as: UTF8.self)
                return "the client's first bytes do not look like HTTP/2: it sent an HTTP/1 request (\"\(shown)\"), "
                    + "not the connection preface"
            }
            if sent.count < method.count && method.starts(with: sent) { return nil }
        }
        let hex = sent.prefix(16).map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
        return "the client's first bytes do not look like HTTP/2: 0x\(hex)\(sent.count > 16 ? "..." : "") "
            + "is not the connection preface"
    }
}

/// The 9-octet header of a frame (section 4.1), and the checks of its payload.
private struct FrameHeader {
    let length: Int
    let type: UInt8
    let flags: UInt8
    let stream: H2StreamID

    static let data: UInt8 = 0x0
    static let headers: UInt8 = 0x1
    static let priority: UInt8 = 0x2
    static let rstStream: UInt8 = 0x3
    static let settings: UInt8 = 0x4
    static let pushPromise: UInt8 = 0x5
    static let ping: UInt8 = 0x6
    static let goAway: UInt8 = 0x7
    static let windowUpdate: UInt8 = 0x8
    static let continuation: UInt8 = 0x9

    static let endStream: UInt8 = 0x1
    static let ack: UInt8 = 0x1
    static let endHeaders: UInt8 = 0x4
    static let padded: UInt8 = 0x8
    static let priorityFlag: UInt8 = 0x20

    init(_ bytes: [UInt8], at index: Int) {
        length = Int(bytes[index]) << 16 | Int(bytes[index + 1]) << 8 | Int(bytes[index + 2])
        type = bytes[index + 3]
        flags = bytes[index + 4]
        stream = H2StreamID(readUInt32(bytes, at: index + 5))
    }

    var typeName: String {
        switch type {
        case Self.data: "DATA"
        case Self.headers: "HEADERS"
        case Self.priority: "PRIORITY"
        case Self.rstStream: "RST_STREAM"
        case Self.settings: "SETTINGS"
        case Self.pushPromise: "PUSH_PROMISE"
        case Self.ping: "PING"
        case Self.goAway: "GOAWAY"
        case Self.windowUpdate: "WINDOW_UPDATE"
        case Self.continuation: "CONTINUATION"
        default: "type 0x\(String(type, radix: 16))"
        }
    }

    func has(_ flag: UInt8) -> Bool { flags & flag != 0 }

    private func connectionError(_ code: H2ErrorCode, _ message: String) -> H2ProtocolViolation {
        H2ProtocolViolation(connection: code, "\(typeName) on \(stream): \(message)")
    }

    /// The checks a connection error comes from that the header alone decides: thrown
    /// before the payload is waited for.
    func checkBeforePayload() throws(H2ProtocolViolation) {
        switch type {
        case Self.data, Self.headers, Self.priority, Self.rstStream, Self.pushPromise, Self.continuation:
            if stream.isConnection { throw connectionError(.protocolError, "this frame type must be on a stream") }
        case Self.settings, Self.ping, Self.goAway:
            if !stream.isConnection { throw connectionError(.protocolError, "this frame type must be on stream 0") }
        default:
            break
        }
        switch type {
        case Self.data:
            try checkPaddable(fixedLength: 0)
        case Self.headers:
            try checkPaddable(fixedLength: has(Self.priorityFlag) ? 5 : 0)
        case Self.pushPromise:
            try checkPaddable(fixedLength: 4)
        case Self.rstStream where length != 4:
            throw connectionError(.frameSizeError, "\(length) octets, not 4")
        case Self.settings where has(Self.ack) && length != 0:
            throw connectionError(.frameSizeError, "an acknowledgement with \(length) octets of payload")
        case Self.settings where length % 6 != 0:
            throw connectionError(.frameSizeError, "\(length) octets, not a multiple of 6")
        case Self.ping where length != 8:
            throw connectionError(.frameSizeError, "\(length) octets, not 8")
        case Self.goAway where length < 8:
            throw connectionError(.frameSizeError, "\(length) octets, fewer than 8")
        case Self.windowUpdate where length != 4:
            throw connectionError(.frameSizeError, "\(length) octets, not 4")
        default:
            break
        }
    }

    /// The Pad Length octet (when PADDED) and `fixedLength` octets of fields must fit.
    private func checkPaddable(fixedLength: Int) throws(H2ProtocolViolation) {
        let needed = (has(Self.padded) ? 1 : 0) + fixedLength
        if length < needed {
            throw connectionError(.frameSizeError, "\(length) octets, too short for its \(needed) octets of fixed fields")
        }
    }

    /// Strips the padding of a frame that may be padded, after `fixedLength` octets of
    /// fields that follow the Pad Length octet.
    /// - Returns: the fields and the content, and how many octets the padding took, the
    /// Pad Length octet included (so a frame padded with nothing still counts its one
    /// octet against flow control).
    private func unpad(_ payload: ArraySlice<UInt8>, fixedLength: Int) throws(H2ProtocolViolation) -> (
        fields: ArraySlice<UInt8>, content: ArraySlice<UInt8>, padding: Int
    ) {
        var start = payload.startIndex
        var padding = 0
        if has(Self.padded) {
            padding = Int(payload[start])
            start += 1
            if padding > payload.endIndex - start - fixedLength {
                throw connectionError(
                    .protocolError, "\(padding) octets of padding do not fit in a payload of \(payload.count) octets")
            }
        }
        let fields = payload[start..<start + fixedLength]
        return (fields, payload[(start + fixedLength)..<(payload.endIndex - padding)], has(Self.padded) ? padding + 1 : 0)
    }

    func decodePayload(_ payload: ArraySlice<UInt8>, role: H2FrameDecoder.Role) throws(H2ProtocolViolation) -> H2Frame {
        let start = payload.startIndex
        switch type {
        case Self.data:
            let (_, content, padding) = try unpad(payload, fixedLength: 0)
            return .data(stream, payload: Array(content)[...], endStream: has(Self.endStream), paddingLength: padding)

        case Self.headers:
            let hasPriority = has(Self.priorityFlag)
            let (fields, content, padding) = try unpad(payload, fixedLength: hasPriority ? 5 : 0)
            if hasPriority && H2StreamID(readUInt32(payload, at: fields.startIndex)) == stream {
                throw connectionError(.protocolError, "the stream depends on itself (its header block cannot be skipped)")
            }
            return .headers(
                stream, headerBlock: Array(content), endStream: has(Self.endStream), endHeaders: has(Self.endHeaders),
                paddingLength: padding)

        case Self.priority:
            guard payload.count == 5 else {
                throw H2ProtocolViolation(stream: stream, .frameSizeError, "PRIORITY of \(payload.count) octets, not 5")
            }
            if H2StreamID(readUInt32(payload, at: start)) == stream {
                throw H2ProtocolViolation(stream: stream, .protocolError, "PRIORITY makes the stream depend on itself")
            }
            return .priority(stream)

        case Self.rstStream:
            return .rstStream(stream, H2ErrorCode(readUInt32(payload, at: start)))

        case Self.settings:
            if has(Self.ack) { return .settingsAck }
            var settings: [H2Setting] = []
            settings.reserveCapacity(payload.count / 6)
            var index = start
            while index < payload.endIndex {
                let identifier = H2Setting.Identifier(UInt16(payload[index]) << 8 | UInt16(payload[index + 1]))
                let setting = H2Setting(identifier, readUInt32(payload, at: index + 2))
                try check(setting, role: role)
                settings.append(setting)
                index += 6
            }
            return .settings(settings)

        case Self.pushPromise:
            let (fields, content, _) = try unpad(payload, fixedLength: 4)
            return .pushPromise(
                stream, promised: H2StreamID(readUInt32(payload, at: fields.startIndex)), headerBlock: Array(content),
                endHeaders: has(Self.endHeaders))

        case Self.ping:
            let opaque = UInt64(readUInt32(payload, at: start)) << 32 | UInt64(readUInt32(payload, at: start + 4))
            return .ping(opaque, ack: has(Self.ack))

        case Self.goAway:
            return .goAway(
                lastStreamID: H2StreamID(readUInt32(payload, at: start)), H2ErrorCode(readUInt32(payload, at: start + 4)),
                debugData: Array(payload[(start + 8)...]))

        case Self.windowUpdate:
            let increment = readUInt32(payload, at: start) & 0x7fff_ffff
            if increment == 0 {
                if stream.isConnection { throw connectionError(.protocolError, "an increment of 0") }
                throw H2ProtocolViolation(stream: stream, .protocolError, "WINDOW_UPDATE with an increment of 0")
            }
            return .windowUpdate(stream, increment: increment)

        case Self.continuation:
            return .continuation(stream, headerBlock: Array(payload), endHeaders: has(Self.endHeaders))

        default:
            return .unknown(type: type, stream, length: length)
        }
    }

    /// The range checks of section 6.5.2.
    private func check(_ setting: H2Setting, role: H2FrameDecoder.Role) throws(H2ProtocolViolation) {
        switch setting.identifier {
        case .enablePush where setting.value > 1:
            throw connectionError(.protocolError, "SETTINGS_ENABLE_PUSH is \(setting.value), not 0 or 1")
        case .enablePush where setting.value == 1 && role == .client:
            throw connectionError(.protocolError, "a server set SETTINGS_ENABLE_PUSH to 1")
        case .initialWindowSize where setting.value > H2Settings.maxWindowSize:
            throw connectionError(.flowControlError, "SETTINGS_INITIAL_WINDOW_SIZE \(setting.value) is above 2^31-1")
        case .maxFrameSize where !H2Settings.maxFrameSizeRange.contains(setting.value):
            throw connectionError(.protocolError, "SETTINGS_MAX_FRAME_SIZE \(setting.value) is outside 16384...16777215")
        default:
            break
        }
    }
}

/// The big-endian 32-bit integer at `index`.
private func readUInt32<Bytes: RandomAccessCollection<UInt8>>(_ bytes: Bytes, at index: Int) -> UInt32 where Bytes.Index == Int {
    UInt32(bytes[index]) << 24 | UInt32(bytes[index + 1]) << 16 | UInt32(bytes[index + 2]) << 8 | UInt32(bytes[index + 3])
}
