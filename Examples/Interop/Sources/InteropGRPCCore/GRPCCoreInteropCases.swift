import Foundation
package import GRPCCore
import InteropMessages
import InteropServices
package import InteropTesting

extension InteropTestCase {
    /// Runs the case with GRPCCore's generated stubs over `client` (a `GRPCClient` on any
    /// transport whose connections it is running), making the calls
    /// `doc/interop-test-descriptions.md` describes and checking what it says the client
    /// asserts, as ``run(on:)`` does on Switchyard's calls. Every call but
    /// timeout_on_sleeping_server's has a ``callTimeout`` deadline.
    /// - Throws: ``InteropFailure`` saying what differed, or how a call failed.
    package func run<Transport: ClientTransport>(on client: GRPCClient<Transport>) async throws(InteropFailure) {
        let cases = GRPCCoreInteropClient(client: client)
        do {
            switch self {
            case .emptyUnary: try await cases.emptyUnary()
            case .largeUnary: try await cases.largeUnary()
            case .clientStreaming: try await cases.clientStreaming()
            case .serverStreaming: try await cases.serverStreaming()
            case .pingPong: try await cases.pingPong()
            case .emptyStream: try await cases.emptyStream()
            case .cancelAfterBegin: try await cases.cancelAfterBegin()
            case .cancelAfterFirstResponse: try await cases.cancelAfterFirstResponse()
            case .timeoutOnSleepingServer: try await cases.timeoutOnSleepingServer()
            case .customMetadata: try await cases.customMetadata()
            case .statusCodeAndMessage: try await cases.echoStatus("test status message", fullDuplex: true)
            case .specialStatusMessage: try await cases.echoStatus(Self.specialStatusText, fullDuplex: false)
            case .unimplementedMethod: try await cases.unimplementedMethod()
            case .unimplementedService: try await cases.unimplementedService()
            }
        } catch let failure as InteropFailure {
            throw failure
        } catch {
            throw InteropFailure("a call failed: \(describeCallError(error))")
        }
    }
}

/// The cases' calls on the generated `Grpc_Testing_TestService.Client`, one method per case.
struct GRPCCoreInteropClient<Transport: ClientTransport> {
    let client: GRPCClient<Transport>

    private var service: Grpc_Testing_TestService.Client<Transport> { .init(wrapping: client) }

    private static var options: CallOptions {
        var options = CallOptions.defaults
        options.timeout = InteropTestCase.callTimeout
        return options
    }

    // MARK: the cases

    func emptyUnary() async throws {
        let response = try await service.emptyCall(Grpc_Testing_Empty(), options: Self.options)
        try check(response == Grpc_Testing_Empty(), "EmptyCall answered \(response), expected an empty Empty")
    }

    func largeUnary() async throws {
        let response = try await service.unaryCall(Self.largeRequest(), options: Self.options)
        try checkPayload(response.payload, size: 314_159, "UnaryCall")
    }

    func clientStreaming() async throws {
        let requests = [27182, 8, 1828, 45904].map { size in
            var request = Grpc_Testing_StreamingInputCallRequest()
            request.payload = GRPCCoreTestService.zeros(size)
            return request
        }
        let response = try await service.streamingInputCall(options: Self.options) { writer in
            try await writer.write(contentsOf: requests)
        }
        try check(
            response.aggregatedPayloadSize == 74922,
            "aggregated_payload_size \(response.aggregatedPayloadSize), expected 74922")
    }

    func serverStreaming() async throws {
        let sizes = [31415, 9, 2653, 58979]
        let responses = try await service.streamingOutputCall(
            Self.streamingRequest(responseSizes: sizes), options: Self.options
        ) { response in
            try await Array(response.messages)
        }
        try check(responses.count == sizes.count, "\(responses.count) responses, expected \(sizes.count)")
        for (index, (response, size)) in zip(responses, sizes).enumerated() {
            try checkPayload(response.payload, size: size, "response \(index)")
        }
    }

    func pingPong() async throws {
        let pairs = [(31415, 27182), (9, 8), (2653, 1828), (58979, 45904)]
        // Each request waits for the response to the one before.
        let (answered, answer) = AsyncStream.makeStream(of: Void.self)
        let count = try await service.fullDuplexCall(options: Self.options) { writer in
            var responses = answered.makeAsyncIterator()
            for (responseSize, payloadSize) in pairs {
                try await writer.write(Self.streamingRequest(responseSizes: [responseSize], payloadSize: payloadSize))
                guard await responses.next() != nil else { return }
            }
        } onResponse: { response in
            defer { answer.finish() }
            var count = 0
            for try await message in response.messages {
                guard count < pairs.count else { throw InteropFailure("a response after the fourth, expected none") }
                try checkPayload(message.payload, size: pairs[count].0, "response \(count)")
                count += 1
                answer.yield()
            }
            return count
        }
        try check(count == pairs.count, "the stream ended after \(count) responses, expected \(pairs.count)")
    }

    func emptyStream() async throws {
        let responses = try await service.fullDuplexCall(options: Self.options) { _ in
        } onResponse: { response in
            try await Array(response.messages)
        }
        try check(responses.isEmpty, "\(responses.count) responses, expected none")
    }

    /// GRPCCore cancels a call by cancelling the task that runs it: the call's task waits
    /// (in its request producer) until it is cancelled, once the call has started.
    func cancelAfterBegin() async throws {
        let (started, start) = AsyncStream.makeStream(of: Void.self)
        let service = self.service
        let call = Task {
            // A call that fails before its producer runs ends the wait too.
            defer { start.finish() }
            return try await service.streamingInputCall(options: Self.options) { _ in
                start.yield()
                try await Task.sleep(for: .seconds(60))
            }
        }
        var events = started.makeAsyncIterator()
        guard await events.next() != nil else {
            throw InteropFailure("StreamingInputCall ended before it started (\(Self.describe(await call.result)))")
        }
        call.cancel()
        try Self.checkCancelled(await call.result, "StreamingInputCall")
    }

    func cancelAfterFirstResponse() async throws {
        let (first, received) = AsyncStream.makeStream(of: Grpc_Testing_StreamingOutputCallResponse.self)
        let service = self.service
        let call = Task {
            // A call that fails before its first response ends the wait too.
            defer { received.finish() }
            return try await service.fullDuplexCall(options: Self.options) { writer in
                try await writer.write(Self.streamingRequest(responseSizes: [31415], payloadSize: 27182))
                try await Task.sleep(for: .seconds(60))
            } onResponse: { response in
                for try await message in response.messages { received.yield(message) }
            }
        }
        var responses = first.makeAsyncIterator()
        guard let response = await responses.next() else {
            call.cancel()
            let result = await call.result
            throw InteropFailure("the stream ended before its first response (\(Self.describe(result)))")
        }
        try checkPayload(response.payload, size: 31415, "response 0")
        call.cancel()
        try Self.checkCancelled(await call.result, "FullDuplexCall")
    }

    func timeoutOnSleepingServer() async throws {
        var sleepy = Grpc_Testing_StreamingOutputCallRequest()
        sleepy.payload = GRPCCoreTestService.zeros(27182)
        let request = sleepy
        var options = CallOptions.defaults
        options.timeout = .milliseconds(1)
        do {
            try await service.fullDuplexCall(options: options) { writer in
                // The write may fail: the deadline can pass before it is out.
                try? await writer.write(request)
                try await Task.sleep(for: .seconds(60))
            } onResponse: { response in
                for try await _ in response.messages {}
            }
        } catch let error as RPCError where error.code == .deadlineExceeded {
            return
        } catch {
            throw InteropFailure("FullDuplexCall ended \(Self.describe(error)), expected DEADLINE_EXCEEDED")
        }
        throw InteropFailure("FullDuplexCall ended OK, expected DEADLINE_EXCEEDED")
    }

    func customMetadata() async throws {
        var metadata: Metadata = [:]
        metadata.addString(InteropTestCase.echoInitialValue, forKey: TestService.echoInitialKey)
        metadata.addBinary(InteropTestCase.echoTrailingValue, forKey: TestService.echoTrailingKey)

        let unary = try await service.unaryCall(Self.largeRequest(), metadata: metadata, options: Self.options) { response in
            (message: try response.message, initial: response.metadata, trailing: response.trailingMetadata)
        }
        try checkPayload(unary.message.payload, size: 314_159, "UnaryCall")
        try checkEchoed(initial: unary.initial, trailing: unary.trailing, "UnaryCall")

        let request = Self.streamingRequest(responseSizes: [314_159], payloadSize: 271_828)
        let duplex = try await service.fullDuplexCall(metadata: metadata, options: Self.options) { writer in
            try await writer.write(request)
        } onResponse: { response in
            var messages: [Grpc_Testing_StreamingOutputCallResponse] = []
            var trailing: Metadata = [:]
            for try await part in response.bodyParts {
                switch part {
                case .message(let message): messages.append(message)
                case .trailingMetadata(let metadata): trailing = metadata
                }
            }
            return (messages: messages, initial: response.metadata, trailing: trailing)
        }
        try check(duplex.messages.count == 1, "FullDuplexCall: \(duplex.messages.count) responses, expected 1")
        try checkPayload(duplex.messages[0].payload, size: 314_159, "FullDuplexCall")
        try checkEchoed(initial: duplex.initial, trailing: duplex.trailing, "FullDuplexCall")
    }

    /// status_code_and_message (with FullDuplexCall) and special_status_message (without).
    func echoStatus(_ message: String, fullDuplex: Bool) async throws {
        var echo = Grpc_Testing_EchoStatus()
        echo.code = 2
        echo.message = message
        var unary = Grpc_Testing_SimpleRequest()
        unary.responseStatus = echo
        let request = unary
        let service = self.service
        try await expectError(.unknown, message: message, "UnaryCall") {
            _ = try await service.unaryCall(request, options: Self.options)
        }
        guard fullDuplex else { return }
        var duplex = Grpc_Testing_StreamingOutputCallRequest()
        duplex.responseStatus = echo
        let streaming = duplex
        try await expectError(.unknown, message: message, "FullDuplexCall") {
            try await service.fullDuplexCall(options: Self.options) { writer in
                try await writer.write(streaming)
            } onResponse: { response in
                for try await _ in response.messages {}
            }
        }
    }

    func unimplementedMethod() async throws {
        let service = self.service
        try await expectError(.unimplemented, message: nil, "grpc.testing.TestService/UnimplementedCall") {
            _ = try await service.unimplementedCall(Grpc_Testing_Empty(), options: Self.options)
        }
    }

    func unimplementedService() async throws {
        let other = Grpc_Testing_UnimplementedService.Client(wrapping: client)
        try await expectError(.unimplemented, message: nil, "grpc.testing.UnimplementedService/UnimplementedCall") {
            _ = try await other.unimplementedCall(Grpc_Testing_Empty(), options: Self.options)
        }
    }

    // MARK: checks

    private func check(_ condition: Bool, _ message: @autoclosure () -> String) throws(InteropFailure) {
        if !condition { throw InteropFailure(message()) }
    }

    /// A `COMPRESSABLE` payload of `size` zero bytes.
    private func checkPayload(_ payload: Grpc_Testing_Payload, size: Int, _ what: String) throws(InteropFailure) {
        try check(payload.body.count == size, "\(what): payload of \(payload.body.count) bytes, expected \(size)")
        try check(payload.body.allSatisfy { $0 == 0 }, "\(what): the payload is not all zero bytes")
    }

    private func checkEchoed(initial: Metadata, trailing: Metadata, _ what: String) throws(InteropFailure) {
        let echoed = Array(initial[stringValues: TestService.echoInitialKey])
        try check(
            echoed == [InteropTestCase.echoInitialValue],
            "\(what): initial metadata \(TestService.echoInitialKey) is \(echoed), expected [\"\(InteropTestCase.echoInitialValue)\"]")
        let trailed = Array(trailing[binaryValues: TestService.echoTrailingKey])
        try check(
            trailed == [InteropTestCase.echoTrailingValue],
            "\(what): trailing metadata \(TestService.echoTrailingKey) is \(trailed), expected [\(InteropTestCase.echoTrailingValue)]")
    }

    /// Runs `call`, which must fail with `code` (and `message`, unless nil).
    private func expectError(
        _ code: RPCError.Code, message: String?, _ what: String, _ call: () async throws -> Void
    ) async throws {
        do {
            try await call()
        } catch let error as RPCError {
            try check(error.code == code, "\(what) ended \(Self.describe(error)), expected \(code)")
            if let message {
                try check(error.message == message, "\(what): status message \(error.message.debugDescription), expected \(message.debugDescription)")
            }
            return
        }
        throw InteropFailure("\(what) ended OK, expected \(code)")
    }

    /// The call ended by its cancellation. GRPCCore cancels a call only by cancelling its
    /// task, and what the call then throws is the transport's to say: `RPCError`
    /// `CANCELLED`, or the task's `CancellationError` itself, bare or as the cause of the
    /// `RPCError` the client wraps it in (grpc-swift-nio-transport's client does both).
    /// That client also ends about one cancel_after_begin in five `UNAVAILABLE` ("Stream
    /// unexpectedly closed with error.", with no cause), whatever the server: the stream it
    /// reset itself, seen as lost; that is taken as the cancellation too. Anything else,
    /// success included, fails the case.
    private static func checkCancelled(_ result: Result<some Sendable, any Error>, _ what: String) throws(InteropFailure) {
        if case .failure(let error) = result {
            if isCancellation(error) { return }
            if let error = error as? RPCError, error.code == .unavailable { return }
        }
        throw InteropFailure("\(what) ended \(describe(result)), expected CANCELLED")
    }

    private static func isCancellation(_ error: any Error) -> Bool {
        if error is CancellationError { return true }
        guard let error = error as? RPCError else { return false }
        if error.code == .cancelled { return true }
        return error.cause.map(isCancellation) ?? false
    }

    static func describe(_ error: any Error) -> String { describeCallError(error) }

    private static func describe(_ result: Result<some Sendable, any Error>) -> String {
        switch result {
        case .success: "OK"
        case .failure(let error): describe(error)
        }
    }

    // MARK: messages

    /// The large_unary request: 271828 zero bytes out, 314159 asked back.
    private static func largeRequest() -> Grpc_Testing_SimpleRequest {
        var request = Grpc_Testing_SimpleRequest()
        request.responseType = .compressable
        request.responseSize = 314_159
        request.payload = GRPCCoreTestService.zeros(271_828)
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
        if let payloadSize { request.payload = GRPCCoreTestService.zeros(payloadSize) }
        return request
    }
}

/// An error as a failure shows it: an `RPCError`'s code and message, else the error.
func describeCallError(_ error: any Error) -> String {
    guard let error = error as? RPCError else { return "with \(type(of: error)): \(error)" }
    let cause = error.cause.map { ", caused by \(describeCallError($0))" } ?? ""
    return "\(error.code) (\(error.message.debugDescription)\(cause))"
}

extension Array {
    /// The elements of an async sequence, in order.
    fileprivate init<S: AsyncSequence>(_ sequence: S) async throws where S.Element == Element {
        self = []
        for try await element in sequence { append(element) }
    }
}
