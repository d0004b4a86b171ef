import Foundation
import InteropMessages
import SwiftProtobuf
import Switchyard
package import SwitchyardCalls

/// The client side of gRPC's interop tests: one case of `doc/interop-test-descriptions.md`,
/// run over a `CallChannel` to a server of `grpc.testing.TestService` (``TestService``,
/// grpcio's, any gRPC server's).
///
/// ``run(on:)`` makes the calls the description says and checks what it says the client
/// asserts (sizes, zero bodies, counts, status codes and messages, echoed metadata); it
/// throws ``InteropFailure`` saying what differed. Every call but
/// timeout_on_sleeping_server's has a ``callTimeout`` deadline, so a server that never
/// answers fails the case instead of hanging it.
package enum InteropTestCase: String, CaseIterable, Sendable {
    case emptyUnary = "empty_unary"
    case largeUnary = "large_unary"
    case clientStreaming = "client_streaming"
    case serverStreaming = "server_streaming"
    case pingPong = "ping_pong"
    case emptyStream = "empty_stream"
    case cancelAfterBegin = "cancel_after_begin"
    case cancelAfterFirstResponse = "cancel_after_first_response"
    case timeoutOnSleepingServer = "timeout_on_sleeping_server"
    case customMetadata = "custom_metadata"
    case statusCodeAndMessage = "status_code_and_message"
    case specialStatusMessage = "special_status_message"
    case unimplementedMethod = "unimplemented_method"
    case unimplementedService = "unimplemented_service"

    /// The deadline of every call but timeout_on_sleeping_server's.
    package static let callTimeout: Duration = .seconds(30)

    package static let echoInitialValue = "test_initial_metadata_value"
    package static let echoTrailingValue: [UInt8] = [0xab, 0xab, 0xab]
    package static let specialStatusText =
        "\t\ntest with whitespace\r\nand Unicode BMP \u{263A} and non-BMP \u{1F608}\t\n"

    /// Runs the case.
    /// - Throws: ``InteropFailure`` when a check failed, saying what differed.
    package func run(on channel: CallChannel) async throws(InteropFailure) {
        let client = InteropClient(channel: channel)
        switch self {
        case .emptyUnary: try await client.emptyUnary()
        case .largeUnary: try await client.largeUnary()
        case .clientStreaming: try await client.clientStreaming()
        case .serverStreaming: try await client.serverStreaming()
        case .pingPong: try await client.pingPong()
        case .emptyStream: try await client.emptyStream()
        case .cancelAfterBegin: try await client.cancelAfterBegin()
        case .cancelAfterFirstResponse: try await client.cancelAfterFirstResponse()
        case .timeoutOnSleepingServer: try await client.timeoutOnSleepingServer()
        case .customMetadata: try await client.customMetadata()
        case .statusCodeAndMessage: try await client.echoStatus("test status message", fullDuplex: true)
        case .specialStatusMessage: try await client.echoStatus(Self.specialStatusText, fullDuplex: false)
        case .unimplementedMethod: try await client.unimplemented(service: TestService.name)
        case .unimplementedService: try await client.unimplemented(service: "grpc.testing.UnimplementedService")
        }
    }
}

/// How one call went: what came back and how it ended.
struct CallOutcome {
    var responses: [[UInt8]] = []
    var status: CallStatus
    var initialMetadata = CallMetadata()
    var trailingMetadata = CallMetadata()
}

/// The cases' calls, one method per case.
struct InteropClient {
    let channel: CallChannel

    // MARK: the cases

    func emptyUnary() async throws(InteropFailure) {
        let response = try await unary("EmptyCall", Grpc_Testing_Empty(), as: Grpc_Testing_Empty.self)
        try expect(response == Grpc_Testing_Empty(), "EmptyCall answered \(response), expected an empty Empty")
    }

    func largeUnary() async throws(InteropFailure) {
        let response = try await unary("UnaryCall", Self.largeRequest(), as: Grpc_Testing_SimpleResponse.self)
        try expectPayload(response.payload, size: 314_159, "UnaryCall")
    }

    func clientStreaming() async throws(InteropFailure) {
        let requests = [27182, 8, 1828, 45904].map { size in
            var request = Grpc_Testing_StreamingInputCallRequest()
            request.payload = TestService.zeros(size)
            return request
        }
        let outcome = try await exchange("StreamingInputCall", requests)
        try expectOK(outcome, "StreamingInputCall")
        let responses = try decode(outcome, as: Grpc_Testing_StreamingInputCallResponse.self, "StreamingInputCall")
        try expect(responses.count == 1, "StreamingInputCall: \(responses.count) responses, expected 1")
        try expect(
            responses[0].aggregatedPayloadSize == 74922,
            "aggregated_payload_size \(responses[0].aggregatedPayloadSize), expected 74922")
    }

    func serverStreaming() async throws(InteropFailure) {
        let sizes = [31415, 9, 2653, 58979]
        let outcome = try await exchange("StreamingOutputCall", [Self.streamingRequest(responseSizes: sizes)])
        try expectOK(outcome, "StreamingOutputCall")
        let responses = try decode(outcome, as: Grpc_Testing_StreamingOutputCallResponse.self, "StreamingOutputCall")
        try expect(responses.count == sizes.count, "\(responses.count) responses, expected \(sizes.count)")
        for (index, (response, size)) in zip(responses, sizes).enumerated() {
            try expectPayload(response.payload, size: size, "response \(index)")
        }
    }

    func pingPong() async throws(InteropFailure) {
        let pairs = [(31415, 27182), (9, 8), (2653, 1828), (58979, 45904)]
        try await withCall("FullDuplexCall") { call throws(InteropFailure) in
            for (index, (responseSize, payloadSize)) in pairs.enumerated() {
                let request = Self.streamingRequest(responseSizes: [responseSize], payloadSize: payloadSize)
                try await write(request, on: call, "FullDuplexCall request \(index)")
                let response = try await nextResponse(of: call, as: Grpc_Testing_StreamingOutputCallResponse.self, "FullDuplexCall")
                guard let response else {
                    throw InteropFailure("the stream ended after \(index) responses, expected 4 (\(await call.status()))")
                }
                try expectPayload(response.payload, size: responseSize, "response \(index)")
            }
            try await finishSending(call, "FullDuplexCall")
            let rest = try await nextResponse(of: call, as: Grpc_Testing_StreamingOutputCallResponse.self, "FullDuplexCall")
            try expect(rest == nil, "a response after the fourth, expected none")
            let status = await call.status()
            try expect(status.isOK, "FullDuplexCall ended \(Self.describe(status)), expected OK")
        }
    }

    func emptyStream() async throws(InteropFailure) {
        let outcome = try await exchange("FullDuplexCall", [Grpc_Testing_StreamingOutputCallRequest]())
        try expectOK(outcome, "FullDuplexCall")
        try expect(outcome.responses.isEmpty, "\(outcome.responses.count) responses, expected none")
    }

    func cancelAfterBegin() async throws(InteropFailure) {
        try await withCall("StreamingInputCall") { call throws(InteropFailure) in
            call.cancel()
            let status = await call.status()
            try expect(GRPCCode(status) == .cancelled, "StreamingInputCall ended \(Self.describe(status)), expected CANCELLED")
        }
    }

    func cancelAfterFirstResponse() async throws(InteropFailure) {
        try await withCall("FullDuplexCall") { call throws(InteropFailure) in
            try await write(Self.streamingRequest(responseSizes: [31415], payloadSize: 27182), on: call, "FullDuplexCall")
            let response = try await nextResponse(of: call, as: Grpc_Testing_StreamingOutputCallResponse.self, "FullDuplexCall")
            guard let response else {
                throw InteropFailure("the stream ended before its first response (\(Self.describe(await call.status())))")
            }
            try expectPayload(response.payload, size: 31415, "response 0")
            call.cancel()
            let status = await call.status()
            try expect(GRPCCode(status) == .cancelled, "FullDuplexCall ended \(Self.describe(status)), expected CANCELLED")
        }
    }

    func timeoutOnSleepingServer() async throws(InteropFailure) {
        var request = Grpc_Testing_StreamingOutputCallRequest()
        request.payload = TestService.zeros(27182)
        let bytes = serialized(request)
        let status: CallStatus
        do {
            status = try await channel.withCall(
                method: TestService.path("FullDuplexCall"), options: CallConfiguration(timeout: .milliseconds(1))
            ) { call in
                // The write may fail: the deadline can pass before it is out.
                try? await call.write(bytes)
                while (try? await call.next()) != nil {}
                return await call.status()
            }
        } catch let error as TransportError {
            // The deadline passed while connecting (the channel connects per call today).
            status = CallStatus(error: error)
        } catch {
            throw InteropFailure("FullDuplexCall failed: \(error)")
        }
        try expect(
            GRPCCode(status) == .deadlineExceeded, "FullDuplexCall ended \(Self.describe(status)), expected DEADLINE_EXCEEDED")
    }

    func customMetadata() async throws(InteropFailure) {
        var metadata = CallMetadata()
        do {
            try metadata.addString(InteropTestCase.echoInitialValue, forKey: TestService.echoInitialKey)
            try metadata.addBinary(InteropTestCase.echoTrailingValue, forKey: TestService.echoTrailingKey)
        } catch {
            throw InteropFailure("cannot make the request metadata: \(error)")
        }

        let unary = try await exchange("UnaryCall", [Self.largeRequest()], metadata: metadata)
        try expectOK(unary, "UnaryCall")
        let responses = try decode(unary, as: Grpc_Testing_SimpleResponse.self, "UnaryCall")
        try expect(responses.count == 1, "UnaryCall: \(responses.count) responses, expected 1")
        try expectPayload(responses[0].payload, size: 314_159, "UnaryCall")
        try expectEchoed(unary, "UnaryCall")

        var request = Self.streamingRequest(responseSizes: [314_159], payloadSize: 271_828)
        request.responseType = .compressable
        let duplex = try await exchange("FullDuplexCall", [request], metadata: metadata)
        try expectOK(duplex, "FullDuplexCall")
        let streamed = try decode(duplex, as: Grpc_Testing_StreamingOutputCallResponse.self, "FullDuplexCall")
        try expect(streamed.count == 1, "FullDuplexCall: \(streamed.count) responses, expected 1")
        try expectPayload(streamed[0].payload, size: 314_159, "FullDuplexCall")
        try expectEchoed(duplex, "FullDuplexCall")
    }

    /// status_code_and_message (with FullDuplexCall) and special_status_message (without).
    func echoStatus(_ message: String, fullDuplex: Bool) async throws(InteropFailure) {
        var echo = Grpc_Testing_EchoStatus()
        echo.code = 2
        echo.message = message
        var request = Grpc_Testing_SimpleRequest()
        request.responseStatus = echo
        try expectStatus(try await exchange("UnaryCall", [request]), .unknown, message: message, "UnaryCall")
        guard fullDuplex else { return }
        var streaming = Grpc_Testing_StreamingOutputCallRequest()
        streaming.responseStatus = echo
        try expectStatus(try await exchange("FullDuplexCall", [streaming]), .unknown, message: message, "FullDuplexCall")
    }

    func unimplemented(service: String) async throws(InteropFailure) {
        let outcome = try await exchange("UnimplementedCall", [Grpc_Testing_Empty()], service: service)
        try expectStatus(outcome, .unimplemented, message: nil, "\(service)/UnimplementedCall")
    }

    // MARK: calls

    /// Runs `body` on a call to `method` of the test service (``InteropTestCase/callTimeout``).
    private func withCall<Result: Sendable>(
        _ method: String, metadata: CallMetadata = CallMetadata(), service: String = TestService.name,
        _ body: (AsyncCall) async throws(InteropFailure) -> Result
    ) async throws(InteropFailure) -> Result {
        do {
            return try await channel.withCall(
                method: TestService.path(method, service: service), metadata: metadata,
                options: CallConfiguration(timeout: InteropTestCase.callTimeout)
            ) { call in try await body(call) }
        } catch let failure as InteropFailure {
            throw failure
        } catch {
            throw InteropFailure("\(method): cannot start the call: \(error)")
        }
    }

    /// Sends `requests`, finishes sending, and collects the responses and the end. A
    /// write that fails (the server ended the call first) stops the sending; the status
    /// says why.
    private func exchange(
        _ method: String, _ requests: [some SwiftProtobuf.Message], metadata: CallMetadata = CallMetadata(),
        service: String = TestService.name
    ) async throws(InteropFailure) -> CallOutcome {
        let messages = requests.map(serialized)
        return try await withCall(method, metadata: metadata, service: service) { call in
            do {
                for message in messages { try await call.write(message) }
                try await call.finishSending()
            } catch {}
            var responses: [[UInt8]] = []
            do {
                while let response = try await call.next() { responses.append(response) }
            } catch {}
            let status = await call.status()
            return CallOutcome(
                responses: responses, status: status, initialMetadata: call.responseMetadata,
                trailingMetadata: call.trailingMetadata)
        }
    }

    /// A unary call that must succeed with one response.
    private func unary<Response: SwiftProtobuf.Message>(
        _ method: String, _ request: some SwiftProtobuf.Message, as type: Response.Type
    ) async throws(InteropFailure) -> Response {
        let outcome = try await exchange(method, [request])
        try expectOK(outcome, method)
        let responses = try decode(outcome, as: type, method)
        try expect(responses.count == 1, "\(method): \(responses.count) responses, expected 1")
        return responses[0]
    }

    private func write(_ message: some SwiftProtobuf.Message, on call: AsyncCall, _ what: String) async throws(InteropFailure) {
        do {
            try await call.write(serialized(message))
        } catch {
            throw InteropFailure("\(what): the write failed: \(error) (call \(Self.describe(await call.status())))")
        }
    }

    private func finishSending(_ call: AsyncCall, _ what: String) async throws(InteropFailure) {
        do {
            try await call.finishSending()
        } catch {
            throw InteropFailure("\(what): finishing sending failed: \(error)")
        }
    }

    /// The next response, parsed, or nil when the call ended OK.
    private func nextResponse<Response: SwiftProtobuf.Message>(
        of call: AsyncCall, as type: Response.Type, _ what: String
    ) async throws(InteropFailure) -> Response? {
        let bytes: [UInt8]?
        do {
            bytes = try await call.next()
        } catch {
            throw InteropFailure("\(what) ended \(Self.describe(await call.status()))")
        }
        guard let bytes else { return nil }
        do {
            return try Response(serializedBytes: bytes)
        } catch {
            throw InteropFailure("\(what): a response of \(bytes.count) bytes is not a \(Response.protoMessageName): \(error)")
        }
    }

    // MARK: checks

    private func decode<Response: SwiftProtobuf.Message>(
        _ outcome: CallOutcome, as type: Response.Type, _ what: String
    ) throws(InteropFailure) -> [Response] {
        var decoded: [Response] = []
        for (index, bytes) in outcome.responses.enumerated() {
            guard let response = try? Response(serializedBytes: bytes) else {
                throw InteropFailure("\(what): response \(index) (\(bytes.count) bytes) is not a \(Response.protoMessageName)")
            }
            decoded.append(response)
        }
        return decoded
    }

    private func expectOK(_ outcome: CallOutcome, _ what: String) throws(InteropFailure) {
        try expect(outcome.status.isOK, "\(what) ended \(Self.describe(outcome.status)), expected OK")
    }

    private func expectStatus(_ outcome: CallOutcome, _ code: GRPCCode, message: String?, _ what: String) throws(InteropFailure) {
        let got = GRPCCode(outcome.status)
        try expect(got == code, "\(what) ended \(Self.describe(outcome.status)), expected \(code.name)")
        if let message {
            let received = outcome.status.error?.message ?? ""
            try expect(received == message, "\(what): status message \(received.debugDescription), expected \(message.debugDescription)")
        }
    }

    private func expectPayload(_ payload: Grpc_Testing_Payload, size: Int, _ what: String) throws(InteropFailure) {
        try expect(payload.body.count == size, "\(what): payload body of \(payload.body.count) bytes, expected \(size)")
        try expect(payload.body.allSatisfy { $0 == 0 }, "\(what): payload body is not all zeros")
    }

    private func expectEchoed(_ outcome: CallOutcome, _ what: String) throws(InteropFailure) {
        let initial = outcome.initialMetadata[stringValues: TestService.echoInitialKey]
        try expect(
            initial == [InteropTestCase.echoInitialValue],
            "\(what): initial metadata \(TestService.echoInitialKey) is \(initial), expected [\"\(InteropTestCase.echoInitialValue)\"]")
        let trailing = outcome.trailingMetadata[binaryValues: TestService.echoTrailingKey]
        try expect(
            trailing == [InteropTestCase.echoTrailingValue],
            "\(what): trailing metadata \(TestService.echoTrailingKey) is \(trailing), expected [\(InteropTestCase.echoTrailingValue)]")
    }

    // MARK: messages

    /// The large_unary request: 271828 zero bytes out, 314159 asked back.
    private static func largeRequest() -> Grpc_Testing_SimpleRequest {
        var request = Grpc_Testing_SimpleRequest()
        request.responseType = .compressable
        request.responseSize = 314_159
        request.payload = TestService.zeros(271_828)
        return request
    }

    private static func streamingRequest(responseSizes: [Int], payloadSize: Int? = nil) -> Grpc_Testing_StreamingOutputCallRequest {
        var request = Grpc_Testing_StreamingOutputCallRequest()
        request.responseType = .compressable
        request.responseParameters = responseSizes.map { size in
            var parameters = Grpc_Testing_ResponseParameters()
            parameters.size = Int32(size)
            return parameters
        }
        if let payloadSize { request.payload = TestService.zeros(payloadSize) }
        return request
    }

    /// A message's bytes (the generated messages always serialize: no required fields).
    private func serialized(_ message: some SwiftProtobuf.Message) -> [UInt8] {
        // swift-format-ignore: NeverUseForceTry
        try! message.serializedBytes()
    }

    /// A status as a failure shows it: the gRPC code's name and the message.
    static func describe(_ status: CallStatus) -> String {
        let code = GRPCCode(status)
        guard let error = status.error else { return "OK" }
        return "\(code.name) (\(error.message.debugDescription); \(error))"
    }
}
