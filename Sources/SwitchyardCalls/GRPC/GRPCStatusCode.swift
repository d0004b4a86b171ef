package import Switchyard

/// A gRPC status code, 0 (OK) to 16 (`doc/statuscodes.md` in grpc/grpc), as a number
/// and a name.
///
/// Switchyard's `TransportError.Code` numbers its codes the same way (`TransportError.Code.wireValue`)
/// but has no code for four of gRPC's; they map to the nearest (the code gRPC's own
/// HTTP mapping groups them with), and a status made from a gRPC code keeps the exact
/// code in its error's `TransportError.native` (domain `grpc`), so that it goes out
/// again unchanged:
///
/// | gRPC | TransportError.Code |
/// |---|---|
/// | ALREADY_EXISTS (6) | `aborted` (both are HTTP 409) |
/// | OUT_OF_RANGE (11) | `failedPrecondition` (the spec calls it the more specific kind of it) |
/// | DATA_LOSS (15) | `internal` |
/// | UNAUTHENTICATED (16) | `permissionDenied` |
package struct GRPCStatusCode: Sendable, Hashable, CustomStringConvertible {
    /// 0 to 16.
    package let rawValue: Int

    /// The code numbered `rawValue`, or nil outside 0 to 16.
    package init?(rawValue: Int) {
        guard (0...16).contains(rawValue) else { return nil }
        self.rawValue = rawValue
    }

    private init(_ rawValue: Int) { self.rawValue = rawValue }

    package static let ok = Self(0)
    package static let cancelled = Self(1)
    package static let unknown = Self(2)
    package static let invalidArgument = Self(3)
    package static let deadlineExceeded = Self(4)
    package static let notFound = Self(5)
    package static let alreadyExists = Self(6)
    package static let permissionDenied = Self(7)
    package static let resourceExhausted = Self(8)
    package static let failedPrecondition = Self(9)
    package static let aborted = Self(10)
    package static let outOfRange = Self(11)
    package static let unimplemented = Self(12)
    package static let `internal` = Self(13)
    package static let unavailable = Self(14)
    package static let dataLoss = Self(15)
    package static let unauthenticated = Self(16)

    private static let names = [
        "OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND", "ALREADY_EXISTS",
        "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE",
        "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED",
    ]

    /// gRPC's name for the code, such as `"UNAVAILABLE"`.
    package var name: String { Self.names[rawValue] }

    package var description: String { "\(name) (\(rawValue))" }

    /// The code's `grpc-status` value: its number in decimal, no leading zeros.
    package var encoded: [UInt8] { Array(String(rawValue).utf8) }

    /// The code a `grpc-status` value spells: ASCII digits (at most 9) for 0 to 16.
    /// Leading zeros are read (the spec tells senders to leave them out; grpc-go and
    /// grpc-swift read them). Nil otherwise (a sign, a space, another number): an
    /// unknown or malformed status, which a client takes as `UNKNOWN`.
    package init?(parsing value: some Collection<UInt8>) {
        guard (1...9).contains(value.count), value.allSatisfy({ (0x30...0x39).contains($0) }) else { return nil }
        self.init(rawValue: value.reduce(0) { $0 * 10 + Int($1 - 0x30) })
    }

    /// The Switchyard code for this gRPC code (see the table), or nil for OK.
    package var transportCode: TransportError.Code? {
        switch self {
        case .ok: nil
        case .alreadyExists: .aborted
        case .outOfRange: .failedPrecondition
        case .dataLoss: .internal
        case .unauthenticated: .permissionDenied
        default: TransportError.Code(wireValue: UInt8(rawValue)) ?? .unknown
        }
    }

    /// The gRPC code for `error`: the exact code its `TransportError.native` holds when
    /// that is a gRPC code (an error made from a received status), else its code's
    /// `TransportError.Code.wireValue` (every Switchyard code has one).
    package init(_ error: TransportError) {
        if let native = error.native, native.domain == .grpc, let code = Self(rawValue: Int(native.code)), code != .ok {
            self = code
        } else {
            self.init(Int(error.code.wireValue))
        }
    }

    /// The code for a response that carries no `grpc-status`, by its HTTP status
    /// (gRPC's `doc/http-grpc-status-mapping.md`): 400 and 431 `INTERNAL`, 401
    /// `UNAUTHENTICATED`, 403 `PERMISSION_DENIED`, 404 `UNIMPLEMENTED`, 429, 502, 503
    /// and 504 `UNAVAILABLE`, any other (200 included) `UNKNOWN`. Only for that case: a
    /// `grpc-status`, when there is one, is the status, whatever the HTTP status.
    package init(httpStatus: Int) {
        switch httpStatus {
        case 400, 431: self = .internal
        case 401: self = .unauthenticated
        case 403: self = .permissionDenied
        case 404: self = .unimplemented
        case 429, 502, 503, 504: self = .unavailable
        default: self = .unknown
        }
    }
}
