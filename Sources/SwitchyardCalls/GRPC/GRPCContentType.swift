/// gRPC's `content-type` (PROTOCOL-HTTP2 "Content-Type"): `application/grpc`, alone or
/// followed by a subtype (`+proto`, `+json`, …) or parameters (`;…`).
///
/// Only those: `application/grpc-web` and other types that merely start with the same
/// letters are other protocols (gRPC-Web frames its trailers inside the body), and a
/// server taking them for gRPC would answer in the wrong framing.
package enum GRPCContentType {
    /// `application/grpc`, what Switchyard sends.
    package static let grpc = Array("application/grpc".utf8)

    /// Whether `value` is a gRPC content-type (ASCII letters compared without case, as
    /// media types are).
    package static func isGRPC(_ value: some Collection<UInt8>) -> Bool {
        guard value.count >= grpc.count else { return false }
        let lowered = value.lazy.map { $0 >= 0x41 && $0 <= 0x5A ? $0 + 0x20 : $0 }
        guard lowered.prefix(grpc.count).elementsEqual(grpc) else { return false }
        guard let next = value.dropFirst(grpc.count).first else { return true }
        return next == 0x2B || next == 0x3B  // '+' or ';'
    }
}
