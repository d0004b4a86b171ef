import Switchyard
import SwitchyardCalls
import Synchronization

/// A ``CallHandler`` that records every event of one call, for the call scenarios.
///
/// It checks what the contract promises about delivery: every callback runs on the
/// call's event loop, nothing arrives after `didClose`, and `didClose` runs once. Hooks
/// let a scenario act on an event (echo a message, finish the call); they run on the
/// loop, inside the callback, after the event was recorded.
///
/// Its state is behind a `Mutex`, so it is `Sendable` without `@unchecked`: the
/// scenario reads it from its own task while the loop writes it.
final class CallRecorder: CallHandler {
    /// One recorded event, in the order it happened.
    enum Event: Sendable, Equatable, CustomStringConvertible {
        /// `didReceive`, with the message's position among the received messages.
        case message(Int)
        /// `callDidReceiveEnd`.
        case end
        /// `callDidWriteData`.
        case wrote
        /// A send's completion (noted by the scenario with ``note(_:)``).
        case completion(Int)
        /// `didClose`.
        case closed

        var description: String {
            switch self {
            case .message(let index): "message \(index)"
            case .end: "end"
            case .wrote: "didWriteData"
            case .completion(let index): "completion of send \(index)"
            case .closed: "didClose"
            }
        }
    }

    struct Events: Sendable {
        var messages: [[UInt8]] = []
        /// Messages received (also when their bytes are not kept).
        var received = 0
        var ends = 0
        var writes = 0
        var statuses: [CallStatus] = []
        /// When `didClose` first ran.
        var closedAt: ContinuousClock.Instant?
        var log: [Event] = []
        /// Completions noted with an error: (send index, error).
        var failedCompletions: [(Int, TransportError)] = []
        /// Callbacks that ran off the call's event loop (the contract says never).
        var offLoop: [String] = []
        /// Callbacks that ran after `didClose` (the contract says none do).
        var late: [String] = []
    }

    private let events = Mutex(Events())
    private let keepsMessages: Bool
    private let onReceive: (@Sendable (Call, [UInt8]) -> Void)?
    private let onEnd: (@Sendable (Call) -> Void)?

    /// - Parameters:
    ///   - keepsMessages: whether to keep each message's bytes (otherwise only counted).
    ///   - onReceive: runs on the loop after a message was recorded.
    ///   - onEnd: runs on the loop after `callDidReceiveEnd` was recorded.
    init(
        keepsMessages: Bool = true,
        onReceive: (@Sendable (Call, [UInt8]) -> Void)? = nil,
        onEnd: (@Sendable (Call) -> Void)? = nil
    ) {
        self.keepsMessages = keepsMessages
        self.onReceive = onReceive
        self.onEnd = onEnd
    }

    /// A copy of everything recorded so far.
    var snapshot: Events { events.withLock { $0 } }
    var messageCount: Int { events.withLock { $0.received } }
    var writeCount: Int { events.withLock { $0.writes } }

    /// What the call recorded so far, for a wait's failure to quote.
    func seen() -> String {
        let log = snapshot.log
        return "that call had recorded \(log.count) events\(log.isEmpty ? "" : ", the last ones \(log.suffix(4))")"
    }
    var status: CallStatus? { events.withLock { $0.statuses.first } }
    /// When the call ended (`didClose` ran), if it has.
    var closedAt: ContinuousClock.Instant? { events.withLock { $0.closedAt } }

    /// Records a send's completion (call it from the completion, which runs on the loop).
    func note(completion index: Int, _ error: TransportError?) {
        events.withLock { events in
            events.log.append(.completion(index))
            if let error { events.failedCompletions.append((index, error)) }
        }
    }

    private func record(_ call: Call, _ name: String, _ change: (inout Events) -> Void) {
        let onLoop = call.eventLoop.inEventLoop
        events.withLock { events in
            if !onLoop { events.offLoop.append(name) }
            if !events.statuses.isEmpty { events.late.append(name) }
            change(&events)
        }
    }

    func call(_ call: Call, didReceive message: [UInt8]) {
        record(call, "didReceive") { events in
            events.log.append(.message(events.received))
            events.received += 1
            if keepsMessages { events.messages.append(message) }
        }
        onReceive?(call, message)
    }

    func callDidReceiveEnd(_ call: Call) {
        record(call, "callDidReceiveEnd") { $0.ends += 1; $0.log.append(.end) }
        onEnd?(call)
    }

    func callDidWriteData(_ call: Call) {
        record(call, "callDidWriteData") { $0.writes += 1; $0.log.append(.wrote) }
    }

    func call(_ call: Call, didCloseWith status: CallStatus) {
        let now = KitClock.now
        record(call, "didClose") { events in
            events.statuses.append(status)
            events.log.append(.closed)
            if events.closedAt == nil { events.closedAt = now }
        }
    }
}

/// Values a server's handlers hand to the scenario: the calls it accepted, messages it
/// collected, in arrival order. Mutex-protected.
final class Collected<Value: Sendable>: Sendable {
    private let values = Mutex<[Value]>([])
    init() {}
    func append(_ value: Value) { values.withLock { $0.append(value) } }
    var all: [Value] { values.withLock { $0 } }
    var count: Int { values.withLock { $0.count } }
    subscript(index: Int) -> Value { values.withLock { $0[index] } }
}

extension ConformanceContext {
    /// Starts a ``CallServer`` on the server transport (``localEndpoint()``) with the
    /// handler face.
    func startCallServer(
        options: CallConfiguration = CallConfiguration(), file: String = #fileID, line: Int = #line,
        makeHandler: @escaping @Sendable (Call) -> any CallHandler
    ) async throws -> CallServer {
        let server = self.server
        let endpoint = localEndpoint()
        return try await step("starting a call server", seconds: 10, file: file, line: line) {
            try await CallServer.start(transport: server, on: endpoint, options: options, makeHandler: makeHandler)
        }
    }

    /// Starts a ``CallServer`` on the server transport (``localEndpoint()``) with the
    /// async face.
    func startCallServer(
        options: CallConfiguration = CallConfiguration(), file: String = #fileID, line: Int = #line,
        serve: @escaping @Sendable (AsyncCall) async throws -> CallStatus
    ) async throws -> CallServer {
        let server = self.server
        let endpoint = localEndpoint()
        return try await step("starting a call server", seconds: 10, file: file, line: line) {
            try await CallServer.start(transport: server, on: endpoint, options: options, serve: serve)
        }
    }

    /// A channel from the client transport to `server`.
    func channel(to server: CallServer) -> CallChannel {
        CallChannel(target: target(of: server.localAddress), transport: client)
    }

    /// Starts a call with the handler face, bounded in time.
    func startCall(
        on channel: CallChannel, options: CallConfiguration = CallConfiguration(), handler: any CallHandler,
        file: String = #fileID, line: Int = #line
    ) async throws -> Call {
        try await step("starting a call to \(channel.target)", seconds: 15, file: file, line: line) {
            try await channel.startCall(options: options, handler: handler)
        }
    }

    /// Waits for the recorded call's status; a timeout names what the call had seen.
    /// With `quiet`, a status due in milliseconds: the wait also fails once the call
    /// recorded nothing new for `quiet` seconds.
    func status(
        of recorder: CallRecorder, _ what: String, seconds: Double = 10, quiet: Double? = nil,
        file: String = #fileID, line: Int = #line
    ) async throws -> CallStatus {
        let started = KitClock.now
        let deadline = started + .milliseconds(Int(seconds * 1000))
        var events = recorder.snapshot.log.count
        var changed = started
        while true {
            if let status = recorder.status { return status }
            let now = KitClock.now
            if now >= deadline {
                throw failure("timed out after \(seconds) s waiting until \(what) ended; \(recorder.seen())", file: file, line: line)
            }
            let recorded = recorder.snapshot.log.count
            if recorded != events {
                events = recorded
                changed = now
            }
            if let quiet, now - changed >= .milliseconds(Int(quiet * 1000)) {
                throw failure(
                    "waited \(milliseconds(now - started)) until \(what) ended, and nothing moved in the last \(quiet) s; \(recorder.seen())",
                    file: file, line: line)
            }
            try await KitClock.sleep(for: .milliseconds(2))
        }
    }

    /// Fails unless `status` is OK.
    func expectOK(_ status: CallStatus, _ what: String, file: String = #fileID, line: Int = #line) throws {
        if let error = status.error {
            throw failure("\(what): expected status OK, received \(error)", file: file, line: line)
        }
    }

    /// Fails unless `status` is the error with this code and reason.
    /// The reason a call ends with, `unavailable`, when the peer resets its connection:
    /// `reset`; on a network of socket paths, where a reset is a close (see
    /// ``listensOnPaths``), `closed` (the connection ended before the status); and on
    /// such a network under TLS, `truncated` (a reset sends no `close_notify`, so the
    /// close that the reset is ends the stream without it, and the TLS layer says so).
    var peerResetReason: TransportError.Reason {
        guard listensOnPaths else { return .reset }
        return serverTransportBackend?.speaksTLS == true ? .truncated : .closed
    }

    /// Fails unless `error` is how a peer's reset of the connection reaches a call:
    /// `unavailable`, ``peerResetReason``. On a network of socket paths the reset is a
    /// close, and an end that writes before it reads the end of stream learns of it
    /// from its write (`EPIPE`): `unavailable`/`reset` is right there too.
    func expectPeerReset(_ error: (any Error)?, _ what: String, file: String = #fileID, line: Int = #line) throws {
        if listensOnPaths, let error = error as? TransportError, error.code == .unavailable, error.reason == .reset { return }
        try expectError(error, code: .unavailable, reason: peerResetReason, what, file: file, line: line)
    }

    /// ``expectPeerReset(_:_:file:line:)`` for a call's status.
    func expectPeerReset(_ status: CallStatus, _ what: String, file: String = #fileID, line: Int = #line) throws {
        if listensOnPaths, let error = status.error, error.code == .unavailable, error.reason == .reset { return }
        try expectStatus(status, code: .unavailable, reason: peerResetReason, what, file: file, line: line)
    }

    func expectStatus(
        _ status: CallStatus, code: TransportError.Code, reason: TransportError.Reason, _ what: String,
        file: String = #fileID, line: Int = #line
    ) throws {
        guard let error = status.error else {
            throw failure("\(what): expected status \(code) (\(reason)), received OK", file: file, line: line)
        }
        try expectError(error, code: code, reason: reason, what, file: file, line: line)
    }

    /// Fails if the recorder saw a callback off the loop, after `didClose`, or more than
    /// one `didClose`.
    func expectWellBehaved(_ recorder: CallRecorder, _ what: String, file: String = #fileID, line: Int = #line) throws {
        let events = recorder.snapshot
        try expect(events.offLoop.isEmpty, "\(what): callbacks ran off the call's event loop: \(events.offLoop)", file: file, line: line)
        try expect(events.late.isEmpty, "\(what): callbacks ran after didClose: \(events.late)", file: file, line: line)
        try expect(events.statuses.count <= 1, "\(what): didClose ran \(events.statuses.count) times: \(events.statuses)", file: file, line: line)
    }

    /// Reads a raw connection until end of stream or a reset (bytes on the way are
    /// allowed and returned); fails on any other error or after `seconds`.
    func drainToEndOrReset(
        _ connection: AsyncConnection, _ what: String, seconds: Double = 10, file: String = #fileID, line: Int = #line
    ) async throws -> (bytes: [UInt8], ending: String) {
        let outcome: Result<[UInt8], any Error> = try await within(seconds: seconds, what, file: file, line: line) {
            var bytes: [UInt8] = []
            do {
                while let chunk = try await connection.read() { bytes += chunk }
                return .success(bytes)
            } catch {
                return .failure(error)
            }
        }
        switch outcome {
        case .success(let bytes):
            return (bytes, "end of stream")
        case .failure(let error):
            try expectError(error, code: .unavailable, reason: .reset, "\(what) (expected end of stream or unavailable (reset))", file: file, line: line)
            return ([], "unavailable (reset)")
        }
    }

    /// The size of `call`'s undelivered bytes, read on its loop (exact there).
    func bufferedBytes(of call: Call) async throws -> Int {
        try await within(seconds: 5, "a hop to the call's event loop to read bufferedBytes") {
            await withCheckedContinuation { (continuation: CheckedContinuation<Int, Never>) in
                call.eventLoop.execute { continuation.resume(returning: call.bufferedBytes) }
            }
        }
    }
}

/// A frame's bytes with any flags byte and any announced length (for malformed frames).
func rawFrame(flags: UInt8, announcedLength: Int, payload: [UInt8] = []) -> [UInt8] {
    [
        flags,
        UInt8(truncatingIfNeeded: announcedLength >> 24), UInt8(truncatingIfNeeded: announcedLength >> 16),
        UInt8(truncatingIfNeeded: announcedLength >> 8), UInt8(truncatingIfNeeded: announcedLength),
    ] + payload
}
