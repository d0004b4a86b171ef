/// A frame of RFC 9113 section 6, as the decoder produces it and the encoder writes it.
///
/// Padding is not kept: the decoder strips it and reports only how many octets it took,
/// the Pad Length octet included (`paddingLength`: 0 for a frame without the PADDED flag,
/// 1 for one padded with nothing); `flowControlledLength` counts them, as section 6.1
/// requires. The encoder never pads.
/// PRIORITY and the priority fields of HEADERS are parsed and checked (a stream may not
/// depend on itself) but carry no meaning here: RFC 9113 deprecates the scheme.
package enum H2Frame: Sendable, Hashable {
    /// The payload is a slice so that a frame sent out of a larger queued write shares
    /// that write's storage rather than copying its part of it.
    case data(H2StreamID, payload: ArraySlice<UInt8>, endStream: Bool, paddingLength: Int = 0)
    /// A header block fragment; `endHeaders` false means CONTINUATION frames follow.
    case headers(H2StreamID, headerBlock: [UInt8], endStream: Bool, endHeaders: Bool, paddingLength: Int = 0)
    case priority(H2StreamID)
    case rstStream(H2StreamID, H2ErrorCode)
    case settings([H2Setting])
    case settingsAck
    /// A server's push; gRPC never pushes, and a client that sent SETTINGS_ENABLE_PUSH=0
    /// treats one as a connection error.
    case pushPromise(H2StreamID, promised: H2StreamID, headerBlock: [UInt8], endHeaders: Bool)
    case ping(UInt64, ack: Bool)
    case goAway(lastStreamID: H2StreamID, H2ErrorCode, debugData: [UInt8])
    case windowUpdate(H2StreamID, increment: UInt32)
    case continuation(H2StreamID, headerBlock: [UInt8], endHeaders: Bool)
    /// A frame of a type this implementation does not know: section 5.5 says to ignore
    /// and discard it (outside a header block). Its payload is not kept.
    case unknown(type: UInt8, H2StreamID, length: Int)

    /// The stream the frame is on (`.connection` for connection-level frames).
    package var stream: H2StreamID {
        switch self {
        case .data(let id, _, _, _), .headers(let id, _, _, _, _), .priority(let id), .rstStream(let id, _),
            .pushPromise(let id, _, _, _), .windowUpdate(let id, _), .continuation(let id, _, _), .unknown(_, let id, _):
            id
        case .settings, .settingsAck, .ping, .goAway:
            .connection
        }
    }

    /// The octets the frame counts against flow-control windows (section 6.9.1): a DATA
    /// frame's whole payload, padding included; 0 for every other frame.
    package var flowControlledLength: Int {
        if case .data(_, let payload, _, let padding) = self {
            return payload.count + padding
        }
        return 0
    }
}

/// The octets a client sends first (section 3.4), before its SETTINGS frame.
package let h2ConnectionPreface: [UInt8] = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)

/// What a peer did wrong, as the RFC names it: a connection error (section 5.4.1: GOAWAY
/// with `code`, then close) when `stream` is nil, a stream error (section 5.4.2:
/// RST_STREAM with `code` on that stream, the connection goes on) otherwise.
package struct H2ProtocolViolation: Error, Sendable, Hashable, CustomStringConvertible {
    package var code: H2ErrorCode
    /// The stream a stream error is about; nil for a connection error.
    package var stream: H2StreamID?
    /// What was wrong, for the GOAWAY's debug data and for logs.
    package var message: String
    /// The peer does not speak HTTP/2 at all (its preface is something else): for a
    /// client, the server is not what it was told to call (`unavailable`), not a broken
    /// HTTP/2 peer.
    package var peerIsNotHTTP2 = false

    package init(connection code: H2ErrorCode, _ message: String) {
        self.code = code
        self.stream = nil
        self.message = message
    }

    package init(stream: H2StreamID, _ code: H2ErrorCode, _ message: String) {
        self.code = code
        self.stream = stream
        self.message = message
    }

    package var isConnectionError: Bool { stream == nil }

    package var description: String {
        if let stream { "\(code) on \(stream): \(message)" } else { "connection error \(code): \(message)" }
    }
}
