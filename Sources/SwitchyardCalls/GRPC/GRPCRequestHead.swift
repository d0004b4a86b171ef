package import Switchyard

/// A call's request headers (gRPC's PROTOCOL-HTTP2 "Request-Headers"): what the client
/// writes in its HEADERS block and what the server reads from it.
///
/// The client's block (``fields()``), in the spec's order: `:method POST`, `:scheme`,
/// `:path`, `:authority` (when there is one), `grpc-timeout` (when the call has a
/// deadline; right after the pseudo-headers, as the spec asks), `content-type
/// application/grpc`, `te trailers`, `grpc-encoding` (unless `identity`),
/// `grpc-accept-encoding`, `user-agent`, then the custom metadata.
///
/// The server's reading (``init(parsing:acceptedEncodings:)``) refuses a request with a
/// ``GRPCRequestRejection``, whose response the server sends as the whole response (one
/// HEADERS block with END_STREAM), checked in this order:
///
/// | request | response | status |
/// |---|---|---|
/// | `content-type` missing or not `application/grpc`, `application/grpc+…` or `application/grpc;…` | `:status 415` only (the spec: so that no other HTTP client reads an error as success) | none sent; `invalidArgument` locally |
/// | `:method` not `POST` | `:status 405` with `grpc-status` | `unimplemented` (grpc-core's code for a bad method); a gRPC client reads the `grpc-status`, any other HTTP client the 405 |
/// | `:scheme` missing or not `http`/`https` | trailers-only | `invalidArgument` (as grpc-swift) |
/// | `:path` missing or not starting with `/` (gRPC's are `/service/method`; Switchyard sends `/` and any other method) | trailers-only | `unimplemented` |
/// | `grpc-timeout` malformed (see ``GRPCTimeout``) | trailers-only | `internal` (as grpc-go) |
/// | `grpc-encoding` repeated | trailers-only | `internal` |
/// | `grpc-encoding` not one of `acceptedEncodings` | trailers-only with `grpc-accept-encoding` | `unimplemented`, reason `unsupported encoding` (`doc/compression.md`) |
/// | a `-bin` metadata value that is not base64 | trailers-only | `internal` |
///
/// `te` is read but not enforced: the spec sends it "to detect incompatible proxies", and
/// grpc-go, grpc-java and grpc-swift serve requests without it; ``hasTETrailers`` says
/// whether it came. (HTTP/2 itself forbids any `te` value but `trailers`.)
package struct GRPCRequestHead: Sendable, Hashable {
    /// The `user-agent` Switchyard sends: `switchyard/` and its version.
    package static let userAgent = "switchyard/0.1.0"

    /// `http` or `https`.
    package var scheme: String
    /// `/service/method`, such as `/google.pubsub.v2.PublisherService/CreateTopic`.
    package var path: String
    /// The server's name and port, or nil.
    package var authority: String?
    /// The time left until the call's deadline, or nil for none.
    package var timeout: GRPCTimeout?
    /// How the client compresses its messages (`identity`: not at all).
    package var encoding: GRPCEncoding
    /// The encodings the client reads, in its order of preference (sent as
    /// `grpc-accept-encoding`; read from it on the server, unsupported ones left out).
    package var acceptEncodings: [GRPCEncoding]
    /// The client's `user-agent`, if any (read on the server).
    package var userAgent: String?
    /// Whether the request carried `te: trailers` (read on the server).
    package var hasTETrailers: Bool
    /// The custom metadata.
    package var metadata: CallMetadata

    /// A client's request head.
    package init(
        scheme: String, path: String, authority: String?, timeout: GRPCTimeout? = nil, encoding: GRPCEncoding = .identity,
        acceptEncodings: [GRPCEncoding] = GRPCEncoding.supported, metadata: CallMetadata = CallMetadata()
    ) {
        self.scheme = scheme
        self.path = path
        self.authority = authority
        self.timeout = timeout
        self.encoding = encoding
        self.acceptEncodings = acceptEncodings
        self.userAgent = nil
        self.hasTETrailers = true
        self.metadata = metadata
    }

    /// The service part of ``path`` (`google.pubsub.v2.PublisherService`), or nil when the
    /// path is not `/service/method`.
    package var service: Substring? { Self.split(path: path)?.service }
    /// The method part of ``path`` (`CreateTopic`), or nil when the path is not `/service/method`.
    package var method: Substring? { Self.split(path: path)?.method }

    /// The path's two parts, or nil unless it is `/`, a non-empty service, `/`, a
    /// non-empty method, with no other `/`.
    package static func split(path: String) -> (service: Substring, method: Substring)? {
        guard path.hasPrefix("/") else { return nil }
        let parts = path.dropFirst().split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, !parts[0].isEmpty, !parts[1].isEmpty else { return nil }
        return (parts[0], parts[1])
    }

    /// The client's HEADERS block (see the type for the order). A `user-agent` in the
    /// metadata goes first in Switchyard's (`app/1.0 switchyard/0.1.0`), as grpc-core
    /// and grpc-java combine them.
    /// - Throws: `invalidArgument`, reason `invalid metadata`: a path, scheme or
    ///   authority that is not printable ASCII without spaces, or metadata gRPC refuses
    ///   (``CallMetadata/appendGRPCFields(to:)``).
    package func fields() throws(TransportError) -> [GRPCHeaderField] {
        let checked = [("path", path), ("scheme", scheme)] + (authority.map { [("authority", $0)] } ?? [])
        for (name, value) in checked where value.isEmpty || !value.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) {
            throw TransportError(
                code: .invalidArgument, reason: .invalidMetadata,
                message: "the request's \(name) \(CallMetadata.quoted(value)) is not printable ASCII without spaces")
        }
        var fields: [GRPCHeaderField] = []
        fields.reserveCapacity(10 + metadata.count)
        fields.append(GRPCHeaderField(name: GRPCHeaderName.method, value: Array("POST".utf8)))
        fields.append(GRPCHeaderField(name: GRPCHeaderName.scheme, value: Array(scheme.utf8)))
        fields.append(GRPCHeaderField(name: GRPCHeaderName.path, value: Array(path.utf8)))
        if let authority { fields.append(GRPCHeaderField(name: GRPCHeaderName.authority, value: Array(authority.utf8))) }
        if let timeout { fields.append(GRPCHeaderField(name: GRPCHeaderName.timeout, value: timeout.encoded)) }
        fields.append(GRPCHeaderField(name: GRPCHeaderName.contentType, value: GRPCContentType.grpc))
        fields.append(GRPCHeaderField(name: GRPCHeaderName.te, value: Array("trailers".utf8)))
        if encoding != .identity { fields.append(GRPCHeaderField(name: GRPCHeaderName.encoding, value: Array(encoding.name.utf8))) }
        if !acceptEncodings.isEmpty {
            fields.append(GRPCHeaderField(name: GRPCHeaderName.acceptEncoding, value: GRPCEncoding.acceptEncodingValue(acceptEncodings)))
        }
        var metadata = metadata
        let applications = metadata[stringValues: "user-agent"]
        metadata.removeAll(forKey: "user-agent")
        let agent = (applications + [Self.userAgent]).joined(separator: " ")
        fields.append(GRPCHeaderField(name: GRPCHeaderName.userAgent, value: Array(agent.utf8)))
        try metadata.appendGRPCFields(to: &fields)
        return fields
    }

    /// Reads a client's HEADERS block on the server (see the type for what it refuses).
    /// - Parameters:
    ///   - fields: the block's fields, pseudo-headers first, as HTTP/2 delivered them.
    ///   - acceptedEncodings: the encodings the server reads (`identity` is always read).
    /// - Throws: a ``GRPCRequestRejection`` carrying the response to send.
    package init(
        parsing fields: [GRPCHeaderField], acceptedEncodings: [GRPCEncoding] = GRPCEncoding.supported
    ) throws(GRPCRequestRejection) {
        guard let contentType = fields.firstValue(GRPCHeaderName.contentType), GRPCContentType.isGRPC(contentType) else {
            let shown = fields.firstValue(GRPCHeaderName.contentType).map { "\"\(String(decoding: $0, as: UTF8.self))\"" } ?? "none"
            throw GRPCRequestRejection(
                status: CallStatus(
                    error: TransportError(
                        code: .invalidArgument, reason: .protocolViolation,
                        message: "the request's content-type is \(shown), not application/grpc: refused with HTTP 415")),
                response: [GRPCHeaderField(name: GRPCHeaderName.status, value: Array("415".utf8))])
        }
        guard let method = fields.firstValue(GRPCHeaderName.method), method.elementsEqual("POST".utf8) else {
            let shown = fields.firstValue(GRPCHeaderName.method).map { String(decoding: $0, as: UTF8.self) } ?? "missing"
            throw GRPCRequestRejection(
                code: .unimplemented, reason: .protocolViolation,
                message: "the request's :method is \(shown); gRPC calls are POST", httpStatus: "405")
        }
        guard let scheme = fields.firstValue(GRPCHeaderName.scheme).map({ String(decoding: $0, as: UTF8.self) }),
            scheme == "http" || scheme == "https"
        else {
            throw GRPCRequestRejection(
                code: .invalidArgument, reason: .protocolViolation, message: "the request's :scheme is missing or not http or https")
        }
        guard let pathBytes = fields.firstValue(GRPCHeaderName.path) else {
            throw GRPCRequestRejection(code: .unimplemented, reason: .protocolViolation, message: "the request has no :path")
        }
        let path = String(decoding: pathBytes, as: UTF8.self)
        // gRPC's paths are `/service/method`; Switchyard's calls may name any method,
        // sent as `/` and the method (so a server refuses only a path without the `/`).
        guard path.hasPrefix("/") else {
            throw GRPCRequestRejection(
                code: .unimplemented, reason: .protocolViolation,
                message: "the request's :path \(CallMetadata.quoted(path)) does not start with /")
        }
        var timeout: GRPCTimeout?
        if let value = fields.firstValue(GRPCHeaderName.timeout) {
            guard let parsed = GRPCTimeout(parsing: value) else {
                throw GRPCRequestRejection(
                    code: .internal, reason: .protocolViolation,
                    message: "the request's grpc-timeout \(CallMetadata.quoted(String(decoding: value, as: UTF8.self))) is malformed")
            }
            timeout = parsed
        }
        let encodingValues = fields.values(GRPCHeaderName.encoding)
        guard encodingValues.count <= 1 else {
            throw GRPCRequestRejection(code: .internal, reason: .protocolViolation, message: "the request has \(encodingValues.count) grpc-encoding fields; it has at most one")
        }
        var encoding = GRPCEncoding.identity
        if let value = encodingValues.first {
            guard let parsed = GRPCEncoding(name: value), parsed == .identity || acceptedEncodings.contains(parsed) else {
                var accepted = acceptedEncodings
                if !accepted.contains(.identity) { accepted.append(.identity) }
                throw GRPCRequestRejection(
                    code: .unimplemented, reason: .unsupportedEncoding,
                    message: "the request's grpc-encoding \(CallMetadata.quoted(String(decoding: value, as: UTF8.self))) is not supported; "
                        + "supported: \(accepted.map(\.name).joined(separator: ", "))",
                    extra: [GRPCHeaderField(name: GRPCHeaderName.acceptEncoding, value: GRPCEncoding.acceptEncodingValue(accepted))])
            }
            encoding = parsed
        }
        let metadata: CallMetadata
        do {
            metadata = try CallMetadata(grpcFields: fields)
        } catch {
            throw GRPCRequestRejection(code: error.code, reason: error.reason, message: error.message)
        }
        self.scheme = scheme
        self.path = path
        self.authority = fields.firstValue(GRPCHeaderName.authority).map { String(decoding: $0, as: UTF8.self) }
        self.timeout = timeout
        self.encoding = encoding
        self.acceptEncodings = GRPCEncoding.names(inAcceptEncoding: fields.values(GRPCHeaderName.acceptEncoding))
            .compactMap { GRPCEncoding(name: $0) }
        self.userAgent = fields.firstValue(GRPCHeaderName.userAgent).map { String(decoding: $0, as: UTF8.self) }
        self.hasTETrailers = fields.firstValue(GRPCHeaderName.te).map { $0.elementsEqual("trailers".utf8) } ?? false
        self.metadata = metadata
    }

    /// The encoding a server compresses its response with: the first of the client's
    /// ``acceptEncodings`` that is among `preferred` (the server's choice, in its order
    /// of preference); `identity` when none is. (The spec: a server never compresses
    /// with an encoding the client did not list.)
    package func responseEncoding(preferring preferred: [GRPCEncoding]) -> GRPCEncoding {
        preferred.first { $0 != .identity && acceptEncodings.contains($0) } ?? .identity
    }
}

/// A request the server refuses before any handler sees it, and the response that
/// says so: send ``response`` as one HEADERS block with END_STREAM (then, if the
/// client's stream is still open, RST_STREAM NO_ERROR, as the spec's "Early Server
/// Closure" asks).
package struct GRPCRequestRejection: Error, Sendable, Hashable {
    /// How the call ended, on the server's side (for its observers and logs).
    package var status: CallStatus
    /// The response's fields.
    package var response: [GRPCHeaderField]

    package init(status: CallStatus, response: [GRPCHeaderField]) {
        self.status = status
        self.response = response
    }

    /// A rejection answered with a trailers-only response (or, with `httpStatus`, the
    /// same fields under that HTTP status) carrying `code` and `message`, then `extra`.
    init(code: TransportError.Code, reason: TransportError.Reason, message: String, httpStatus: String = "200", extra: [GRPCHeaderField] = []) {
        let status = CallStatus(error: TransportError(code: code, reason: reason, message: message))
        var response = GRPCResponse.trailersOnlyFields(status: status)
        response[0].value = Array(httpStatus.utf8)
        response.append(contentsOf: extra)
        self.init(status: status, response: response)
    }
}
