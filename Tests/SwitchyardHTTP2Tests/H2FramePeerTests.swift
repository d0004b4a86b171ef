import Foundation
import Subprocess
import Testing

@testable import SwitchyardHPACK
@testable import SwitchyardHTTP2

/// A frame as `Peers/h2_peer.py` describes it (its JSON, keys in snake case; octets as hex).
struct H2PeerFrame: Codable, Equatable, Sendable {
    struct Priority: Codable, Equatable, Sendable {
        var dependsOn: UInt32
        var weight: UInt8
        var exclusive: Bool
    }

    var type: String
    var stream: UInt32 = 0
    var data: String? = nil
    var block: String? = nil
    var endStream: Bool? = nil
    var endHeaders: Bool? = nil
    var ack: Bool? = nil
    var pad: Int? = nil
    var priority: Priority? = nil
    var dependsOn: UInt32? = nil
    var weight: UInt8? = nil
    var exclusive: Bool? = nil
    var code: UInt32? = nil
    var flags: UInt8? = nil
    var settings: [[UInt32]]? = nil
    var promised: UInt32? = nil
    var lastStream: UInt32? = nil
    var debug: String? = nil
    var increment: UInt32? = nil

    /// How hyperframe describes the frame the encoder writes for `frame` (no padding, no
    /// priority fields; PRIORITY frames say "no dependency, weight 16").
    init(_ frame: H2Frame) {
        switch frame {
        case .data(let stream, let payload, let endStream, _):
            self.init(type: "DATA", stream: stream.rawValue, data: hex(Array(payload)), endStream: endStream)
        case .headers(let stream, let block, let endStream, let endHeaders, _):
            self.init(type: "HEADERS", stream: stream.rawValue, block: hex(block), endStream: endStream, endHeaders: endHeaders)
        case .priority(let stream):
            self.init(type: "PRIORITY", stream: stream.rawValue, dependsOn: 0, weight: 15, exclusive: false)
        case .rstStream(let stream, let code):
            self.init(type: "RST_STREAM", stream: stream.rawValue, code: code.rawValue)
        case .settings(let settings):
            self.init(type: "SETTINGS", settings: settings.map { [UInt32($0.identifier.rawValue), $0.value] })
        case .settingsAck:
            self.init(type: "SETTINGS", ack: true)
        case .pushPromise(let stream, let promised, let block, let endHeaders):
            self.init(type: "PUSH_PROMISE", stream: stream.rawValue, block: hex(block), endHeaders: endHeaders, promised: promised.rawValue)
        case .ping(let opaque, let ack):
            self.init(type: "PING", data: hex((0..<8).map { UInt8(truncatingIfNeeded: opaque >> (56 - 8 * $0)) }), ack: ack)
        case .goAway(let lastStreamID, let code, let debugData):
            self.init(type: "GOAWAY", code: code.rawValue, lastStream: lastStreamID.rawValue, debug: hex(debugData))
        case .windowUpdate(let stream, let increment):
            self.init(type: "WINDOW_UPDATE", stream: stream.rawValue, increment: increment)
        case .continuation(let stream, let block, let endHeaders):
            self.init(type: "CONTINUATION", stream: stream.rawValue, block: hex(block), endHeaders: endHeaders)
        case .unknown(let type, let stream, let length):
            self.init(type: "UNKNOWN", stream: stream.rawValue, data: hex([UInt8](repeating: 0, count: length)), code: UInt32(type))
        }
    }

    init(
        type: String, stream: UInt32 = 0, data: String? = nil, block: String? = nil, endStream: Bool? = nil, endHeaders: Bool? = nil,
        ack: Bool? = nil, pad: Int? = nil, priority: Priority? = nil, dependsOn: UInt32? = nil, weight: UInt8? = nil,
        exclusive: Bool? = nil, code: UInt32? = nil, flags: UInt8? = nil, settings: [[UInt32]]? = nil, promised: UInt32? = nil,
        lastStream: UInt32? = nil, debug: String? = nil, increment: UInt32? = nil
    ) {
        self.type = type
        self.stream = stream
        self.data = data
        self.block = block
        self.endStream = endStream
        self.endHeaders = endHeaders
        self.ack = ack
        self.pad = pad
        self.priority = priority
        self.dependsOn = dependsOn
        self.weight = weight
        self.exclusive = exclusive
        self.code = code
        self.flags = flags
        self.settings = settings
        self.promised = promised
        self.lastStream = lastStream
        self.debug = debug
        self.increment = increment
    }
}

/// An event of an h2 client connection, as `Peers/h2_peer.py response` describes it.
struct H2PeerEvent: Codable, Equatable, Sendable {
    var event: String
    var stream: UInt32? = nil
    var headers: [[String]]? = nil
    var data: String? = nil
    var settings: [[UInt32]]? = nil
    var code: UInt32? = nil
    var lastStream: UInt32? = nil
    var debug: String? = nil
}

private func hex(_ bytes: [UInt8]) -> String {
    bytes.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
}

private struct PeerFailure: Error, CustomStringConvertible {
    let description: String
}

/// The frame codec against a peer it was not written with: Python's h2 project (hyperframe
/// for single frames, h2 for a client connection), through `Peers/h2_peer.py`. Needs
/// python3 with the `h2` package (scripts/ensure-deps installs it); without them the
/// tests fail and say so.
@Suite struct H2FramePeerTests {
    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Peers/h2_peer.py").path

    /// Runs `h2_peer.py mode` with `input` on its standard input.
    /// - Returns: its standard output.
    static func peer(_ mode: String, input: [UInt8] = []) async throws -> [UInt8] {
        let path = (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":")
        guard let python = path.map({ "\($0)/python3" }).first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            throw PeerFailure(description: "python3 is not on PATH (scripts/ensure-deps installs it, and Python's h2)")
        }
        let result = try await run(
            .path(.init(python)), arguments: [script, mode], input: .array(input), output: .bytes(limit: 1 << 20),
            error: .string(limit: 1 << 16))
        guard result.terminationStatus == .exited(0) else {
            throw PeerFailure(
                description: "h2_peer.py \(mode) ended with \(result.terminationStatus) (is Python's h2 installed? "
                    + "python3 -m pip install h2):\n\(result.standardError)")
        }
        return result.standardOutput
    }

    static func jsonDecoder() -> JSONDecoder {
        let decoder = JSONDecoder()
        decoder.keyDecodingStrategy = .convertFromSnakeCase
        return decoder
    }

    @Test("frames hyperframe writes, padded and with priority fields too, decode to the expected values")
    func hyperframeWrites() async throws {
        let cases: [(H2PeerFrame, H2Frame)] = [
            (
                H2PeerFrame(type: "DATA", stream: 1, data: hex(Array("hello".utf8)), endStream: true, pad: 4),
                .data(H2StreamID(1), payload: ArraySlice("hello".utf8), endStream: true, paddingLength: 5)
            ),
            (H2PeerFrame(type: "DATA", stream: 3, data: ""), .data(H2StreamID(3), payload: [], endStream: false)),
            (
                H2PeerFrame(
                    type: "HEADERS", stream: 1, block: "828684", endHeaders: true, pad: 3,
                    priority: .init(dependsOn: 3, weight: 200, exclusive: true)),
                .headers(H2StreamID(1), headerBlock: [0x82, 0x86, 0x84], endStream: false, endHeaders: true, paddingLength: 4)
            ),
            (
                H2PeerFrame(type: "HEADERS", stream: 5, block: "41", endStream: true),
                .headers(H2StreamID(5), headerBlock: [0x41], endStream: true, endHeaders: false)
            ),
            (
                H2PeerFrame(type: "CONTINUATION", stream: 5, block: "0161", endHeaders: true),
                .continuation(H2StreamID(5), headerBlock: [0x01, 0x61], endHeaders: true)
            ),
            (H2PeerFrame(type: "PRIORITY", stream: 7, dependsOn: 1, weight: 255, exclusive: true), .priority(H2StreamID(7))),
            (H2PeerFrame(type: "RST_STREAM", stream: 7, code: 8), .rstStream(H2StreamID(7), .cancel)),
            (
                H2PeerFrame(type: "SETTINGS", settings: [[1, 0], [2, 0], [3, 1000], [4, 1_048_576], [5, 32_768], [6, 16_384]]),
                .settings([
                    H2Setting(.headerTableSize, 0), H2Setting(.enablePush, 0), H2Setting(.maxConcurrentStreams, 1000),
                    H2Setting(.initialWindowSize, 1_048_576), H2Setting(.maxFrameSize, 32_768), H2Setting(.maxHeaderListSize, 16_384),
                ])
            ),
            (H2PeerFrame(type: "SETTINGS", ack: true), .settingsAck),
            (
                H2PeerFrame(type: "PUSH_PROMISE", stream: 1, block: "82", endHeaders: true, pad: 2, promised: 2),
                .pushPromise(H2StreamID(1), promised: H2StreamID(2), headerBlock: [0x82], endHeaders: true)
            ),
            (H2PeerFrame(type: "PING", data: "0001020304050607"), .ping(0x0001_0203_0405_0607, ack: false)),
            (H2PeerFrame(type: "PING", data: "ffffffffffffffff", ack: true), .ping(.max, ack: true)),
            (
                H2PeerFrame(type: "GOAWAY", code: 0xb, lastStream: 9, debug: hex(Array("calm down".utf8))),
                .goAway(lastStreamID: H2StreamID(9), .enhanceYourCalm, debugData: Array("calm down".utf8))
            ),
            (H2PeerFrame(type: "WINDOW_UPDATE", increment: 65_535), .windowUpdate(.connection, increment: 65_535)),
            (H2PeerFrame(type: "WINDOW_UPDATE", stream: 3, increment: 1), .windowUpdate(H2StreamID(3), increment: 1)),
            (H2PeerFrame(type: "UNKNOWN", stream: 3, data: "00112233", code: 0xbe, flags: 0xff), .unknown(type: 0xbe, H2StreamID(3), length: 4)),
        ]
        let encoder = JSONEncoder()
        encoder.keyEncodingStrategy = .convertToSnakeCase
        let octets = try await Self.peer("encode", input: Array(try encoder.encode(cases.map(\.0))))
        #expect(try decodeAll(octets) == cases.map(\.1))
        // And one octet at a time, as a server would read them after a client's preface.
        var decoder = H2FrameDecoder(role: .server)
        var frames: [H2Frame] = []
        for byte in h2ConnectionPreface + octets {
            decoder.append([byte])
            while let frame = try decoder.nextFrame() { frames.append(frame) }
        }
        #expect(frames == cases.map(\.1))
    }

    @Test("hyperframe reads every kind of frame the encoder writes as the same frame")
    func hyperframeReads() async throws {
        let frames = everyKind + [.data(H2StreamID(1), payload: [1, 2], endStream: false, paddingLength: 7)]
        let described = try Self.jsonDecoder().decode([H2PeerFrame].self, from: Data(try await Self.peer("decode", input: encoded(frames))))
        #expect(described == frames.map(H2PeerFrame.init))
    }

    @Test("an h2 client's connection preface, SETTINGS and request decode, the request's block through HPACK")
    func h2ClientRequest() async throws {
        let frames = try decodeAll(try await Self.peer("request"), role: .server)
        guard case .settings(let settings) = frames.first else {
            Issue.record("the client's first frame is not SETTINGS: \(frames)")
            return
        }
        // h2 announces that it accepts pushes, which a server takes.
        #expect(settings.contains(H2Setting(.enablePush, 1)))
        let requests = frames.compactMap { frame -> [UInt8]? in
            if case .headers(H2StreamID(1), let block, true, true, 0) = frame { return block }
            return nil
        }
        #expect(requests.count == 1)
        var hpack = HPACKDecoder()
        let fields = try hpack.decode(requests.first ?? [])
        #expect(
            fields.map { "\(String(decoding: $0.name, as: UTF8.self)): \(String(decoding: $0.value, as: UTF8.self))" } == [
                ":method: GET", ":scheme: http", ":authority: example.test", ":path: /index",
            ])
    }

    @Test("an h2 client reads a response the encoder writes: settings, a header block in CONTINUATION frames, split DATA, PING, GOAWAY")
    func h2ClientReadsResponse() async throws {
        var bytes: [UInt8] = []
        H2FrameEncoder.encode(.settings([H2Setting(.maxConcurrentStreams, 10), H2Setting(.enablePush, 0)]), into: &bytes)
        H2FrameEncoder.encode(.settingsAck, into: &bytes)
        let long = String(repeating: "v", count: 40)
        var hpack = HPACKEncoder()
        let block = hpack.encode([HPACKField(":status", "200"), HPACKField("content-type", "text/plain"), HPACKField("x-long", long)])
        H2FrameEncoder.encodeHeaderBlock(stream: H2StreamID(1), block: block, endStream: false, maxFrameSize: 16, into: &bytes)
        H2FrameEncoder.encodeData(stream: H2StreamID(1), payload: Array("hello, h2".utf8), endStream: true, maxFrameSize: 4, into: &bytes)
        H2FrameEncoder.encode(.ping(7, ack: false), into: &bytes)
        H2FrameEncoder.encode(.goAway(lastStreamID: H2StreamID(1), .noError, debugData: Array("bye".utf8)), into: &bytes)
        #expect(block.count > 32, "the block is meant to take CONTINUATION frames")

        let events = try Self.jsonDecoder().decode([H2PeerEvent].self, from: Data(try await Self.peer("response", input: bytes)))
        #expect(
            events == [
                H2PeerEvent(event: "settings", settings: [[2, 0], [3, 10]]),
                H2PeerEvent(event: "settings_ack"),
                H2PeerEvent(event: "response", stream: 1, headers: [[":status", "200"], ["content-type", "text/plain"], ["x-long", long]]),
                H2PeerEvent(event: "data", stream: 1, data: hex(Array("hell".utf8))),
                H2PeerEvent(event: "data", stream: 1, data: hex(Array("o, h".utf8))),
                H2PeerEvent(event: "data", stream: 1, data: hex(Array("2".utf8))),
                H2PeerEvent(event: "end", stream: 1),
                H2PeerEvent(event: "ping", data: "0000000000000007"),
                H2PeerEvent(event: "goaway", code: 0, lastStream: 1, debug: hex(Array("bye".utf8))),
            ])
    }
}
