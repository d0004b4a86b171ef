public import Switchyard

extension TransportError.Reason {
    /// A gRPC peer ended the call with this status. gRPC carries a code and a message but
    /// no reason, so every status a gRPC peer sends has this one; the error's `TransportError.native`
    /// holds the status code as sent (domain `TransportError.NativeError.Domain.grpc`).
    public static let grpcStatus = TransportError.Reason("grpc status")
    /// A response without a `grpc-status` (a proxy's or a plain HTTP server's error page):
    /// the code comes from the HTTP status, by gRPC's table (`doc/http-grpc-status-mapping.md`),
    /// and the message names the HTTP status; the error's `TransportError.native` holds
    /// the gRPC code (domain `TransportError.NativeError.Domain.grpc`).
    public static let httpStatus = TransportError.Reason("http status")
    /// The server refused the call's stream (HTTP/2 `REFUSED_STREAM`) before processing
    /// any of it: the call can be retried, on this connection or another. Code `unavailable`.
    public static let streamRefused = TransportError.Reason("stream refused")
    /// A message compressed with an encoding this end does not support, or a
    /// `grpc-encoding` it does not know. Code `unimplemented` on a server (the response
    /// lists what it accepts in `grpc-accept-encoding`), `internal` on a client.
    public static let unsupportedEncoding = TransportError.Reason("unsupported encoding")
}

extension TransportError.NativeError.Domain {
    /// A gRPC status code (0 to 16, `doc/statuscodes.md`), named as gRPC names it
    /// (`"UNAUTHENTICATED"`). Some have no `TransportError.Code` of their own
    /// (`ALREADY_EXISTS`, `OUT_OF_RANGE`, `DATA_LOSS`, `UNAUTHENTICATED`); the native
    /// error keeps them exact.
    public static let grpc = Self("grpc")
    /// An HTTP/2 error code (RFC 9113 section 7) from a `RST_STREAM` or `GOAWAY`,
    /// named as the RFC names it (`"REFUSED_STREAM"`).
    public static let http2 = Self("http2")
}
