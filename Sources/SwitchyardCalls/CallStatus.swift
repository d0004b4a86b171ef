public import Switchyard

/// How a call ended: OK, or the `TransportError` that ended it.
///
/// The server sends it in the call's trailers (`grpc-status` and `grpc-message`, and the
/// error's reason in `switchyard-reason`, which other gRPC peers ignore); the client ends
/// with it. A call whose connection broke before a status arrived ends with `unavailable`.
public struct CallStatus: Sendable, Hashable, CustomStringConvertible {
    /// nil for OK.
    public var error: TransportError?

    public init(error: TransportError? = nil) { self.error = error }

    /// The call succeeded.
    public static let ok = CallStatus()

    public var isOK: Bool { error == nil }

    public var description: String { error.map { "\($0)" } ?? "ok" }

    /// The trailer payload: the code (gRPC numbering, 0 for OK: the exact gRPC code an
    /// error made from a gRPC status holds in its native error, so that `ALREADY_EXISTS`,
    /// `OUT_OF_RANGE`, `DATA_LOSS` and `UNAUTHENTICATED` pass between a call and its
    /// stream unchanged), the reason's length and bytes, then the message.
    public var encoded: [UInt8] {
        guard let error else { return [0, 0] }
        // At most 255 bytes, cut at a character boundary so it stays valid UTF-8.
        var reason: [UInt8] = []
        for character in error.reason.name {
            let bytes = Array(String(character).utf8)
            if reason.count + bytes.count > 255 { break }
            reason += bytes
        }
        return [UInt8(GRPCStatusCode(error).rawValue), UInt8(reason.count)] + reason + Array(error.message.utf8)
    }

    /// Decodes a trailer payload.
    /// - Throws: `internal`, reason `protocol violation`, for a malformed status (too
    ///   short, an unknown code, a reason past the end or not UTF-8).
    public init(decoding payload: [UInt8]) throws(TransportError) {
        func bad(_ why: String) -> TransportError {
            TransportError(code: .internal, reason: .protocolViolation, message: "malformed status frame: \(why)")
        }
        guard payload.count >= 2 else { throw bad("\(payload.count) byte\(payload.count == 1 ? "" : "s"); a status has at least 2") }
        if payload[0] == 0 {
            self = .ok
            return
        }
        // A gRPC code without a `TransportError.Code` of its own (GRPCStatusCode's table)
        // takes the nearest and keeps the exact one as the native error.
        var native: TransportError.NativeError?
        let code: TransportError.Code
        if let exact = TransportError.Code(wireValue: payload[0]) {
            code = exact
        } else if let grpc = GRPCStatusCode(rawValue: Int(payload[0])), let nearest = grpc.transportCode {
            code = nearest
            native = .init(domain: .grpc, code: Int32(grpc.rawValue), name: grpc.name)
        } else {
            throw bad("unknown code \(payload[0])")
        }
        let reasonLength = Int(payload[1])
        guard payload.count >= 2 + reasonLength else {
            throw bad("the reason's length \(reasonLength) runs past the frame's \(payload.count) bytes")
        }
        guard let reason = String(validating: payload[2..<(2 + reasonLength)], as: UTF8.self) else {
            throw bad("the reason is not UTF-8")
        }
        let message = String(decoding: payload[(2 + reasonLength)...], as: UTF8.self)
        self.init(error: TransportError(code: code, reason: .init(reason), message: message, native: native))
    }
}
