/// An error code of RST_STREAM and GOAWAY (RFC 9113 section 7). Codes this list does not
/// name are kept as they came: section 7 says an unknown code "MUST NOT trigger any
/// special behavior" and may be treated as `internalError`.
package struct H2ErrorCode: Sendable, Hashable, CustomStringConvertible {
    package let rawValue: UInt32
    package init(_ rawValue: UInt32) { self.rawValue = rawValue }

    /// A graceful shutdown, or a stream no longer needed.
    package static let noError = H2ErrorCode(0x0)
    package static let protocolError = H2ErrorCode(0x1)
    package static let internalError = H2ErrorCode(0x2)
    package static let flowControlError = H2ErrorCode(0x3)
    package static let settingsTimeout = H2ErrorCode(0x4)
    package static let streamClosed = H2ErrorCode(0x5)
    package static let frameSizeError = H2ErrorCode(0x6)
    /// The stream was refused before any of it was processed: safe to retry elsewhere.
    package static let refusedStream = H2ErrorCode(0x7)
    package static let cancel = H2ErrorCode(0x8)
    package static let compressionError = H2ErrorCode(0x9)
    package static let connectError = H2ErrorCode(0xa)
    /// The peer behaves in a way that may cost too much: floods, rapid resets, and gRPC's
    /// keepalive enforcement (`too_many_pings` in the debug data).
    package static let enhanceYourCalm = H2ErrorCode(0xb)
    package static let inadequateSecurity = H2ErrorCode(0xc)
    package static let http11Required = H2ErrorCode(0xd)

    package var description: String {
        switch rawValue {
        case 0x0: "NO_ERROR"
        case 0x1: "PROTOCOL_ERROR"
        case 0x2: "INTERNAL_ERROR"
        case 0x3: "FLOW_CONTROL_ERROR"
        case 0x4: "SETTINGS_TIMEOUT"
        case 0x5: "STREAM_CLOSED"
        case 0x6: "FRAME_SIZE_ERROR"
        case 0x7: "REFUSED_STREAM"
        case 0x8: "CANCEL"
        case 0x9: "COMPRESSION_ERROR"
        case 0xa: "CONNECT_ERROR"
        case 0xb: "ENHANCE_YOUR_CALM"
        case 0xc: "INADEQUATE_SECURITY"
        case 0xd: "HTTP_1_1_REQUIRED"
        default: "error code 0x\(String(rawValue, radix: 16))"
        }
    }
}
