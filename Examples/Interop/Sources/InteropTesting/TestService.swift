import Foundation
import InteropMessages
import SwiftProtobuf
import Switchyard
package import SwitchyardCalls

/// The server side of gRPC's interop tests: `grpc.testing.TestService`, served one call
/// at a time by ``serve(_:)`` (the `serve` closure of `CallServer.start`).
///
/// As gRPC's `doc/interop-test-descriptions.md` says a test server behaves (and as
/// peers/grpcio_interop.py's server does):
///
/// - `EmptyCall`, `UnaryCall`, `StreamingOutputCall`, `StreamingInputCall`,
///   `FullDuplexCall` and `HalfDuplexCall`, by the method's `:path`
///   (`/grpc.testing.TestService/UnaryCall`); a response's payload is `response_size`
///   (or each `response_parameters.size`) zero bytes, type `COMPRESSABLE` (any other type
///   is `INVALID_ARGUMENT`), and `interval_us` is waited before each response.
/// - Echo Status: a request whose `response_status` has a code other than 0 ends the call
///   with that code and message (a number that is no gRPC code ends it `UNKNOWN`).
/// - Echo Metadata: the request's `x-grpc-test-echo-initial` values come back as response
///   (initial) metadata, its `x-grpc-test-echo-trailing-bin` values as trailing metadata.
/// - Every other method, `UnimplementedCall` and every other service's included, ends
///   `UNIMPLEMENTED`.
/// - A request that does not parse ends the call `INTERNAL`, as gRPC servers end it.
package struct TestService: Sendable {
    /// The service's full name.
    package static let name = "grpc.testing.TestService"

    /// The `:path` of one of the service's methods.
    package static func path(_ method: String, service: String = name) -> String { "/\(service)/\(method)" }

    package static let echoInitialKey = "x-grpc-test-echo-initial"
    package static let echoTrailingKey = "x-grpc-test-echo-trailing-bin"

    package init() {}

    /// Serves one call: the status it returns ends the call.
    package func serve(_ call: AsyncCall) async throws -> CallStatus {
        switch call.method {
        case Self.path("EmptyCall"): return try await emptyCall(call)
        case Self.path("UnaryCall"): return try await unaryCall(call)
        case Self.path("StreamingOutputCall"): return try await streamingOutputCall(call)
        case Self.path("StreamingInputCall"): return try await streamingInputCall(call)
        case Self.path("FullDuplexCall"): return try await fullDuplexCall(call)
        case Self.path("HalfDuplexCall"): return try await halfDuplexCall(call)
        default:
            return GRPCCode.unimplemented.status(message: "method \(call.method) is not implemented")
        }
    }

    // MARK: the methods

    private func emptyCall(_ call: AsyncCall) async throws -> CallStatus {
        try await echoMetadata(call)
        let request: Grpc_Testing_Empty
        switch try await onlyRequest(of: call, as: Grpc_Testing_Empty.self) {
        case .request(let parsed): request = parsed
        case .ended(let status): return status
        }
        try await call.write(try request.serializedBytes())
        return .ok
    }

    private func unaryCall(_ call: AsyncCall) async throws -> CallStatus {
        try await echoMetadata(call)
        let request: Grpc_Testing_SimpleRequest
        switch try await onlyRequest(of: call, as: Grpc_Testing_SimpleRequest.self) {
        case .request(let parsed): request = parsed
        case .ended(let status): return status
        }
        if let status = echoStatus(request.hasResponseStatus ? request.responseStatus : nil) { return status }
        if let status = checkType(request.responseType) { return status }
        guard request.responseSize >= 0 else {
            return GRPCCode.invalidArgument.status(message: "response_size \(request.responseSize) is negative")
        }
        var response = Grpc_Testing_SimpleResponse()
        response.payload = Self.zeros(Int(request.responseSize))
        try await call.write(try response.serializedBytes())
        return .ok
    }

    private func streamingOutputCall(_ call: AsyncCall) async throws -> CallStatus {
        try await echoMetadata(call)
        let request: Grpc_Testing_StreamingOutputCallRequest
        switch try await onlyRequest(of: call, as: Grpc_Testing_StreamingOutputCallRequest.self) {
        case .request(let parsed): request = parsed
        case .ended(let status): return status
        }
        if let status = echoStatus(request.hasResponseStatus ? request.responseStatus : nil) { return status }
        return try await respond(to: request, on: call) ?? .ok
    }

    private func streamingInputCall(_ call: AsyncCall) async throws -> CallStatus {
        try await echoMetadata(call)
        var total = 0
        while let bytes = try await call.next() {
            guard let request = try? Grpc_Testing_StreamingInputCallRequest(serializedBytes: bytes) else {
                return Self.unparsable(Grpc_Testing_StreamingInputCallRequest.self)
            }
            total += request.payload.body.count
        }
        var response = Grpc_Testing_StreamingInputCallResponse()
        response.aggregatedPayloadSize = Int32(clamping: total)
        try await call.write(try response.serializedBytes())
        return .ok
    }

    private func fullDuplexCall(_ call: AsyncCall) async throws -> CallStatus {
        try await echoMetadata(call)
        while let bytes = try await call.next() {
            guard let request = try? Grpc_Testing_StreamingOutputCallRequest(serializedBytes: bytes) else {
                return Self.unparsable(Grpc_Testing_StreamingOutputCallRequest.self)
            }
            if let status = echoStatus(request.hasResponseStatus ? request.responseStatus : nil) { return status }
            if let status = try await respond(to: request, on: call) { return status }
        }
        return .ok
    }

    private func halfDuplexCall(_ call: AsyncCall) async throws -> CallStatus {
        try await echoMetadata(call)
        var requests: [Grpc_Testing_StreamingOutputCallRequest] = []
        while let bytes = try await call.next() {
            guard let request = try? Grpc_Testing_StreamingOutputCallRequest(serializedBytes: bytes) else {
                return Self.unparsable(Grpc_Testing_StreamingOutputCallRequest.self)
            }
            requests.append(request)
        }
        for request in requests {
            if let status = echoStatus(request.hasResponseStatus ? request.responseStatus : nil) { return status }
            if let status = try await respond(to: request, on: call) { return status }
        }
        return .ok
    }

    // MARK: the features

    /// Echo Metadata, its initial half (the trailing half is set to go with the status).
    private func echoMetadata(_ call: AsyncCall) async throws {
        let request = call.metadata
        var trailing = CallMetadata()
        for value in request[binaryValues: Self.echoTrailingKey] {
            try trailing.addBinary(value, forKey: Self.echoTrailingKey)
        }
        if !trailing.isEmpty { call.setTrailingMetadata(trailing) }
        var initial = CallMetadata()
        for value in request[stringValues: Self.echoInitialKey] {
            try initial.addString(value, forKey: Self.echoInitialKey)
        }
        if !initial.isEmpty { try await call.sendResponseMetadata(initial) }
    }

    /// Echo Status: the status a request's `response_status` asks for, or nil for none (or 0).
    private func echoStatus(_ echo: Grpc_Testing_EchoStatus?) -> CallStatus? {
        guard let echo, echo.code != 0 else { return nil }
        guard let code = GRPCCode(rawValue: Int(echo.code)) else {
            return GRPCCode.unknown.status(message: "response_status.code \(echo.code) is not a gRPC status code")
        }
        return code.status(message: echo.message)
    }

    private func checkType(_ type: Grpc_Testing_PayloadType) -> CallStatus? {
        type == .compressable ? nil : GRPCCode.invalidArgument.status(message: "unsupported response_type \(type)")
    }

    /// Sends the responses `request.response_parameters` asks for; nil once sent, else
    /// the status that ends the call.
    private func respond(to request: Grpc_Testing_StreamingOutputCallRequest, on call: AsyncCall) async throws -> CallStatus? {
        if let status = checkType(request.responseType) { return status }
        for parameters in request.responseParameters {
            guard parameters.size >= 0, parameters.intervalUs >= 0 else {
                return GRPCCode.invalidArgument.status(message: "response_parameters with size \(parameters.size), interval_us \(parameters.intervalUs)")
            }
            if parameters.intervalUs > 0 {
                try await Task.sleep(for: .microseconds(Int(parameters.intervalUs)))
            }
            var response = Grpc_Testing_StreamingOutputCallResponse()
            response.payload = Self.zeros(Int(parameters.size))
            try await call.write(try response.serializedBytes())
        }
        return nil
    }

    // MARK: helpers

    private enum Request<Message> {
        case request(Message)
        case ended(CallStatus)
    }

    /// The one request of a unary or server-streaming call, or the status that ends a
    /// call without one (`INTERNAL`, as gRPC servers end it) or with one that does not parse.
    private func onlyRequest<Message: SwiftProtobuf.Message>(of call: AsyncCall, as type: Message.Type) async throws -> Request<Message> {
        guard let bytes = try await call.next() else {
            return .ended(GRPCCode.internal.status(message: "the client sent no request before finishing"))
        }
        guard let request = try? Message(serializedBytes: bytes) else { return .ended(Self.unparsable(type)) }
        return .request(request)
    }

    private static func unparsable(_ type: (some SwiftProtobuf.Message).Type) -> CallStatus {
        GRPCCode.internal.status(message: "the request is not a valid \(type.protoMessageName)")
    }

    /// A `COMPRESSABLE` payload of `size` zero bytes.
    static func zeros(_ size: Int) -> Grpc_Testing_Payload {
        var payload = Grpc_Testing_Payload()
        payload.type = .compressable
        payload.body = Data(count: size)
        return payload
    }
}
