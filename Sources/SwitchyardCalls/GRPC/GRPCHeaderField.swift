package import SwitchyardHPACK

/// One field of an HTTP/2 header block (a request's headers, a response's headers or
/// trailers) as gRPC's rules read and write it: HPACK's field, a name and a value, both
/// bytes.
///
/// Names are compared byte for byte: HTTP/2 carries them in lower case (a field name
/// with an upper-case letter makes the block malformed, RFC 9113 section 8.2.1), so the
/// HTTP/2 layer has rejected any other before a field reaches these rules. Values are
/// what the peer sent, unchecked: the rules that read a field check its value.
package typealias GRPCHeaderField = HPACKField

extension HPACKField {
    /// The name as text (names are ASCII).
    package var nameText: String { String(decoding: name, as: UTF8.self) }
    /// The value as text (invalid UTF-8 replaced).
    package var valueText: String { String(decoding: value, as: UTF8.self) }
}

/// The names gRPC gives a meaning to, as bytes.
package enum GRPCHeaderName {
    package static let method = Array(":method".utf8)
    package static let scheme = Array(":scheme".utf8)
    package static let path = Array(":path".utf8)
    package static let authority = Array(":authority".utf8)
    package static let status = Array(":status".utf8)
    package static let contentType = Array("content-type".utf8)
    package static let te = Array("te".utf8)
    package static let userAgent = Array("user-agent".utf8)
    package static let timeout = Array("grpc-timeout".utf8)
    package static let encoding = Array("grpc-encoding".utf8)
    package static let acceptEncoding = Array("grpc-accept-encoding".utf8)
    package static let grpcStatus = Array("grpc-status".utf8)
    package static let grpcMessage = Array("grpc-message".utf8)
    package static let statusDetails = Array("grpc-status-details-bin".utf8)
    /// A Switchyard server's reason for an error status (``CallStatus``'s
    /// `TransportError.reason`), percent-encoded as `grpc-message` is.
    package static let switchyardReason = Array("switchyard-reason".utf8)
}

extension Sequence<GRPCHeaderField> {
    /// The value of the first field named `name`, or nil.
    package func firstValue(_ name: [UInt8]) -> [UInt8]? {
        first { $0.name == name }?.value
    }

    /// The values of every field named `name`, in order.
    package func values(_ name: [UInt8]) -> [[UInt8]] {
        compactMap { $0.name == name ? $0.value : nil }
    }
}
