import GRPCCore
import Switchyard
import SwitchyardCalls

// How a call's end becomes GRPCCore's `Status` and `RPCError`, and back.
//
// The code is gRPC's own: a status a gRPC peer sent keeps its exact code (the calls
// engine holds it in the error's native error, domain `grpc`), and every other error's
// code is the `TransportError.Code` of the same number (`TransportError.Code.wireValue`).
// The message says what happened: for a status a peer sent, its message as sent; for
// anything Switchyard saw itself (the connectivity changed, the connection broke or
// stalled, a suspend), the reason, then the error's message:
// `connectivity changed: the call ... ended: the network changed from wifi to cellular`.

extension TransportError {
    /// The message GRPCCore's status carries for this error (see the file's header).
    var grpcMessage: String {
        if reason == .grpcStatus || reason.name.isEmpty { return message }
        if message.isEmpty { return reason.name }
        return "\(reason.name): \(message)"
    }

    /// GRPCCore's code for this error: the exact gRPC code a peer sent, else the code
    /// of the same number.
    var grpcCode: Status.Code {
        Status.Code(rawValue: GRPCStatusCode(self).rawValue) ?? .unknown
    }

    /// This error as GRPCCore's `RPCError`, the error kept as the cause.
    var rpcError: RPCError {
        RPCError(code: RPCError.Code(grpcCode) ?? .unknown, message: grpcMessage, cause: self)
    }
}

extension CallStatus {
    /// This status as GRPCCore's `Status`.
    var grpcStatus: Status {
        guard let error else { return Status(code: .ok, message: "") }
        return Status(code: error.grpcCode, message: error.grpcMessage)
    }

    /// GRPCCore's `status` as the status a server call ends with: OK, or an error with
    /// the nearest `TransportError.Code`, reason `grpc status`, the status's message, and
    /// the exact gRPC code in the native error (so that it goes out unchanged).
    init(grpc status: Status) {
        guard status.code != .ok, let code = GRPCStatusCode(rawValue: status.code.rawValue) else {
            self = .ok
            return
        }
        self.init(
            error: TransportError(
                code: code.transportCode ?? .unknown, reason: .grpcStatus, message: status.message,
                native: .init(domain: .grpc, code: Int32(code.rawValue), name: code.name)))
    }
}

/// Any error a transport operation threw, as GRPCCore's `RPCError`: an `RPCError` as it
/// is, a `TransportError` mapped (see the file's header), cancellation `cancelled`, and
/// anything else `unknown` with the error as its cause.
func rpcError(_ error: any Error) -> RPCError {
    switch error {
    case let error as RPCError: error
    case let error as TransportError: error.rpcError
    case is CancellationError: RPCError(code: .cancelled, message: "the task was cancelled", cause: error)
    default: RPCError(code: .unknown, message: "\(error)", cause: error)
    }
}
