package import Switchyard

/// A call's response header blocks (gRPC's PROTOCOL-HTTP2 "Responses"): the server
/// writes them, the client reads them.
///
/// A response is either Response-Headers, messages, then Trailers (each header block one
/// HEADERS frame, the trailers' with END_STREAM), or Trailers-Only: one HEADERS block
/// with END_STREAM holding `:status 200`, `content-type` and the status, for a call
/// that fails before it sends anything.
///
/// Writing (server): ``headersFields(encoding:acceptEncodings:metadata:)``,
/// ``trailersFields(status:metadata:)``, ``trailersOnlyFields(status:metadata:)``.
/// A status goes out as `grpc-status` (its gRPC code, ``CallStatus/grpcCode``) and, for
/// an error with a message, `grpc-message` (percent-encoded,
/// ``GRPCStatusMessageEncoding``); OK carries no message. A `grpc-status-details-bin`
/// is metadata like any other: put it in the trailing metadata, read it from there.
///
/// Reading (client): the first block with ``readHeaders(_:acceptedEncodings:)`` (or,
/// if it ends the stream, with ``readTrailersOnly(_:)``), the last with
/// ``readTrailers(_:)``. A response that is not gRPC (a proxy's error page, a plain
/// HTTP server) ends the call with a status the client makes up, as the spec asks:
/// see each function.
package enum GRPCResponse {
    /// The server's Response-Headers: `:status 200`, `content-type application/grpc`,
    /// `grpc-encoding` (unless `identity`), `grpc-accept-encoding` (unless empty), then
    /// the custom metadata.
    /// - Throws: `invalidArgument`, reason `invalid metadata`: metadata gRPC refuses
    ///   (``CallMetadata/appendGRPCFields(to:)``).
    package static func headersFields(
        encoding: GRPCEncoding, acceptEncodings: [GRPCEncoding], metadata: CallMetadata
    ) throws(TransportError) -> [GRPCHeaderField] {
        var fields: [GRPCHeaderField] = [
            GRPCHeaderField(name: GRPCHeaderName.status, value: Array("200".utf8)),
            GRPCHeaderField(name: GRPCHeaderName.contentType, value: GRPCContentType.grpc),
        ]
        if encoding != .identity { fields.append(GRPCHeaderField(name: GRPCHeaderName.encoding, value: Array(encoding.name.utf8))) }
        if !acceptEncodings.isEmpty {
            fields.append(GRPCHeaderField(name: GRPCHeaderName.acceptEncoding, value: GRPCEncoding.acceptEncodingValue(acceptEncodings)))
        }
        try metadata.appendGRPCFields(to: &fields)
        return fields
    }

    /// The server's Trailers: `grpc-status`, `grpc-message` (an error's non-empty
    /// message), then the trailing metadata.
    /// - Throws: `invalidArgument`, reason `invalid metadata`, as ``headersFields(encoding:acceptEncodings:metadata:)``.
    package static func trailersFields(status: CallStatus, metadata: CallMetadata = CallMetadata()) throws(TransportError) -> [GRPCHeaderField] {
        var fields: [GRPCHeaderField] = []
        appendStatus(status, to: &fields)
        try metadata.appendGRPCFields(to: &fields)
        return fields
    }

    /// A Trailers-Only response: `:status 200`, `content-type application/grpc`, then the
    /// trailers (``trailersFields(status:metadata:)``).
    /// - Throws: `invalidArgument`, reason `invalid metadata`, as ``headersFields(encoding:acceptEncodings:metadata:)``.
    package static func trailersOnlyFields(status: CallStatus, metadata: CallMetadata) throws(TransportError) -> [GRPCHeaderField] {
        var fields = trailersOnlyFields(status: status)
        try metadata.appendGRPCFields(to: &fields)
        return fields
    }

    /// A Trailers-Only response without metadata.
    package static func trailersOnlyFields(status: CallStatus) -> [GRPCHeaderField] {
        var fields: [GRPCHeaderField] = [
            GRPCHeaderField(name: GRPCHeaderName.status, value: Array("200".utf8)),
            GRPCHeaderField(name: GRPCHeaderName.contentType, value: GRPCContentType.grpc),
        ]
        appendStatus(status, to: &fields)
        return fields
    }

    private static func appendStatus(_ status: CallStatus, to fields: inout [GRPCHeaderField]) {
        fields.append(GRPCHeaderField(name: GRPCHeaderName.grpcStatus, value: status.grpcCode.encoded))
        if let error = status.error, !error.message.isEmpty {
            fields.append(GRPCHeaderField(name: GRPCHeaderName.grpcMessage, value: GRPCStatusMessageEncoding.encode(error.message)))
        }
        if let error = status.error, error.reason != .grpcStatus, !error.reason.name.isEmpty {
            // The reason, which gRPC's status has no place for: a Switchyard client reads
            // it back (a transfer's `integrity mismatch`, say); other peers see a custom
            // trailer and ignore it.
            fields.append(GRPCHeaderField(name: GRPCHeaderName.switchyardReason, value: GRPCStatusMessageEncoding.encode(error.reason.name)))
        }
    }

    // MARK: reading (the client)

    /// What the client makes of a response's first header block (one without END_STREAM).
    package enum HeadersReading: Sendable, Hashable {
        /// An informational (1xx) response: skip the block, the real one follows
        /// (`doc/http-grpc-status-mapping.md`).
        case informational
        /// The Response-Headers of a gRPC response: its messages follow.
        case head(Head)
        /// Not a gRPC response, or one this client cannot read: the call ends with this
        /// status (reset the stream with CANCEL; nothing more of it is read).
        case ended(CallStatus, CallMetadata)
    }

    /// A gRPC response's headers, read.
    package struct Head: Sendable, Hashable {
        /// How the server compresses its messages.
        package var encoding: GRPCEncoding
        /// The encodings the server reads (its `grpc-accept-encoding`, the ones Switchyard knows).
        package var acceptEncodings: [GRPCEncoding]
        /// The response metadata.
        package var metadata: CallMetadata

        package init(encoding: GRPCEncoding, acceptEncodings: [GRPCEncoding], metadata: CallMetadata) {
            self.encoding = encoding
            self.acceptEncodings = acceptEncodings
            self.metadata = metadata
        }
    }

    /// Reads the first header block of a response when it does not end the stream.
    ///
    /// - a 1xx `:status`: ``HeadersReading/informational``;
    /// - a `grpc-status` (valid or not): the block is a status after all,
    ///   read as ``readTrailersOnly(_:)`` reads it;
    /// - `:status` other than 200, or none: ended, with gRPC's HTTP mapping
    ///   (``CallStatus/init(httpStatus:)``), or `unknown`, reason `protocol violation`,
    ///   when there is no valid `:status`;
    /// - a `content-type` that is not gRPC's: ended, `internal`, reason `protocol violation`;
    /// - a `grpc-encoding` not among `acceptedEncodings` (`identity` is always read):
    ///   ended, `internal`, reason `unsupported encoding` (`doc/compression.md`);
    /// - a `-bin` value that is not base64: ended, `internal`, reason `protocol violation`.
    package static func readHeaders(_ fields: [GRPCHeaderField], acceptedEncodings: [GRPCEncoding] = GRPCEncoding.supported) -> HeadersReading {
        let httpStatus = fields.firstValue(GRPCHeaderName.status).flatMap(parseHTTPStatus)
        if let httpStatus, (100...199).contains(httpStatus) { return .informational }
        if fields.firstValue(GRPCHeaderName.grpcStatus) != nil {
            let (status, metadata) = readTrailersOnly(fields)
            return .ended(status, metadata)
        }
        guard let httpStatus else { return .ended(missingHTTPStatus, metadataOrNothing(fields)) }
        guard httpStatus == 200 else { return .ended(CallStatus(httpStatus: httpStatus), metadataOrNothing(fields)) }
        guard let contentType = fields.firstValue(GRPCHeaderName.contentType), GRPCContentType.isGRPC(contentType) else {
            let shown = fields.firstValue(GRPCHeaderName.contentType).map { "\"\(String(decoding: $0, as: UTF8.self))\"" } ?? "none"
            return .ended(
                CallStatus(
                    error: TransportError(
                        code: .internal, reason: .protocolViolation, message: "the response's content-type is \(shown), not application/grpc")),
                metadataOrNothing(fields))
        }
        var encoding = GRPCEncoding.identity
        if let value = fields.firstValue(GRPCHeaderName.encoding) {
            guard let parsed = GRPCEncoding(name: value), parsed == .identity || acceptedEncodings.contains(parsed) else {
                return .ended(
                    CallStatus(
                        error: TransportError(
                            code: .internal, reason: .unsupportedEncoding,
                            message: "the server compresses with \"\(String(decoding: value, as: UTF8.self))\", which this client does not read")),
                    metadataOrNothing(fields))
            }
            encoding = parsed
        }
        do {
            let metadata = try CallMetadata(grpcFields: fields)
            let accepted = GRPCEncoding.names(inAcceptEncoding: fields.values(GRPCHeaderName.acceptEncoding)).compactMap { GRPCEncoding(name: $0) }
            return .head(Head(encoding: encoding, acceptEncodings: accepted, metadata: metadata))
        } catch {
            return .ended(CallStatus(error: error), CallMetadata())
        }
    }

    /// Reads a Trailers-Only response (a first header block that ends the stream):
    /// - with a `grpc-status`, that is the status, whatever the HTTP status (the
    ///   mapping doc: "If grpc-status was provided, it must be used"); an invalid one
    ///   is `unknown`, reason `protocol violation`;
    /// - without, a `:status` 200 is `unknown` (a gRPC server would have sent a
    ///   status), any other goes through gRPC's HTTP mapping (``CallStatus/init(httpStatus:)``),
    ///   and none at all is `unknown`, reason `protocol violation`.
    ///
    /// The metadata is the block's custom fields (empty if a `-bin` value is not
    /// base64; the status is then `internal`, reason `protocol violation`).
    package static func readTrailersOnly(_ fields: [GRPCHeaderField]) -> (status: CallStatus, metadata: CallMetadata) {
        if fields.firstValue(GRPCHeaderName.grpcStatus) != nil { return readTrailers(fields) }
        let metadata = metadataOrNothing(fields)
        guard let httpStatus = fields.firstValue(GRPCHeaderName.status).flatMap(parseHTTPStatus) else {
            return (missingHTTPStatus, metadata)
        }
        guard httpStatus == 200 else { return (CallStatus(httpStatus: httpStatus), metadata) }
        return (
            CallStatus(
                error: TransportError(
                    code: .unknown, reason: .protocolViolation,
                    message: "the response ended with HTTP status 200 and no grpc-status")),
            metadata
        )
    }

    /// Reads a response's Trailers (the block that ends the stream after headers): the
    /// status from `grpc-status` and `grpc-message` (percent-decoded, leniently), and
    /// the trailing metadata (`grpc-status-details-bin` included). No `grpc-status`, or
    /// one that is not a code 0 to 16 in decimal: `unknown`, reason `protocol
    /// violation`. A `-bin` value that is not base64: `internal`, reason `protocol
    /// violation`, and no metadata.
    package static func readTrailers(_ fields: [GRPCHeaderField]) -> (status: CallStatus, metadata: CallMetadata) {
        let metadata: CallMetadata
        do {
            metadata = try CallMetadata(grpcFields: fields)
        } catch {
            return (CallStatus(error: error), CallMetadata())
        }
        guard let value = fields.firstValue(GRPCHeaderName.grpcStatus) else {
            return (
                CallStatus(error: TransportError(code: .unknown, reason: .protocolViolation, message: "the response's trailers have no grpc-status")),
                metadata
            )
        }
        guard let code = GRPCStatusCode(parsing: value) else {
            return (
                CallStatus(
                    error: TransportError(
                        code: .unknown, reason: .protocolViolation,
                        message: "the response's grpc-status \(CallMetadata.quoted(String(decoding: value, as: UTF8.self))) is no status code")),
                metadata
            )
        }
        let message = fields.firstValue(GRPCHeaderName.grpcMessage).map(GRPCStatusMessageEncoding.decode) ?? ""
        var status = CallStatus(grpcCode: code, message: message)
        var custom = metadata
        if let reason = fields.firstValue(GRPCHeaderName.switchyardReason) {
            custom.removeAll(forKey: "switchyard-reason")
            status.error?.reason = TransportError.Reason(GRPCStatusMessageEncoding.decode(reason))
        }
        return (status, custom)
    }

    private static let missingHTTPStatus = CallStatus(
        error: TransportError(code: .unknown, reason: .protocolViolation, message: "the response has no valid :status and no grpc-status"))

    /// An HTTP status: three ASCII digits.
    private static func parseHTTPStatus(_ value: [UInt8]) -> Int? {
        guard value.count == 3, value.allSatisfy({ (0x30...0x39).contains($0) }) else { return nil }
        return value.reduce(0) { $0 * 10 + Int($1 - 0x30) }
    }

    /// The custom metadata of a block that already ends the call in error: empty
    /// rather than a second error when it does not read.
    private static func metadataOrNothing(_ fields: [GRPCHeaderField]) -> CallMetadata {
        (try? CallMetadata(grpcFields: fields)) ?? CallMetadata()
    }
}
