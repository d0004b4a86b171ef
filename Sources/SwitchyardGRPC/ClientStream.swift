import DequeModule
import GRPCCore
import Switchyard
import SwitchyardCalls
import Synchronization

/// One RPC of a ``SwitchyardClientTransport``: GRPCCore's stream (its request parts in,
/// its response parts out) on one call of the channel.
///
/// GRPCCore opens the stream first and writes the request's metadata as its first part;
/// the call carries that metadata in its request headers, so it starts then (the connect,
/// if the channel has no connection, happens in that write). A call that cannot start
/// (the name does not resolve, no connection, an invalid metadata value) ends the stream
/// with the error as its status.
///
/// The response: the server's metadata before the first message (or before the status
/// when the server sent any), the messages, then the status with the trailers. Flow
/// control is on: a message is read from the network only when GRPCCore asks for the
/// next part and none waits, so the stream holds at most one undelivered message.
///
/// Cancelling: ``cancel()`` (the task of the RPC was cancelled, the request's producer
/// failed, GRPCCore let go of the stream) cancels the call, which resets its HTTP/2
/// stream (RST_STREAM CANCEL); the response ends `cancelled`.
final class ClientStream: CallHandler, Sendable {
    typealias Part = RPCResponsePart<[UInt8]>

    private struct State {
        /// The call, once started.
        var call: Call?
        /// Whether the call is being started or was (the first metadata write).
        var starting = false
        /// Cancelled before the call started: the start cancels it.
        var cancelled = false
        /// Parts received and not yet read.
        var parts: Deque<Part> = []
        /// Whether the response's metadata was handed over (it goes before the first
        /// message or the status).
        var metadataDelivered = false
        /// Whether the status was queued: no part follows it.
        var ended = false
        /// GRPCCore waiting for the next part.
        var reader: CheckedContinuation<Part?, Never>?
        /// Whether a message was asked of the call and has not arrived.
        var requested = false
    }
    private let state = Mutex(State())
    private let channel: CallChannel
    private let method: String
    private let options: CallConfiguration
    let maximumRequestMessageBytes: Int?

    init(channel: CallChannel, method: String, options: CallConfiguration, maximumRequestMessageBytes: Int?) {
        self.channel = channel
        self.method = method
        self.options = options
        self.maximumRequestMessageBytes = maximumRequestMessageBytes
    }

    // MARK: the request

    /// Starts the call with `metadata` as its request metadata.
    /// - Throws: `RPCError`: `failedPrecondition` for a second metadata part; what the
    ///   call's start threw (which is also the response's status).
    func start(metadata: Metadata) async throws {
        let first = state.withLock { state in
            defer { state.starting = true }
            return !state.starting
        }
        guard first else {
            throw RPCError(code: .failedPrecondition, message: "the request's metadata was written twice (a bug in what writes the request)")
        }
        let call: Call
        do {
            let converted = try CallMetadata(grpc: metadata)
            call = try await channel.startCall(method: method, metadata: converted, options: options, handler: self)
        } catch {
            let failure = rpcError(error)
            end(with: Status(code: Status.Code(failure.code), message: failure.message), trailers: [:])
            throw failure
        }
        let (cancel, request) = state.withLock { state -> (Bool, Bool) in
            state.call = call
            if state.cancelled { return (true, false) }
            // GRPCCore already waits for the first part.
            let request = state.reader != nil && !state.requested
            if request { state.requested = true }
            return (false, request)
        }
        if cancel { call.cancel() }
        if request { call.receiveNextMessage() }
    }

    /// The started call, and whether it has ended (its status is queued).
    private func startedCall() throws(RPCError) -> (Call, ended: Bool) {
        guard let (call, ended) = state.withLock({ state in state.call.map { ($0, state.ended) } }) else {
            throw RPCError(code: .failedPrecondition, message: "a request message was written before the request's metadata (a bug in what writes the request)")
        }
        return (call, ended)
    }

    /// Request bytes ``send(_:)`` handed to the call and not yet in the kernel (or failed).
    private let unsentBytes = Atomic<Int>(0)

    /// How many request bytes may wait unsent while ``send(_:)`` returns at once: the
    /// high-water mark grpc-swift-nio-transport's writer also uses (a NIO channel's
    /// default, 64 KiB).
    static let writeBehindLimit = 64 * 1024

    /// Sends `message`. Returns at once while the request bytes not yet in the kernel,
    /// this message's included, stay within ``writeBehindLimit``, so a producer that
    /// writes in a loop hands over several messages per turn of the event loop, which
    /// leave in one write; past it, returns once this message is in the kernel. A
    /// message written behind that fails ends the call: the response ends with its
    /// status, and the next write throws.
    func send(_ message: [UInt8]) async throws {
        if let maximumRequestMessageBytes, message.count > maximumRequestMessageBytes {
            let error = RPCError(
                code: .resourceExhausted,
                message: "the request message is \(message.count) bytes; the method allows at most \(maximumRequestMessageBytes)")
            cancel()
            throw error
        }
        let (call, ended) = try startedCall()
        let size = message.count
        let unsent = unsentBytes.wrappingAdd(size, ordering: .relaxed).newValue
        if !ended, unsent <= Self.writeBehindLimit {
            call.send(message) { _ in self.unsentBytes.wrappingSubtract(size, ordering: .relaxed) }
            return
        }
        try await completing(call) { completion in
            call.send(message) { error in
                self.unsentBytes.wrappingSubtract(size, ordering: .relaxed)
                completion(error)
            }
        }
    }

    /// Ends the request (half-close); returns once that is in the kernel or the call ended.
    func finishSending() async {
        guard let (call, _) = try? startedCall() else { return }
        try? await completing(call) { completion in call.finishSending(completion: completion) }
    }

    private func completing(_ call: Call, _ start: (@escaping WriteCompletion) -> Void) async throws {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                start { error in
                    if let error { continuation.resume(throwing: error.rpcError) } else { continuation.resume() }
                }
            }
        } onCancel: {
            call.cancel()
        }
    }

    /// Cancels the call (see the type); nothing once it ended.
    func cancel() {
        let call = state.withLock { state -> Call? in
            state.cancelled = true
            return state.call
        }
        call?.cancel()
        if call == nil {
            end(with: Status(code: .cancelled, message: "the RPC was cancelled before its call started"), trailers: [:])
        }
    }

    // MARK: the response

    /// The next response part, or nil after the status.
    func next() async -> Part? {
        await withTaskCancellationHandler {
            await waitForNext()
        } onCancel: {
            self.cancel()
        }
    }

    private func waitForNext() async -> Part? {
        await withCheckedContinuation { (continuation: CheckedContinuation<Part?, Never>) in
            enum Step { case value(Part?), wait(request: Call?) }
            let step: Step = state.withLock { state in
                if let part = state.parts.popFirst() { return .value(part) }
                if state.ended { return .value(nil) }
                precondition(state.reader == nil, "two concurrent reads of one RPC's response (a bug in what reads it)")
                state.reader = continuation
                guard let call = state.call, !state.requested else { return .wait(request: nil) }
                state.requested = true
                return .wait(request: call)
            }
            switch step {
            case .value(let part): continuation.resume(returning: part)
            case .wait(let call): call?.receiveNextMessage()
            }
        }
    }

    /// Queues `parts`, handing the first to a waiting reader.
    private func deliver(_ make: (inout State) -> [Part]) {
        let (reader, part): (CheckedContinuation<Part?, Never>?, Part?) = state.withLock { state in
            for part in make(&state) { state.parts.append(part) }
            guard let reader = state.reader, let part = state.parts.popFirst() else { return (nil, nil) }
            state.reader = nil
            return (reader, part)
        }
        if let reader { reader.resume(returning: part) }
    }

    /// Queues the status (once), after the response metadata when it was not handed over
    /// and the server sent some (a response that is not Trailers-Only).
    private func end(with status: Status, trailers: Metadata, responseMetadata: Metadata? = nil) {
        deliver { state in
            guard !state.ended else { return [] }
            state.ended = true
            var parts: [Part] = []
            if !state.metadataDelivered, let responseMetadata {
                state.metadataDelivered = true
                parts.append(.metadata(responseMetadata))
            }
            parts.append(.status(status, trailers))
            return parts
        }
    }

    // MARK: CallHandler (on the call's loop)

    func call(_ call: Call, didReceive message: [UInt8]) {
        deliver { state in
            state.requested = false
            guard !state.metadataDelivered else { return [.message(message)] }
            state.metadataDelivered = true
            return [.metadata(Metadata(call.responseMetadata)), .message(message)]
        }
    }

    func call(_ call: Call, didCloseWith status: CallStatus) {
        // The server's headers came when it sent metadata or ended well (an OK status
        // without headers is no gRPC response the engine accepts); a failure without
        // metadata is taken as Trailers-Only.
        let response = call.responseMetadata
        let sentHeaders = status.isOK || !response.isEmpty
        end(with: status.grpcStatus, trailers: Metadata(call.trailingMetadata), responseMetadata: sentHeaders ? Metadata(response) : nil)
    }
}

/// GRPCCore's view of a ``ClientStream``'s response.
struct ClientInbound: AsyncSequence, Sendable {
    typealias Element = RPCResponsePart<[UInt8]>
    typealias Failure = any Error
    let stream: ClientStream

    struct AsyncIterator: AsyncIteratorProtocol {
        let stream: ClientStream
        mutating func next() async throws -> RPCResponsePart<[UInt8]>? { await stream.next() }
    }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(stream: stream) }
}

/// GRPCCore's writer of a ``ClientStream``'s request.
struct ClientOutbound: ClosableRPCWriterProtocol {
    typealias Element = RPCRequestPart<[UInt8]>
    let stream: ClientStream

    func write(_ element: RPCRequestPart<[UInt8]>) async throws {
        switch element {
        case .metadata(let metadata): try await stream.start(metadata: metadata)
        case .message(let message): try await stream.send(message)
        }
    }

    func write(contentsOf elements: some Sequence<RPCRequestPart<[UInt8]>>) async throws {
        for element in elements { try await write(element) }
    }

    func finish() async { await stream.finishSending() }

    func finish(throwing error: any Error) async { stream.cancel() }
}
