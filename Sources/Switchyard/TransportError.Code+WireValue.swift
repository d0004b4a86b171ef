// The codes' numbers, shared by everything that puts a code on a wire: a call's status
// frame (SwitchyardCalls) and the C interface of a backend library loaded at run time.

extension TransportError.Code {
    /// The code's number on the wire (gRPC's numbering; 0 is OK and is no error code).
    public var wireValue: UInt8 {
        switch self {
        case .cancelled: 1
        case .unknown: 2
        case .invalidArgument: 3
        case .deadlineExceeded: 4
        case .notFound: 5
        case .permissionDenied: 7
        case .resourceExhausted: 8
        case .failedPrecondition: 9
        case .aborted: 10
        case .unimplemented: 12
        case .internal: 13
        case .unavailable: 14
        default: 2
        }
    }

    /// The code for a wire number, or nil (also for 0, which is OK).
    public init?(wireValue: UInt8) {
        let all: [TransportError.Code] = [
            .cancelled, .unknown, .invalidArgument, .deadlineExceeded, .notFound, .permissionDenied,
            .resourceExhausted, .failedPrecondition, .aborted, .unimplemented, .internal, .unavailable,
        ]
        guard let code = all.first(where: { $0.wireValue == wireValue }) else { return nil }
        self = code
    }
}
