import Foundation
package import GRPCCore
package import InteropMessages
import InteropServices
import InteropTesting

/// gRPC's interop test service, `grpc.testing.TestService`, on GRPCCore: the generated
/// `Grpc_Testing_TestService.ServiceProtocol`, served by a `GRPCServer` over any
/// server transport.
///
/// It behaves as InteropTesting's `TestService` does on Switchyard's calls (and as the
/// grpcio peer's server does), as gRPC's `doc/interop-test-descriptions.md` says:
///
/// - a response's payload is `response_size` (or each `response_parameters.size`) zero
///   bytes, type `COMPRESSABLE` (any other type is `INVALID_ARGUMENT`), and `interval_us`
///   is waited before each response;
/// - Echo Status: a request whose `response_status` has a code other than 0 ends the call
///   with that code and message (a number that is no gRPC code ends it `UNKNOWN`);
/// - Echo Metadata: the request's `x-grpc-test-echo-initial` values come back as initial
///   metadata, its `x-grpc-test-echo-trailing-bin` values as trailing metadata (with the
///   status, whatever it is);
/// - `UnimplementedCall` ends `UNIMPLEMENTED`; so does every other service, which the
///   server does not register (GRPCCore's router answers them).
package struct GRPCCoreTestService: Grpc_Testing_TestService.ServiceProtocol {
    package init() {}

    package func emptyCall(
        request: ServerRequest<Grpc_Testing_Empty>, context: ServerContext
    ) async throws -> ServerResponse<Grpc_Testing_Empty> {
        let echo = Echo(request.metadata)
        return ServerResponse(message: Grpc_Testing_Empty(), metadata: echo.initial, trailingMetadata: echo.trailing)
    }

    package func unaryCall(
        request: ServerRequest<Grpc_Testing_SimpleRequest>, context: ServerContext
    ) async throws -> ServerResponse<Grpc_Testing_SimpleResponse> {
        let echo = Echo(request.metadata)
        let message = request.message
        if let error = Self.echoStatus(message.hasResponseStatus ? message.responseStatus : nil, trailing: echo.trailing) {
            return ServerResponse(error: error)
        }
        if let error = Self.checkType(message.responseType, trailing: echo.trailing) { return ServerResponse(error: error) }
        guard message.responseSize >= 0 else {
            return ServerResponse(
                error: RPCError(
                    code: .invalidArgument, message: "response_size \(message.responseSize) is negative", metadata: echo.trailing))
        }
        var response = Grpc_Testing_SimpleResponse()
        response.payload = Self.zeros(Int(message.responseSize))
        return ServerResponse(message: response, metadata: echo.initial, trailingMetadata: echo.trailing)
    }

    /// Answered as `UnaryCall` is (the interop cases do not call it).
    package func cacheableUnaryCall(
        request: ServerRequest<Grpc_Testing_SimpleRequest>, context: ServerContext
    ) async throws -> ServerResponse<Grpc_Testing_SimpleResponse> {
        try await unaryCall(request: request, context: context)
    }

    package func streamingOutputCall(
        request: ServerRequest<Grpc_Testing_StreamingOutputCallRequest>, context: ServerContext
    ) async throws -> StreamingServerResponse<Grpc_Testing_StreamingOutputCallResponse> {
        let echo = Echo(request.metadata)
        let message = request.message
        if let error = Self.echoStatus(message.hasResponseStatus ? message.responseStatus : nil, trailing: echo.trailing) {
            return StreamingServerResponse(error: error)
        }
        return StreamingServerResponse(metadata: echo.initial) { writer in
            try await Self.respond(to: message, on: writer, trailing: echo.trailing)
            return echo.trailing
        }
    }

    package func streamingInputCall(
        request: StreamingServerRequest<Grpc_Testing_StreamingInputCallRequest>, context: ServerContext
    ) async throws -> ServerResponse<Grpc_Testing_StreamingInputCallResponse> {
        let echo = Echo(request.metadata)
        var total = 0
        for try await message in request.messages {
            total += message.payload.body.count
        }
        var response = Grpc_Testing_StreamingInputCallResponse()
        response.aggregatedPayloadSize = Int32(clamping: total)
        return ServerResponse(message: response, metadata: echo.initial, trailingMetadata: echo.trailing)
    }

    package func fullDuplexCall(
        request: StreamingServerRequest<Grpc_Testing_StreamingOutputCallRequest>, context: ServerContext
    ) async throws -> StreamingServerResponse<Grpc_Testing_StreamingOutputCallResponse> {
        let echo = Echo(request.metadata)
        return StreamingServerResponse(metadata: echo.initial) { writer in
            for try await message in request.messages {
                if let error = Self.echoStatus(message.hasResponseStatus ? message.responseStatus : nil, trailing: echo.trailing) {
                    throw error
                }
                try await Self.respond(to: message, on: writer, trailing: echo.trailing)
            }
            return echo.trailing
        }
    }

    package func halfDuplexCall(
        request: StreamingServerRequest<Grpc_Testing_StreamingOutputCallRequest>, context: ServerContext
    ) async throws -> StreamingServerResponse<Grpc_Testing_StreamingOutputCallResponse> {
        let echo = Echo(request.metadata)
        return StreamingServerResponse(metadata: echo.initial) { writer in
            var messages: [Grpc_Testing_StreamingOutputCallRequest] = []
            for try await message in request.messages { messages.append(message) }
            for message in messages {
                if let error = Self.echoStatus(message.hasResponseStatus ? message.responseStatus : nil, trailing: echo.trailing) {
                    throw error
                }
                try await Self.respond(to: message, on: writer, trailing: echo.trailing)
            }
            return echo.trailing
        }
    }

    /// The method the interop cases expect no server to implement.
    package func unimplementedCall(
        request: ServerRequest<Grpc_Testing_Empty>, context: ServerContext
    ) async throws -> ServerResponse<Grpc_Testing_Empty> {
        ServerResponse(error: RPCError(code: .unimplemented, message: "method UnimplementedCall is not implemented"))
    }

    // MARK: the features

    /// Echo Metadata: what goes back as initial and as trailing metadata.
    private struct Echo {
        var initial: Metadata = [:]
        var trailing: Metadata = [:]

        init(_ request: Metadata) {
            for value in request[stringValues: TestService.echoInitialKey] {
                initial.addString(value, forKey: TestService.echoInitialKey)
            }
            for value in request[binaryValues: TestService.echoTrailingKey] {
                trailing.addBinary(value, forKey: TestService.echoTrailingKey)
            }
        }
    }

    /// Echo Status: the error a request's `response_status` asks for, or nil for none (or 0).
    private static func echoStatus(_ echo: Grpc_Testing_EchoStatus?, trailing: Metadata) -> RPCError? {
        guard let echo, echo.code != 0 else { return nil }
        guard let status = Status.Code(rawValue: Int(echo.code)), let code = RPCError.Code(status) else {
            return RPCError(
                code: .unknown, message: "response_status.code \(echo.code) is not a gRPC status code", metadata: trailing)
        }
        return RPCError(code: code, message: echo.message, metadata: trailing)
    }

    private static func checkType(_ type: Grpc_Testing_PayloadType, trailing: Metadata) -> RPCError? {
        type == .compressable
            ? nil : RPCError(code: .invalidArgument, message: "unsupported response_type \(type)", metadata: trailing)
    }

    /// Writes the responses `request.response_parameters` asks for.
    /// - Throws: `RPCError` `INVALID_ARGUMENT` for a type other than `COMPRESSABLE` or a
    ///   negative size or interval; the writer's error when the call has ended.
    private static func respond(
        to request: Grpc_Testing_StreamingOutputCallRequest, on writer: RPCWriter<Grpc_Testing_StreamingOutputCallResponse>,
        trailing: Metadata
    ) async throws {
        if let error = checkType(request.responseType, trailing: trailing) { throw error }
        for parameters in request.responseParameters {
            guard parameters.size >= 0, parameters.intervalUs >= 0 else {
                throw RPCError(
                    code: .invalidArgument,
                    message: "response_parameters with size \(parameters.size), interval_us \(parameters.intervalUs)",
                    metadata: trailing)
            }
            if parameters.intervalUs > 0 {
                try await Task.sleep(for: .microseconds(Int(parameters.intervalUs)))
            }
            var response = Grpc_Testing_StreamingOutputCallResponse()
            response.payload = zeros(Int(parameters.size))
            try await writer.write(response)
        }
    }

    /// A `COMPRESSABLE` payload of `size` zero bytes.
    static func zeros(_ size: Int) -> Grpc_Testing_Payload {
        var payload = Grpc_Testing_Payload()
        payload.type = .compressable
        payload.body = Data(count: size)
        return payload
    }
}
