package import Switchyard
package import SwitchyardCalls

/// A gRPC status code (0 to 16, `doc/statuscodes.md` of grpc/grpc) on Switchyard's public
/// `CallStatus`.
///
/// `TransportError.Code` numbers its codes as gRPC does (`TransportError.Code.wireValue`)
/// but has none for four of them. A status made here keeps the exact gRPC code in its
/// error's `TransportError.native` (domain `grpc`), which is what SwitchyardCalls' gRPC
/// wire sends as `grpc-status`; its `code` is the nearest Switchyard code, as
/// SwitchyardCalls maps a received status:
///
/// | gRPC | `TransportError.Code` |
/// |---|---|
/// | ALREADY_EXISTS (6) | `aborted` |
/// | OUT_OF_RANGE (11) | `failedPrecondition` |
/// | DATA_LOSS (15) | `internal` |
/// | UNAUTHENTICATED (16) | `permissionDenied` |
package struct GRPCCode: Sendable, Hashable, CustomStringConvertible {
    /// 0 to 16.
    package let rawValue: Int

    /// The code numbered `rawValue`, or nil outside 0 to 16.
    package init?(rawValue: Int) {
        guard Self.names.indices.contains(rawValue) else { return nil }
        self.rawValue = rawValue
    }

    private init(_ rawValue: Int) { self.rawValue = rawValue }

    package static let ok = Self(0)
    package static let cancelled = Self(1)
    package static let unknown = Self(2)
    package static let invalidArgument = Self(3)
    package static let deadlineExceeded = Self(4)
    package static let unimplemented = Self(12)
    package static let `internal` = Self(13)

    private static let names = [
        "OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND", "ALREADY_EXISTS",
        "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE",
        "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED",
    ]

    /// gRPC's name for the code, such as `"UNIMPLEMENTED"`.
    package var name: String { Self.names[rawValue] }

    package var description: String { "\(name) (\(rawValue))" }

    /// The Switchyard code nearest to this one (see the table); nil for OK.
    package var transportCode: TransportError.Code? {
        switch rawValue {
        case 0: nil
        case 6: .aborted
        case 11: .failedPrecondition
        case 15: .internal
        case 16: .permissionDenied
        default: TransportError.Code(wireValue: UInt8(rawValue)) ?? .unknown
        }
    }

    /// The gRPC code a call ended with: the exact one its error's `TransportError.native`
    /// holds (domain `grpc`: a status a gRPC peer sent, or one made by ``status(message:)``),
    /// else its code's number (every `TransportError.Code` has one). OK for OK.
    package init(_ status: CallStatus) {
        guard let error = status.error else {
            self = .ok
            return
        }
        if let native = error.native, native.domain == .grpc, let code = Self(rawValue: Int(native.code)), code != .ok {
            self = code
        } else {
            self.init(Int(error.code.wireValue))
        }
    }

    /// A status with this code and `message` (OK drops the message): reason `grpc status`,
    /// the exact code in `TransportError.native`.
    package func status(message: String) -> CallStatus {
        guard let transportCode else { return .ok }
        return CallStatus(
            error: TransportError(
                code: transportCode, reason: .grpcStatus, message: message,
                native: .init(domain: .grpc, code: Int32(rawValue), name: name)))
    }
}
