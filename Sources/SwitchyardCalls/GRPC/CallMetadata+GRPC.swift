package import Switchyard

/// CallMetadata as gRPC custom metadata: header fields after a block's own (gRPC's
/// PROTOCOL-HTTP2 "Custom-Metadata").
///
/// Sending (``appendGRPCFields(to:)``):
/// - a key gRPC or HTTP/2 keeps for itself is refused (``isReservedForGRPC(key:)``):
///   `grpc-` keys (gRPC reserves them "for future GRPC use") other than those gRPC
///   carries as metadata (`grpc-status-details-bin`; gRFC A6's `grpc-retry-pushback-ms`
///   in a server's trailers and `grpc-previous-rpc-attempts` in a retried request, which
///   GRPCCore reads and writes), `te`, `content-type`, and the connection-specific fields HTTP/2 forbids
///   (`connection`, `keep-alive`, `proxy-connection`, `transfer-encoding`, `upgrade`,
///   `host`). Refused, not dropped: sending one is a program's mistake, and dropping it
///   would hide it. (`user-agent` is not refused: in a request it joins Switchyard's own,
///   see ``GRPCRequestHead``.)
/// - a `-bin` value is sent in base64 without padding (the spec: "should emit
///   un-padded values");
/// - a string value must be printable ASCII, space to `~` (gRPC's ASCII-Value); CallMetadata
///   allows any Unicode text, so other text is refused.
///
/// Receiving (``init(grpcFields:)``), every field that is not custom metadata is left
/// out: pseudo-headers, the reserved keys above, names that are no CallMetadata key.
/// A `-bin` value is split at `,` (the spec: values of a repeated field "may be joined
/// with ','") and each part decoded, padded or not. A value that is not printable
/// ASCII is dropped (the spec allows dropping or keeping it; kept, it could not be sent
/// back), so received metadata can always be sent again as it is, as the spec asks.
extension CallMetadata {
    /// The refusal of a field to send: `invalidArgument`, reason `invalid metadata`.
    private static func refused(_ message: String) -> TransportError {
        TransportError(code: .invalidArgument, reason: .invalidMetadata, message: message)
    }

    /// Whether `key` (lower-case) is one custom metadata may not use (see the type's rules).
    package static func isReservedForGRPC(key: String) -> Bool {
        if key.hasPrefix("grpc-") {
            switch key {
            case "grpc-status-details-bin", "grpc-retry-pushback-ms", "grpc-previous-rpc-attempts": return false
            default: return true
            }
        }
        switch key {
        case "te", "content-type", "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "host":
            return true
        default:
            return false
        }
    }

    /// Appends this metadata's fields to `fields`, in order.
    /// - Throws: `invalidArgument`, reason `invalid metadata`: a reserved key, or a
    ///   string value that is not printable ASCII.
    package func appendGRPCFields(to fields: inout [GRPCHeaderField]) throws(TransportError) {
        fields.reserveCapacity(fields.count + entries.count)
        for entry in entries {
            if Self.isReservedForGRPC(key: entry.key) {
                throw Self.refused("the metadata key \(Self.quoted(entry.key)) is reserved by gRPC and HTTP/2; choose another key")
            }
            switch entry.value {
            case .binary(let bytes):
                fields.append(GRPCHeaderField(name: Array(entry.key.utf8), value: GRPCBase64.encode(bytes)))
            case .string(let string):
                guard string.utf8.allSatisfy(Self.isPrintableASCII) else {
                    throw Self.refused(
                        "the value \(Self.quoted(string)) of the key \(Self.quoted(entry.key)) is not printable ASCII (space to '~'), "
                            + "which gRPC requires of a string value; send text in a \"-bin\" key")
                }
                fields.append(GRPCHeaderField(name: Array(entry.key.utf8), value: Array(string.utf8)))
            }
        }
    }

    /// The custom metadata of a received header block (see the type's rules for what is
    /// left out).
    /// - Throws: `internal`, reason `protocol violation`: a `-bin` value that is not
    ///   base64 (the call fails, as grpc-go fails it, rather than hand the handler a
    ///   value that is not what the peer meant).
    package init(grpcFields fields: some Sequence<GRPCHeaderField>) throws(TransportError) {
        self.init()
        for field in fields {
            guard let first = field.name.first, first != 0x3A else { continue }
            let key = field.nameText
            guard Self.problem(key: key) == nil, !Self.isReservedForGRPC(key: key) else { continue }
            if Self.isBinary(key: key) {
                for part in field.value.split(separator: 0x2C, omittingEmptySubsequences: false) {
                    let trimmed = part.drop { $0 == 0x20 }.reversed().drop { $0 == 0x20 }.reversed()
                    guard let bytes = GRPCBase64.decode(trimmed) else {
                        throw TransportError(
                            code: .internal, reason: .protocolViolation,
                            message: "the value of the metadata key \(Self.quoted(key)) is not base64 (\(field.value.count) bytes)")
                    }
                    entries.append(Entry(key: key, value: .binary(bytes)))
                }
            } else if field.value.allSatisfy(Self.isPrintableASCII) {
                entries.append(Entry(key: key, value: .string(field.valueText)))
            }
        }
    }

    private static func isPrintableASCII(_ byte: UInt8) -> Bool { byte >= 0x20 && byte <= 0x7E }
}
