import Synchronization

/// A client's way to one target: it makes calls, each on a fresh connection of its own,
/// made with the channel's transport (so its backend) when the call starts.
///
/// A channel connects lazily: nothing happens until a call starts. Because each call
/// connects afresh, a call that starts after a broken connection (or after the network
/// changed) uses a new one. The channel keeps its open calls, so ``cancelAll(with:)``
/// can end them (for example when connectivity changes) and ``close()`` can end them
/// and refuse new ones.
public final class Channel: Sendable {
    public let target: Endpoint
    public let transport: any Transport
    public let connectOptions: ConnectOptions

    private struct State {
        var calls: [ObjectIdentifier: Call] = [:]
        var closed = false
    }
    private let state = Mutex(State())

    public init(target: Endpoint, transport: any Transport, connectOptions: ConnectOptions = ConnectOptions()) {
        self.target = target
        self.transport = transport
        self.connectOptions = connectOptions
    }

    /// Connects and starts a call whose events go to `handler`.
    /// - Throws: the connect's ``TransportError`` (`unavailable`/`refused`, `unavailable`/
    ///   `name resolution`, `deadlineExceeded`, ...); `cancelled`/`closed` once the
    ///   channel is closed.
    public func startCall(options: CallOptions = CallOptions(), handler: any CallHandler) async throws -> Call {
        try checkOpen()
        let connection = try await transport.connect(to: target, options: connectOptions)
        let call = Call(role: .client, connection: connection, options: options)
        let tracked = Tracking(channel: self, inner: handler)
        let admitted = state.withLock { state -> Bool in
            if state.closed { return false }
            state.calls[ObjectIdentifier(call)] = call
            return true
        }
        guard admitted else {
            connection.close()
            throw TransportError(code: .cancelled, reason: .closed, message: "the channel to \(target) is closed")
        }
        call.start(handler: tracked)
        return call
    }

    /// Runs `body` with an async call, on the call's event loop (it is the task's
    /// executor, so awaiting a message or a write does not hop to the global pool). The
    /// call is cancelled if `body` throws or returns before the call ended.
    public func withCall<Result: Sendable>(
        options: CallOptions = CallOptions(),
        _ body: (AsyncCall) async throws -> Result
    ) async throws -> Result {
        let async = AsyncCall()
        let call = try await startCall(options: options, handler: async)
        async.attach(call)
        return try await withTaskExecutorPreference(call.eventLoop) {
            do {
                let result = try await body(async)
                call.cancel()
                return result
            } catch {
                call.cancel()
                throw error
            }
        }
    }

    /// Calls that have started and not yet ended.
    public var openCalls: Int { state.withLock { $0.calls.count } }

    /// Ends every open call: each is cancelled and its handler hears `error`-less
    /// `cancelled`; use it when the network under the channel changed.
    public func cancelAll() {
        for call in state.withLock({ Array($0.calls.values) }) { call.cancel() }
    }

    /// Ends every open call and refuses new ones.
    public func close() {
        state.withLock { $0.closed = true }
        cancelAll()
    }

    private func checkOpen() throws {
        if state.withLock({ $0.closed }) {
            throw TransportError(code: .cancelled, reason: .closed, message: "the channel to \(target) is closed")
        }
    }

    fileprivate func forget(_ call: Call) {
        _ = state.withLock { $0.calls.removeValue(forKey: ObjectIdentifier(call)) }
    }

    /// Forwards to the user's handler and forgets the call when it ends.
    private final class Tracking: CallHandler {
        let channel: Channel
        let inner: any CallHandler
        init(channel: Channel, inner: any CallHandler) {
            self.channel = channel
            self.inner = inner
        }
        func call(_ call: Call, didReceive message: [UInt8]) { inner.call(call, didReceive: message) }
        func callDidReceiveEnd(_ call: Call) { inner.callDidReceiveEnd(call) }
        func callDidWriteData(_ call: Call) { inner.callDidWriteData(call) }
        func call(_ call: Call, didCloseWith status: CallStatus) {
            channel.forget(call)
            inner.call(call, didCloseWith: status)
        }
    }
}
