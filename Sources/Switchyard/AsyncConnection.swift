import DequeModule
import Synchronization

/// The async/await face of a ``Connection``.
///
/// It installs itself as the connection's handler. Reading is demand-driven with a
/// bound: the connection reads while fewer than ``highWatermark`` bytes wait here
/// unread, and stops reading the network above it, so a slow reader pushes back on the
/// sender through TCP.
///
/// - ``read()`` returns the next chunk, or `nil` at end of stream; it throws the
///   connection's terminal error, or `cancelled`/`closed` after ``close()``.
/// - ``write(_:)`` returns once the bytes are in the kernel. For a message larger than
///   the socket buffers, that needs the peer to read, and an echo peer reads only while
///   its own writes drain: read concurrently (another task), or write without waiting
///   through ``connection`` (`connection.write(bytes, completion: nil)`).
/// - One reader at a time; writes may come from any task.
public final class AsyncConnection: Sendable {
    /// The connection underneath.
    public let connection: any Connection
    /// Unread bytes above which reading stops.
    public let highWatermark: Int

    private struct State {
        var chunks: Deque<[UInt8]> = []
        var buffered = 0
        var endOfStream = false
        var closed = false
        var error: TransportError?
        var reader: CheckedContinuation<[UInt8]?, any Error>?
        var reading = false
    }
    private let state = Mutex(State())
    private let handler: Handler

    public init(_ connection: any Connection, highWatermark: Int = 256 * 1024) {
        self.connection = connection
        self.highWatermark = highWatermark
        self.handler = Handler()
        handler.owner.withLock { $0 = self }
        connection.setHandler(handler)
    }

    /// The handler the connection calls; forwards to the owner while it lives.
    private final class Handler: ConnectionHandler {
        let owner = Mutex<AsyncConnection?>(nil)
        func connectionDidRead(_ bytes: UnsafeRawBufferPointer) { owner.withLock { $0 }?.didRead(Array(bytes)) }
        func connectionDidReadEnd() { owner.withLock { $0 }?.didEnd(error: nil, closed: false) }
        func connectionDidClose(error: TransportError?) {
            let owner = owner.withLock { owner in
                let current = owner
                owner = nil  // break the cycle connection -> handler -> owner -> connection
                return current
            }
            owner?.didEnd(error: error ?? .closedLocally(), closed: true)
        }
    }

    private func didRead(_ bytes: [UInt8]) {
        let (reader, stop): (CheckedContinuation<[UInt8]?, any Error>?, Bool) = state.withLock { state in
            if let reader = state.reader {
                state.reader = nil
                return (reader, false)
            }
            state.chunks.append(bytes)
            state.buffered += bytes.count
            if state.buffered >= highWatermark && state.reading {
                state.reading = false
                return (nil, true)
            }
            return (nil, false)
        }
        if let reader { reader.resume(returning: bytes) }
        if stop { connection.stopReading() }
    }

    /// End of stream (`closed == false`) or the connection's end (`closed == true`).
    private func didEnd(error: TransportError?, closed: Bool) {
        let (reader, outcome): (CheckedContinuation<[UInt8]?, any Error>?, Result<[UInt8]?, TransportError>) = state.withLock { state in
            if closed {
                state.closed = true
                state.reading = false
                if state.error == nil { state.error = error }
            } else {
                state.endOfStream = true
            }
            let reader = state.reader
            state.reader = nil
            // A waiting reader has no chunks to take (it would not be waiting otherwise).
            if state.endOfStream { return (reader, .success(nil)) }
            return (reader, .failure(state.error ?? .closedLocally()))
        }
        reader?.resume(with: outcome.mapError { $0 as any Error })
    }

    /// The next chunk of bytes, or `nil` once the peer ended the stream.
    /// - Throws: the connection's terminal ``TransportError``; `cancelled`/`closed` if
    ///   the connection was closed locally; `cancelled`/`task cancelled` if the task was.
    public func read() async throws -> [UInt8]? {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<[UInt8]?, any Error>) in
                enum Step { case value([UInt8]?), failure(any Error), wait(startReading: Bool) }
                let step: Step = state.withLock { state in
                    if let chunk = state.chunks.popFirst() {
                        state.buffered -= chunk.count
                        return .value(chunk)
                    }
                    if state.endOfStream { return .value(nil) }
                    if let error = state.error { return .failure(error) }
                    if Task.isCancelled {
                        return .failure(TransportError(code: .cancelled, reason: .taskCancelled, message: "the reading task was cancelled"))
                    }
                    if state.reader != nil {
                        return .failure(TransportError(code: .failedPrecondition, reason: .misuse, message: "two concurrent reads on one AsyncConnection"))
                    }
                    state.reader = continuation
                    let start = !state.reading
                    state.reading = true
                    return .wait(startReading: start)
                }
                switch step {
                case .value(let chunk):
                    continuation.resume(returning: chunk)
                    resumeReadingIfNeeded()
                case .failure(let error):
                    continuation.resume(throwing: error)
                case .wait(let start):
                    if start { connection.startReading() }
                }
            }
        } onCancel: {
            let reader = state.withLock { state in
                let reader = state.reader
                state.reader = nil
                return reader
            }
            reader?.resume(throwing: TransportError(code: .cancelled, reason: .taskCancelled, message: "the reading task was cancelled"))
        }
    }

    private func resumeReadingIfNeeded() {
        let start = state.withLock { state in
            if !state.reading && !state.endOfStream && !state.closed && state.buffered < highWatermark {
                state.reading = true
                return true
            }
            return false
        }
        if start { connection.startReading() }
    }

    /// Reads until `count` bytes arrived.
    /// - Throws: as ``read()``; an end of stream before `count` bytes is `unavailable`,
    ///   reason `closed`.
    public func read(exactly count: Int) async throws -> [UInt8] {
        var result: [UInt8] = []
        result.reserveCapacity(count)
        while result.count < count {
            guard let chunk = try await read(upTo: count - result.count) else {
                throw TransportError(
                    code: .unavailable, reason: .closed,
                    message: "end of stream after \(result.count) of \(count) bytes")
            }
            result += chunk
        }
        return result
    }

    /// The next chunk of bytes, at most `maxCount` of them (the rest stays for the next
    /// read), or `nil` once the peer ended the stream. A reader that must say how much of
    /// a message arrived (a timeout's report, a progress line) reads with it.
    /// - Throws: as ``read()``; `invalidArgument`, reason `invalid option`, for a
    ///   `maxCount` below 1.
    public func read(upTo maxCount: Int) async throws -> [UInt8]? {
        guard maxCount > 0 else {
            throw TransportError(code: .invalidArgument, reason: .invalidOption, message: "read(upTo:) needs a maxCount of at least 1, not \(maxCount)")
        }
        guard let chunk = try await read() else { return nil }
        if chunk.count <= maxCount { return chunk }
        pushBack(Array(chunk[maxCount...]))
        return Array(chunk[..<maxCount])
    }

    /// Reads everything until the peer ends the stream.
    public func readToEnd(limit: Int = .max) async throws -> [UInt8] {
        var result: [UInt8] = []
        while let chunk = try await read() {
            result += chunk
            if result.count > limit {
                throw TransportError(code: .resourceExhausted, reason: .resourceLimit, message: "more than \(limit) bytes before end of stream")
            }
        }
        return result
    }

    private func pushBack(_ bytes: [UInt8]) {
        state.withLock { state in
            state.chunks.prepend(bytes)
            state.buffered += bytes.count
        }
    }

    /// Writes `bytes`; returns once they are in the kernel.
    public func write(_ bytes: [UInt8]) async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            connection.write(bytes) { error in
                if let error { continuation.resume(throwing: error) } else { continuation.resume() }
            }
        }
    }

    /// Shuts the output side down after queued writes; returns once the FIN is sent.
    public func shutdownOutput() async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            connection.shutdownOutput { error in
                if let error { continuation.resume(throwing: error) } else { continuation.resume() }
            }
        }
    }

    /// Closes the connection.
    public func close() { connection.close() }

    /// Closes the connection with a reset.
    public func reset() { connection.reset() }

    /// Bytes read from the network and not yet returned by ``read()``.
    public var bufferedBytes: Int { state.withLock { $0.buffered } }
}
