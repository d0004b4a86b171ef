import Switchyard
import SwitchyardHPACK
import SwitchyardHTTP2

/// An HTTP/2 peer driven by hand over a raw connection, for the scenarios that send what
/// a correct peer never would: frames written in odd pieces, gRPC messages with bad
/// prefixes, header blocks a call cannot read.
///
/// The scenario builds the frames (``opening()``, ``headers(_:_:endStream:)``,
/// ``data(_:_:endStream:)``, ``message(_:flag:announcedLength:)``) and writes them
/// (``send(_:)``, ``sendInPieces(_:pieceLength:pauseWhile:)``, which wait for the peer's
/// flow-control windows before each DATA frame). What the peer sends back is read frame
/// by frame and kept per stream (``Stream``); the connection's housekeeping is done on the
/// way: SETTINGS and PING are acknowledged, WINDOW_UPDATE opens the send windows, and
/// every DATA frame received is given back at once as window.
///
/// Safety of `@unchecked Sendable`: one task drives a peer at a time. A scenario's steps
/// run one after the other, each awaited before the next; a step that timed out fails the
/// scenario, which uses the peer no more.
final class RawHTTP2Peer: @unchecked Sendable {
    /// What one stream carried from the peer.
    struct Stream: Sendable {
        /// The decoded header blocks, in order, and whether each ended the stream.
        var headerBlocks: [(fields: [HPACKField], endStream: Bool)] = []
        /// The payloads of its DATA frames, joined.
        var data: [UInt8] = []
        /// END_STREAM arrived.
        var ended = false
        /// RST_STREAM arrived, with this code.
        var reset: H2ErrorCode?
        /// Nothing more will come on it.
        var isOver: Bool { ended || reset != nil }

        /// The first value of `name` in header block `index`, as text.
        func value(_ name: String, inBlock index: Int) -> String? {
            guard index < headerBlocks.count else { return nil }
            return headerBlocks[index].fields.first { $0.name == Array(name.utf8) }
                .map { String(decoding: $0.value, as: UTF8.self) }
        }

        /// The gRPC messages in ``data``; nil if it does not end on a message's end.
        var messages: [[UInt8]]? {
            var messages: [[UInt8]] = []
            var index = 0
            while index < data.count {
                guard data.count - index >= 5 else { return nil }
                var length = 0
                for offset in 1...4 { length = length << 8 | Int(data[index + offset]) }
                guard data.count - index - 5 >= length else { return nil }
                messages.append(Array(data[(index + 5)..<(index + 5 + length)]))
                index += 5 + length
            }
            return messages
        }

        /// How the stream ended, for failure messages.
        var summary: String {
            let blocks = headerBlocks.map { block in
                "[" + block.fields.map(\.description).joined(separator: ", ") + (block.endStream ? "] END_STREAM" : "]")
            }
            return "header blocks \(blocks), \(data.count) bytes of DATA, \(ended ? "ended" : "not ended")"
                + (reset.map { ", reset \($0)" } ?? "")
        }
    }

    let connection: AsyncConnection
    private let isClient: Bool
    private var decoder: H2FrameDecoder
    private var encoder = HPACKEncoder()
    private var hpack = HPACKDecoder()
    /// A header block whose CONTINUATION frames are still to come.
    private var partialBlock: (stream: H2StreamID, block: [UInt8], endStream: Bool)?
    /// What this side may still send: the connection's window and each stream's.
    private var connectionSendWindow = 65_535
    private var peerInitialWindow = 65_535
    private var streamSendWindows: [UInt32: Int] = [:]

    /// Every stream the peer sent something on, by number.
    private(set) var streams: [UInt32: Stream] = [:]
    /// The peer's SETTINGS arrived (and were acknowledged).
    private(set) var receivedSettings = false
    /// The peer acknowledged this side's SETTINGS.
    private(set) var settingsAcknowledged = false
    /// GOAWAY from the peer, if it sent one.
    private(set) var goAway: (code: H2ErrorCode, debug: String)?
    /// The connection reached end of stream.
    private(set) var endOfStream = false

    /// `client`: this side sends the preface, and reads a server.
    init(_ connection: any Connection, client: Bool) {
        self.connection = AsyncConnection(connection)
        self.isClient = client
        self.decoder = H2FrameDecoder(role: client ? .client : .server)
    }

    // MARK: building frames

    /// A client's connection preface and an empty SETTINGS frame; a server's SETTINGS.
    func opening() -> [UInt8] {
        var bytes = isClient ? h2ConnectionPreface : []
        H2FrameEncoder.encode(.settings([]), into: &bytes)
        return bytes
    }

    /// A header block on `stream`, HPACK-encoded with this connection's table (so frames
    /// must be sent in the order they were built), split at 16,384 bytes.
    func headers(_ stream: UInt32, _ fields: [HPACKField], endStream: Bool) -> [UInt8] {
        var bytes: [UInt8] = []
        let block = encoder.encode(fields)
        H2FrameEncoder.encodeHeaderBlock(stream: H2StreamID(stream), block: block, endStream: endStream, maxFrameSize: 16_384, into: &bytes)
        return bytes
    }

    /// `payload` as DATA frames of at most `frameSize` bytes on `stream`.
    func data(_ stream: UInt32, _ payload: [UInt8], endStream: Bool, frameSize: Int = 16_384) -> [UInt8] {
        var bytes: [UInt8] = []
        H2FrameEncoder.encodeData(stream: H2StreamID(stream), payload: payload, endStream: endStream, maxFrameSize: frameSize, into: &bytes)
        return bytes
    }

    /// A gRPC request's header fields: POST to `path`, gRPC's content type, `te: trailers`,
    /// then `extra`.
    static func request(path: String, _ extra: [HPACKField] = []) -> [HPACKField] {
        [
            HPACKField(":method", "POST"), HPACKField(":scheme", "http"), HPACKField(":path", path),
            HPACKField("content-type", "application/grpc"), HPACKField("te", "trailers"),
        ] + extra
    }

    /// A server's response headers: 200 and gRPC's content type.
    static let responseHeaders = [HPACKField(":status", "200"), HPACKField("content-type", "application/grpc")]

    /// A gRPC message: the flag byte, a 4-byte big-endian length (the payload's, unless
    /// `announcedLength` says otherwise), the payload.
    static func message(_ payload: [UInt8], flag: UInt8 = 0, announcedLength: Int? = nil) -> [UInt8] {
        let length = announcedLength ?? payload.count
        return [
            flag, UInt8(truncatingIfNeeded: length >> 24), UInt8(truncatingIfNeeded: length >> 16),
            UInt8(truncatingIfNeeded: length >> 8), UInt8(truncatingIfNeeded: length),
        ] + payload
    }

    // MARK: sending

    /// Writes `bytes` (whole frames) at once, after waiting for window for their DATA.
    func send(_ bytes: [UInt8]) async throws {
        try await sendInPieces(bytes, pieceLength: { _ in bytes.count }, pauseWhile: { _ in false })
    }

    /// Writes `bytes` (the preface and whole frames) in pieces of `pieceLength(n)` bytes
    /// for piece n, pausing a millisecond after each piece while `pauseWhile(n)`. A piece
    /// stops short before a DATA frame the windows do not hold yet; frames are read until
    /// they do. Returns the number of pieces written.
    @discardableResult
    func sendInPieces(_ bytes: [UInt8], pieceLength: (Int) -> Int, pauseWhile: (Int) -> Bool) async throws -> Int {
        // Where each DATA frame starts, and its flow-controlled length.
        var dataFrames: [(start: Int, stream: UInt32, length: Int)] = []
        var index = isClient && bytes.starts(with: h2ConnectionPreface) ? h2ConnectionPreface.count : 0
        while index + 9 <= bytes.count {
            let length = Int(bytes[index]) << 16 | Int(bytes[index + 1]) << 8 | Int(bytes[index + 2])
            if bytes[index + 3] == 0 {
                let stream = UInt32(bytes[index + 5] & 0x7f) << 24 | UInt32(bytes[index + 6]) << 16 | UInt32(bytes[index + 7]) << 8 | UInt32(bytes[index + 8])
                dataFrames.append((index, stream, length))
            }
            index += 9 + length
        }
        var offset = 0
        var pieces = 0
        var nextData = 0
        while offset < bytes.count {
            var end = min(bytes.count, offset + max(1, pieceLength(pieces)))
            // Each DATA frame starting in this piece takes its window; one that does not
            // fit ends the piece before it (or, at its start, waits for window).
            while nextData < dataFrames.count, dataFrames[nextData].start < end {
                let frame = dataFrames[nextData]
                if frame.length > 0 && (connectionSendWindow < frame.length || sendWindow(frame.stream) < frame.length) {
                    if frame.start > offset {
                        end = frame.start
                        break
                    }
                    try await readUntil("window for a DATA frame of \(frame.length) bytes on stream \(frame.stream)") {
                        self.connectionSendWindow >= frame.length && self.sendWindow(frame.stream) >= frame.length
                    }
                    continue
                }
                connectionSendWindow -= frame.length
                streamSendWindows[frame.stream] = sendWindow(frame.stream) - frame.length
                nextData += 1
            }
            try await connection.write(Array(bytes[offset..<end]))
            offset = end
            if pauseWhile(pieces) { try await KitClock.sleep(for: .milliseconds(1)) }
            pieces += 1
        }
        return pieces
    }

    private func sendWindow(_ stream: UInt32) -> Int {
        streamSendWindows[stream] ?? peerInitialWindow
    }

    // MARK: reading

    /// Reads and handles frames until `condition` holds; throws if the connection ends
    /// first.
    func readUntil(_ what: String, _ condition: () -> Bool) async throws {
        while !condition() {
            guard try await readFrame() else {
                throw TransportError(code: .unavailable, reason: .closed, message: "the connection ended before \(what)")
            }
        }
    }

    /// Reads until `stream` is over (END_STREAM or RST_STREAM) and returns what it carried.
    func readToEnd(of stream: UInt32) async throws -> Stream {
        try await readUntil("stream \(stream) ended") { self.streams[stream]?.isOver == true }
        return streams[stream]!
    }

    /// Reads one frame and handles it; false at the connection's end of stream.
    func readFrame() async throws -> Bool {
        while true {
            let frame: H2Frame?
            do {
                frame = try decoder.nextFrame()
            } catch {
                throw TransportError(code: .internal, reason: .protocolViolation, message: "the peer sent what is not HTTP/2: \(error)")
            }
            if let frame {
                try await handle(frame)
                return true
            }
            guard let bytes = try await connection.read() else {
                endOfStream = true
                return false
            }
            decoder.append(bytes)
        }
    }

    private func handle(_ frame: H2Frame) async throws {
        switch frame {
        case .settings(let settings):
            for setting in settings where setting.identifier == .initialWindowSize {
                let delta = Int(setting.value) - peerInitialWindow
                peerInitialWindow = Int(setting.value)
                for key in streamSendWindows.keys { streamSendWindows[key]! += delta }
            }
            receivedSettings = true
            var ack: [UInt8] = []
            H2FrameEncoder.encode(.settingsAck, into: &ack)
            try await connection.write(ack)
        case .settingsAck:
            settingsAcknowledged = true
        case .ping(let opaque, let ack):
            guard !ack else { return }
            var pong: [UInt8] = []
            H2FrameEncoder.encode(.ping(opaque, ack: true), into: &pong)
            try await connection.write(pong)
        case .windowUpdate(let stream, let increment):
            if stream.isConnection {
                connectionSendWindow += Int(increment)
            } else {
                streamSendWindows[stream.rawValue] = sendWindow(stream.rawValue) + Int(increment)
            }
        case .headers(let stream, let block, let endStream, let endHeaders, _):
            partialBlock = (stream, block, endStream)
            if endHeaders { try finishBlock() }
        case .continuation(_, let block, let endHeaders):
            partialBlock?.block += block
            if endHeaders { try finishBlock() }
        case .data(let stream, let payload, let endStream, _):
            streams[stream.rawValue, default: Stream()].data += payload
            if endStream { streams[stream.rawValue, default: Stream()].ended = true }
            let length = frame.flowControlledLength
            if length > 0 {
                var update: [UInt8] = []
                H2FrameEncoder.encode(.windowUpdate(.connection, increment: UInt32(length)), into: &update)
                if !endStream { H2FrameEncoder.encode(.windowUpdate(stream, increment: UInt32(length)), into: &update) }
                try await connection.write(update)
            }
        case .rstStream(let stream, let code):
            streams[stream.rawValue, default: Stream()].reset = code
        case .goAway(_, let code, let debugData):
            goAway = (code, String(decoding: debugData, as: UTF8.self))
        case .priority, .pushPromise, .unknown:
            break
        }
    }

    private func finishBlock() throws {
        guard let (stream, block, endStream) = partialBlock else { return }
        partialBlock = nil
        let fields: [HPACKField]
        do {
            fields = try hpack.decode(block)
        } catch {
            throw TransportError(code: .internal, reason: .protocolViolation, message: "the peer's header block does not decode: \(error)")
        }
        streams[stream.rawValue, default: Stream()].headerBlocks.append((fields, endStream))
        if endStream { streams[stream.rawValue, default: Stream()].ended = true }
    }

    func close() { connection.close() }
}
