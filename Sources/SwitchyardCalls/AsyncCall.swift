import DequeModule
import Synchronization
import Switchyard

/// The async/await face of a ``Call``: `for try await message in call.messages`, `try
/// await call.write(message)` (returns once the message is in the kernel), and the
/// final ``status()``.
///
/// With flow control on, each step of ``messages`` asks for exactly one message
/// (``Call/receiveNextMessage()``) and only when none is waiting, so the call never
/// holds more than one undelivered message. With it off, messages are buffered here as
/// they arrive. ``CallChannel/withCall(method:metadata:options:_:)`` and ``CallServer`` run the code that
/// uses it on the call's event loop.
///
/// Task cancellation: a task cancelled while it waits in ``next()``, ``write(_:)``,
/// ``finishSending()``, ``finish(_:)`` or ``status()`` (or that calls one already
/// cancelled) cancels the call (``Call/cancel()``): the wait ends at once, reads and
/// writes throwing `cancelled`, reason `call cancelled`, and ``status()`` returning that
/// status; the peer's call ends `cancelled` (RST_STREAM CANCEL). A call that already
/// ended keeps its status.
public final class AsyncCall: CallHandler, Sendable {
    private struct State {
        var call: Call?
        var buffered: Deque<[UInt8]> = []
        var reader: CheckedContinuation<[UInt8]?, any Error>?
        var requested = false
        var peerEnded = false
        var status: CallStatus?
        var statusWaiters: [CheckedContinuation<CallStatus, Never>] = []
    }
    private let state = Mutex(State())

    init() {}

    func attach(_ call: Call) {
        state.withLock { $0.call = call }
    }

    /// The call underneath.
    public var call: Call { state.withLock { $0.call! } }

    // MARK: CallHandler (on the loop)

    public func call(_ call: Call, didReceive message: [UInt8]) {
        let reader = state.withLock { state -> CheckedContinuation<[UInt8]?, any Error>? in
            state.requested = false
            if let reader = state.reader {
                state.reader = nil
                return reader
            }
            state.buffered.append(message)
            return nil
        }
        reader?.resume(returning: message)
    }

    public func callDidReceiveEnd(_ call: Call) {
        let reader = state.withLock { state -> CheckedContinuation<[UInt8]?, any Error>? in
            state.peerEnded = true
            defer { state.reader = nil }
            return state.reader
        }
        reader?.resume(returning: nil)
    }

    public func call(_ call: Call, didCloseWith status: CallStatus) {
        let (reader, waiters) = state.withLock { state in
            state.status = status
            defer {
                state.reader = nil
                state.statusWaiters = []
            }
            return (state.reader, state.statusWaiters)
        }
        if let reader {
            if let error = status.error { reader.resume(throwing: error) } else { reader.resume(returning: nil) }
        }
        for waiter in waiters { waiter.resume(returning: status) }
    }

    // MARK: the async face

    /// The next message, or nil when the peer sends no more (client: the call ended OK;
    /// server: the client finished sending).
    /// - Throws: the call's error status (`unavailable` when the connection broke, ...).
    public func next() async throws -> [UInt8]? {
        try await withTaskCancellationHandler {
            try await waitForNext()
        } onCancel: {
            self.cancelForTask()
        }
    }

    private func waitForNext() async throws -> [UInt8]? {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<[UInt8]?, any Error>) in
            enum Step { case value([UInt8]?), failure(TransportError), wait(request: Call?) }
            let step: Step = state.withLock { state in
                if let message = state.buffered.popFirst() { return .value(message) }
                if state.peerEnded { return .value(nil) }
                if let status = state.status {
                    if let error = status.error { return .failure(error) }
                    return .value(nil)
                }
                if state.reader != nil {
                    return .failure(TransportError(code: .failedPrecondition, reason: .misuse, message: "two concurrent reads of one call's messages"))
                }
                state.reader = continuation
                if state.requested { return .wait(request: nil) }
                state.requested = true
                return .wait(request: state.call)
            }
            switch step {
            case .value(let message): continuation.resume(returning: message)
            case .failure(let error): continuation.resume(throwing: error)
            case .wait(let call):
                if let call, call.options.enableFlowControl || call.options.flowController != nil {
                    call.receiveNextMessage()
                }
            }
        }
    }

    /// The received messages.
    public var messages: Messages { Messages(call: self) }

    public struct Messages: AsyncSequence, Sendable {
        public typealias Element = [UInt8]
        let call: AsyncCall
        public struct AsyncIterator: AsyncIteratorProtocol {
            let call: AsyncCall
            public mutating func next() async throws -> [UInt8]? { try await call.next() }
        }
        public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(call: call) }
    }

    /// Sends a message; returns once it is in the kernel.
    public func write(_ message: [UInt8]) async throws {
        let call = self.call
        try await completing { completion in call.send(message, completion: completion) }
    }

    /// Client: sends no more messages (half-close); returns once that is in the kernel.
    public func finishSending() async throws {
        let call = self.call
        try await completing { completion in call.finishSending(completion: completion) }
    }

    /// The method the client named (``Call/method``).
    public var method: String { call.method }
    /// The client's request metadata (``Call/metadata``).
    public var metadata: CallMetadata { call.metadata }
    /// The server's response metadata (``Call/responseMetadata``): on a client, final
    /// once ``next()`` returned a message or the call ended.
    public var responseMetadata: CallMetadata { call.responseMetadata }
    /// The server's trailing metadata (``Call/trailingMetadata``): on a client, final once
    /// the call ended (``status()`` returned, or ``next()`` returned nil or threw).
    public var trailingMetadata: CallMetadata { call.trailingMetadata }

    /// Server: sends response metadata, before the first ``write(_:)``
    /// (``Call/sendResponseMetadata(_:completion:)``); returns once it is in the kernel.
    public func sendResponseMetadata(_ metadata: CallMetadata) async throws {
        let call = self.call
        try await completing { completion in call.sendResponseMetadata(metadata, completion: completion) }
    }

    /// Server: the trailing metadata sent with the status (``Call/setTrailingMetadata(_:)``).
    public func setTrailingMetadata(_ metadata: CallMetadata) {
        call.setTrailingMetadata(metadata)
    }

    /// Server: ends the call with `status`; returns once it is in the kernel.
    public func finish(_ status: CallStatus = .ok) async throws {
        let call = self.call
        try await completing { completion in call.finish(status, completion: completion) }
    }

    /// Starts a write-like operation with `start` and waits for its completion; a task
    /// cancelled meanwhile cancels the call, which completes the operation `cancelled`
    /// (or with the error that ended the call before).
    private func completing(_ start: (@escaping WriteCompletion) -> Void) async throws {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                start { error in
                    if let error { continuation.resume(throwing: error) } else { continuation.resume() }
                }
            }
        } onCancel: {
            self.cancelForTask()
        }
    }

    /// The task waiting on this call was cancelled: the call is cancelled (see the type).
    private func cancelForTask() {
        state.withLock { $0.call }?.cancel()
    }

    /// How the call ended; waits for the end.
    public func status() async -> CallStatus {
        await withTaskCancellationHandler {
            await waitForStatus()
        } onCancel: {
            self.cancelForTask()
        }
    }

    private func waitForStatus() async -> CallStatus {
        await withCheckedContinuation { (continuation: CheckedContinuation<CallStatus, Never>) in
            let done: CallStatus? = state.withLock { state in
                if let status = state.status { return status }
                state.statusWaiters.append(continuation)
                return nil
            }
            if let done { continuation.resume(returning: done) }
        }
    }

    /// Cancels the call (see ``Call/cancel()``).
    public func cancel() { call.cancel() }
}
