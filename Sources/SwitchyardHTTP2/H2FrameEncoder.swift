/// Writes HTTP/2 frames (RFC 9113 sections 4.1 and 6): the 9-octet header, then the
/// payload, appended to the caller's buffer with no array in between.
///
/// It writes what it is given: keeping frames within the peer's SETTINGS_MAX_FRAME_SIZE, and
/// within the flow-control windows, is the caller's part (``encodeHeaderBlock(stream:block:endStream:maxFrameSize:into:)``
/// and ``encodeData(stream:payload:endStream:maxFrameSize:into:)`` split to a size given).
/// It never pads: the `paddingLength` of a DATA or HEADERS frame to write is ignored, and no
/// PADDED flag is set. HEADERS never carry priority fields, and PRIORITY (deprecated by RFC
/// 9113) says "no dependency, the default weight of 16". The reserved bit of a stream
/// identifier is always 0 (``H2StreamID`` has none), and so is that of a WINDOW_UPDATE's
/// increment. Nothing is checked beyond what the format cannot hold: a frame that breaks a
/// rule of section 6 (DATA on stream 0, an increment of 0) is written as asked, which tests
/// use to make a peer refuse it.
package enum H2FrameEncoder {
    /// Appends `frame`, header and payload, to `buffer`.
    ///
    /// An ``H2Frame/unknown(type:_:length:)`` frame is written with its type, no flags and
    /// `length` zero octets of payload (its payload was not kept).
    /// - Precondition: the payload is at most 16,777,215 octets (what the 24-bit length field
    ///   holds).
    package static func encode(_ frame: H2Frame, into buffer: inout [UInt8]) {
        switch frame {
        case .data(let stream, let payload, let endStream, _):
            appendHeader(length: payload.count, type: 0x0, flags: endStream ? endStreamFlag : 0, stream: stream, into: &buffer)
            buffer.append(contentsOf: payload)

        case .headers(let stream, let block, let endStream, let endHeaders, _):
            let flags = (endStream ? endStreamFlag : 0) | (endHeaders ? endHeadersFlag : 0)
            appendHeader(length: block.count, type: 0x1, flags: flags, stream: stream, into: &buffer)
            buffer.append(contentsOf: block)

        case .priority(let stream):
            appendHeader(length: 5, type: 0x2, flags: 0, stream: stream, into: &buffer)
            appendUInt32(0, into: &buffer)
            // The Weight field holds the weight minus one.
            buffer.append(15)

        case .rstStream(let stream, let code):
            appendHeader(length: 4, type: 0x3, flags: 0, stream: stream, into: &buffer)
            appendUInt32(code.rawValue, into: &buffer)

        case .settings(let settings):
            appendHeader(length: 6 * settings.count, type: 0x4, flags: 0, stream: .connection, into: &buffer)
            for setting in settings {
                buffer.append(UInt8(truncatingIfNeeded: setting.identifier.rawValue >> 8))
                buffer.append(UInt8(truncatingIfNeeded: setting.identifier.rawValue))
                appendUInt32(setting.value, into: &buffer)
            }

        case .settingsAck:
            appendHeader(length: 0, type: 0x4, flags: ackFlag, stream: .connection, into: &buffer)

        case .pushPromise(let stream, let promised, let block, let endHeaders):
            appendHeader(length: 4 + block.count, type: 0x5, flags: endHeaders ? endHeadersFlag : 0, stream: stream, into: &buffer)
            appendUInt32(promised.rawValue, into: &buffer)
            buffer.append(contentsOf: block)

        case .ping(let opaque, let ack):
            appendHeader(length: 8, type: 0x6, flags: ack ? ackFlag : 0, stream: .connection, into: &buffer)
            appendUInt32(UInt32(truncatingIfNeeded: opaque >> 32), into: &buffer)
            appendUInt32(UInt32(truncatingIfNeeded: opaque), into: &buffer)

        case .goAway(let lastStreamID, let code, let debugData):
            appendHeader(length: 8 + debugData.count, type: 0x7, flags: 0, stream: .connection, into: &buffer)
            appendUInt32(lastStreamID.rawValue, into: &buffer)
            appendUInt32(code.rawValue, into: &buffer)
            buffer.append(contentsOf: debugData)

        case .windowUpdate(let stream, let increment):
            appendHeader(length: 4, type: 0x8, flags: 0, stream: stream, into: &buffer)
            appendUInt32(increment & 0x7fff_ffff, into: &buffer)

        case .continuation(let stream, let block, let endHeaders):
            appendHeader(length: block.count, type: 0x9, flags: endHeaders ? endHeadersFlag : 0, stream: stream, into: &buffer)
            buffer.append(contentsOf: block)

        case .unknown(let type, let stream, let length):
            appendHeader(length: length, type: type, flags: 0, stream: stream, into: &buffer)
            buffer.append(contentsOf: repeatElement(0, count: length))
        }
    }

    /// Appends a header block as one HEADERS frame and as many CONTINUATION frames as it
    /// takes, each with at most `maxFrameSize` octets of payload; END_HEADERS is on the last.
    /// An empty block is one empty HEADERS frame.
    /// - Parameters:
    ///   - endStream: sets END_STREAM on the HEADERS frame (section 8.1: it never goes on
    ///     CONTINUATION).
    ///   - maxFrameSize: the peer's SETTINGS_MAX_FRAME_SIZE.
    package static func encodeHeaderBlock(
        stream: H2StreamID, block: [UInt8], endStream: Bool, maxFrameSize: Int, into buffer: inout [UInt8]
    ) {
        precondition(maxFrameSize > 0, "a maximum frame size of \(maxFrameSize)")
        var start = 0
        var type: UInt8 = 0x1
        repeat {
            let end = min(block.count, start + maxFrameSize)
            var flags: UInt8 = end == block.count ? endHeadersFlag : 0
            if type == 0x1 && endStream { flags |= endStreamFlag }
            appendHeader(length: end - start, type: type, flags: flags, stream: stream, into: &buffer)
            buffer.append(contentsOf: block[start..<end])
            start = end
            type = 0x9
        } while start < block.count
    }

    /// Appends `payload` as DATA frames of at most `maxFrameSize` octets each, END_STREAM
    /// (if asked) on the last. An empty payload is one empty DATA frame.
    /// - Parameter maxFrameSize: the peer's SETTINGS_MAX_FRAME_SIZE; the flow-control
    ///   windows are the caller's to respect.
    package static func encodeData(
        stream: H2StreamID, payload: [UInt8], endStream: Bool, maxFrameSize: Int, into buffer: inout [UInt8]
    ) {
        precondition(maxFrameSize > 0, "a maximum frame size of \(maxFrameSize)")
        var start = 0
        repeat {
            let end = min(payload.count, start + maxFrameSize)
            let flags: UInt8 = end == payload.count && endStream ? endStreamFlag : 0
            appendHeader(length: end - start, type: 0x0, flags: flags, stream: stream, into: &buffer)
            buffer.append(contentsOf: payload[start..<end])
            start = end
        } while start < payload.count
    }

    private static let endStreamFlag: UInt8 = 0x1
    private static let ackFlag: UInt8 = 0x1
    private static let endHeadersFlag: UInt8 = 0x4

    private static func appendHeader(length: Int, type: UInt8, flags: UInt8, stream: H2StreamID, into buffer: inout [UInt8]) {
        precondition(0...0xff_ffff ~= length, "a frame payload of \(length) octets does not fit a 24-bit length")
        buffer.append(UInt8(truncatingIfNeeded: length >> 16))
        buffer.append(UInt8(truncatingIfNeeded: length >> 8))
        buffer.append(UInt8(truncatingIfNeeded: length))
        buffer.append(type)
        buffer.append(flags)
        appendUInt32(stream.rawValue, into: &buffer)
    }

    private static func appendUInt32(_ value: UInt32, into buffer: inout [UInt8]) {
        buffer.append(UInt8(truncatingIfNeeded: value >> 24))
        buffer.append(UInt8(truncatingIfNeeded: value >> 16))
        buffer.append(UInt8(truncatingIfNeeded: value >> 8))
        buffer.append(UInt8(truncatingIfNeeded: value))
    }
}
