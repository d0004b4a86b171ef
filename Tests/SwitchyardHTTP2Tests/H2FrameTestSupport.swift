@testable import SwitchyardHTTP2

/// The octets of one frame as section 4.1 lays them out, written by hand: a 24-bit
/// length, the type, the flags, the stream (reserved bit included as given), the payload.
func rawFrame(_ type: UInt8, flags: UInt8 = 0, stream: UInt32, _ payload: [UInt8]) -> [UInt8] {
    let length = payload.count
    return [UInt8(length >> 16 & 0xff), UInt8(length >> 8 & 0xff), UInt8(length & 0xff), type, flags]
        + [UInt8(stream >> 24), UInt8(stream >> 16 & 0xff), UInt8(stream >> 8 & 0xff), UInt8(stream & 0xff)] + payload
}

/// A SETTINGS frame of one parameter, by hand.
func rawSettings(_ identifier: UInt16, _ value: UInt32) -> [UInt8] {
    rawFrame(
        0x4, stream: 0,
        [UInt8(identifier >> 8), UInt8(identifier & 0xff), UInt8(value >> 24), UInt8(value >> 16 & 0xff), UInt8(value >> 8 & 0xff), UInt8(value & 0xff)])
}

/// Every frame a new decoder yields from `bytes`, appended at once.
func decodeAll(_ bytes: [UInt8], role: H2FrameDecoder.Role = .client, maxFrameSize: Int = 16_384) throws(H2ProtocolViolation) -> [H2Frame] {
    var decoder = H2FrameDecoder(role: role, maxFrameSize: maxFrameSize)
    decoder.append(bytes)
    var frames: [H2Frame] = []
    while let frame = try decoder.nextFrame() { frames.append(frame) }
    return frames
}

/// The frames, encoded one after the other.
func encoded(_ frames: [H2Frame]) -> [UInt8] {
    var bytes: [UInt8] = []
    for frame in frames { H2FrameEncoder.encode(frame, into: &bytes) }
    return bytes
}

/// A frame of each kind, with edge values where a field has them.
let everyKind: [H2Frame] = [
    .data(H2StreamID(1), payload: ArraySlice("hello".utf8), endStream: false),
    .data(H2StreamID(1), payload: [], endStream: true),
    .headers(H2StreamID(3), headerBlock: [0x82, 0x86, 0x84], endStream: true, endHeaders: false),
    .headers(H2StreamID(0x7fff_ffff), headerBlock: [], endStream: false, endHeaders: true),
    .priority(H2StreamID(5)),
    .rstStream(H2StreamID(7), .cancel),
    .rstStream(H2StreamID(7), H2ErrorCode(0x42)),
    .settings([
        H2Setting(.headerTableSize, 0), H2Setting(.enablePush, 0), H2Setting(.maxConcurrentStreams, 100),
        H2Setting(.initialWindowSize, 0x7fff_ffff), H2Setting(.maxFrameSize, 16_777_215), H2Setting(.maxHeaderListSize, 8192),
        H2Setting(H2Setting.Identifier(0xf0f0), 7),
    ]),
    .settings([]),
    .settingsAck,
    .pushPromise(H2StreamID(1), promised: H2StreamID(2), headerBlock: [0x82], endHeaders: true),
    .ping(0x0102_0304_0506_0708, ack: false),
    .ping(.max, ack: true),
    .goAway(lastStreamID: H2StreamID(0x7fff_ffff), .enhanceYourCalm, debugData: Array("too_many_pings".utf8)),
    .goAway(lastStreamID: .connection, .noError, debugData: []),
    .windowUpdate(.connection, increment: 0x7fff_ffff),
    .windowUpdate(H2StreamID(9), increment: 1),
    .continuation(H2StreamID(3), headerBlock: [0x41, 0x01, 0x61], endHeaders: true),
    .unknown(type: 0xfa, H2StreamID(11), length: 3),
]
