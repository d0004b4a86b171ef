import Switchyard

extension CallStatus {
    /// The status a gRPC peer sent: OK for ``GRPCStatusCode/ok`` (the message dropped),
    /// else an error with the mapped code (see ``GRPCStatusCode``), reason `grpc status`,
    /// `message`, and the exact code in `TransportError.native` (domain `grpc`).
    package init(grpcCode code: GRPCStatusCode, message: String) {
        guard let transportCode = code.transportCode else {
            self = .ok
            return
        }
        self.init(
            error: TransportError(
                code: transportCode, reason: .grpcStatus, message: message,
                native: .init(domain: .grpc, code: Int32(code.rawValue), name: code.name)))
    }

    /// The gRPC code that sends this status (``GRPCStatusCode/init(_:)``).
    package var grpcCode: GRPCStatusCode {
        error.map(GRPCStatusCode.init) ?? .ok
    }

    /// The status of a response without `grpc-status`, from its HTTP status
    /// (``GRPCStatusCode/init(httpStatus:)``): reason `http status`, a message naming
    /// the HTTP status, and the gRPC code in `TransportError.native` (domain `grpc`:
    /// 401's `UNAUTHENTICATED` has no `TransportError.Code` of its own). Never OK.
    package init(httpStatus: Int) {
        let code = GRPCStatusCode(httpStatus: httpStatus)
        self.init(
            error: TransportError(
                code: code.transportCode ?? .unknown, reason: .httpStatus,
                message: "the response has HTTP status \(httpStatus) and no grpc-status (\(code.name) by gRPC's mapping)",
                native: .init(domain: .grpc, code: Int32(code.rawValue), name: code.name)))
    }

    /// The status of a call whose stream the peer reset (`RST_STREAM` with
    /// `http2ErrorCode`), by gRPC's table (PROTOCOL-HTTP2, "Errors"):
    ///
    /// | HTTP/2 code | status |
    /// |---|---|
    /// | `REFUSED_STREAM` (0x7) | `unavailable`, reason `stream refused`: nothing was processed, a retry is safe |
    /// | `CANCEL` (0x8) | `cancelled`, reason `reset` (a client's is the call's cancellation, a server's its cancel) |
    /// | `ENHANCE_YOUR_CALM` (0xb) | `resourceExhausted`, reason `reset`: the exhausted resource is bandwidth |
    /// | `INADEQUATE_SECURITY` (0xc) | `permissionDenied`, reason `reset`: the connection is not secure enough for the call |
    /// | `NO_ERROR` (0x0) and any other | `internal`, reason `reset` (a reset with `NO_ERROR` before the trailers means no status came) |
    ///
    /// The HTTP/2 code is in `TransportError.native` (domain `http2`). A client whose
    /// deadline has passed when it sees `cancelled` reports `deadlineExceeded` instead
    /// (the spec's advice); that is the call's own business, not this table's.
    package init(resetWithHTTP2ErrorCode http2ErrorCode: UInt32) {
        let name = Self.http2ErrorName(http2ErrorCode)
        let native = TransportError.NativeError(domain: .http2, code: Int32(bitPattern: http2ErrorCode), name: name)
        let error: TransportError =
            switch http2ErrorCode {
            case 0x7:
                TransportError(
                    code: .unavailable, reason: .streamRefused,
                    message: "the server refused the stream (REFUSED_STREAM) before processing it", native: native)
            case 0x8:
                TransportError(code: .cancelled, reason: .reset, message: "the peer cancelled the stream (CANCEL)", native: native)
            case 0xb:
                TransportError(
                    code: .resourceExhausted, reason: .reset,
                    message: "the peer reset the stream with ENHANCE_YOUR_CALM: it sees too much traffic (bandwidth exhausted)",
                    native: native)
            case 0xc:
                TransportError(
                    code: .permissionDenied, reason: .reset,
                    message: "the peer reset the stream with INADEQUATE_SECURITY: the connection is not secure enough for the call",
                    native: native)
            case 0x0:
                TransportError(
                    code: .internal, reason: .reset,
                    message: "the peer reset the stream (NO_ERROR) before sending a status", native: native)
            default:
                TransportError(code: .internal, reason: .reset, message: "the peer reset the stream with \(name)", native: native)
            }
        self.init(error: error)
    }

    /// RFC 9113's name for an HTTP/2 error code, or `0x…` for an unknown one.
    static func http2ErrorName(_ code: UInt32) -> String {
        let names = [
            "NO_ERROR", "PROTOCOL_ERROR", "INTERNAL_ERROR", "FLOW_CONTROL_ERROR", "SETTINGS_TIMEOUT", "STREAM_CLOSED",
            "FRAME_SIZE_ERROR", "REFUSED_STREAM", "CANCEL", "COMPRESSION_ERROR", "CONNECT_ERROR", "ENHANCE_YOUR_CALM",
            "INADEQUATE_SECURITY", "HTTP_1_1_REQUIRED",
        ]
        return code < names.count ? names[Int(code)] : "0x" + String(code, radix: 16)
    }
}
