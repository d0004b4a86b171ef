import Switchyard
public import SwitchyardCalls
import Synchronization

/// The sending side of one resumable transfer, over calls on a `CallChannel` (so on any
/// backend): it sends a source to a ``TransferServer`` in chunks and survives broken
/// calls by asking the receiver where to resume.
///
/// ```swift
/// let transfer = Transfer(channel: CallChannel(target: server, transport: transport))
/// Task { for await report in transfer.progress { print(report.bytesAcknowledged) } }
/// let result = try await transfer.send(file: "/data/big.bin")
/// print(result.sha256Hex)
/// ```
///
/// A `Transfer` sends once: ``send(file:id:)`` or ``send(source:id:resumeState:)``; a
/// second send throws `failedPrecondition`. Its ``progress`` ends when the send ends.
///
/// **Resuming.** A call that ends `unavailable` (reset, connectivity or path changed,
/// stalled, reclaimed, suspended, refused while the receiver restarts, ...) is followed,
/// after a short delay doubling up to ``TransferOptions/maximumRetryDelay``, by a new
/// call that offers the same id and size; the receiver answers from where, with the
/// digest of the bytes it holds, which the sender checks against its source.
/// Bytes it acknowledged are never sent again; at most one ``TransferOptions/window``
/// of bytes is sent again per break. The sender gives up with `unavailable`, reason
/// `resume impossible` (the last break's error in the message) when
/// ``TransferOptions/maximumAttempts`` calls in a row broke before the receiver
/// answered, or ``TransferOptions/reconnectTimeout`` passed since the break.
///
/// **Integrity.** Each chunk is hashed as it is read to be sent and again as it arrives
/// (``TransferChunkDigest``); a chunk that arrives corrupted is sent again. The
/// result's ``TransferResult/sha256`` is the transfer digest both ends computed.
///
/// **Errors** (all `TransportError`): `failedPrecondition`/`source changed` when the
/// receiver knows the id with another size, when the bytes it holds are not the
/// source's first bytes, when the resume state's digest is not the source's, or when
/// the source changed during the send (see ``TransferSource/checkUnchanged()``);
/// `aborted`/`integrity mismatch` when the receiver's transfer digest of the whole file
/// differs, or when chunks kept arriving corrupted (``TransferOptions/maximumAttempts``
/// calls in a row); `cancelled` after ``cancel()`` or when
/// the sending task is cancelled; `unavailable`/`resume impossible` as above; a
/// source's read error; `internal`/`protocol violation` for a receiver that breaks the
/// protocol.
public final class Transfer: Sendable {
    public let channel: CallChannel
    public let options: TransferOptions
    private let progressStream: AsyncStream<TransferProgress>
    private let progressContinuation: AsyncStream<TransferProgress>.Continuation

    private struct State {
        var started = false
        var cancelled = false
        var call: AsyncCall?
        var resumeState: TransferResumeState?
    }
    private let state = Mutex(State())

    public init(channel: CallChannel, options: TransferOptions = TransferOptions()) {
        self.channel = channel
        self.options = options
        (progressStream, progressContinuation) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(256))
    }

    /// Progress reports (bytes, rate, time left, resumes, resent bytes); ends when the
    /// send ends. Keeps the newest 256 reports for a slow reader.
    public var progress: AsyncStream<TransferProgress> { progressStream }

    /// The state to resume from as of the last acknowledgement (nil before the first
    /// answer from the receiver). Save its ``TransferResumeState/encoded`` bytes, or set
    /// ``TransferOptions/resumeStatePath``.
    public var resumeState: TransferResumeState? { state.withLock { $0.resumeState } }

    /// Sends the file at `path`. The id is `id`, else the saved resume state's id (when
    /// ``TransferOptions/resumeStatePath`` has one), else the file's name.
    /// - Throws: as the type says; `notFound` for a missing file; `invalidArgument` for
    ///   a file name that is no valid id (pass `id`), or an `id` that is not the resume
    ///   state's.
    public func send(file path: String, id: String? = nil) async throws -> TransferResult {
        do {
            let source = try FileTransferSource(path: path)
            let saved = try options.resumeStatePath.flatMap { try TransferResumeState.load(from: $0) }
            let name = String(path.split(separator: "/").last ?? "")
            return try await send(source: source, id: id ?? saved?.id ?? name, resumeState: saved)
        } catch {
            progressContinuation.finish()
            throw error
        }
    }

    /// Sends `source` as transfer `id` (1 to 255 letters, digits, `.`, `_`, `-`, not
    /// starting with `.`), resuming from `resumeState` if given.
    /// - Throws: as the type says; `invalidArgument` for a bad id or one that is not the
    ///   resume state's.
    public func send(source: some TransferSource, id: String, resumeState: TransferResumeState? = nil) async throws -> TransferResult {
        defer { progressContinuation.finish() }
        try state.withLock { state in
            guard !state.started else {
                throw TransportError(code: .failedPrecondition, reason: .misuse, message: "a Transfer sends once; make a new one")
            }
            state.started = true
        }
        guard TransferRecord.isValid(id: id) else {
            throw TransportError(code: .invalidArgument, reason: .invalidOption, message: "transfer id \"\(id)\" is not 1-255 letters, digits, '.', '_' or '-' (not starting with '.')")
        }
        var digests: [UInt8] = []
        // A resumed send hashes as the send it resumes did: the receiver's stored leaf
        // digests are of that kind.
        let leafDigest = resumeState?.leafDigest ?? options.leafDigest
        if let resumeState {
            guard resumeState.id == id else {
                throw TransportError(code: .invalidArgument, reason: .invalidOption, message: "the resume state is for transfer \(resumeState.id), not \(id)")
            }
            // The bytes the state says were acknowledged must still be the source's: they
            // are hashed (read once, not sent) and compared with the state's digest.
            if resumeState.size == source.size {
                digests = try TransferChunkDigest.leafDigests(of: source, count: resumeState.acknowledgedOffset, using: leafDigest)
            }
            guard resumeState.size == source.size, TransferChunkDigest.digest(ofLeafDigests: digests[...]) == resumeState.sha256 else {
                throw TransportError(
                    code: .failedPrecondition, reason: .sourceChanged,
                    message: "\(source.identity) is not the source of the resume state (\(resumeState.size) bytes, digest \(TransferDigest.hex(resumeState.sha256)) of the first \(resumeState.acknowledgedOffset)): refusing to splice")
            }
            state.withLock { $0.resumeState = resumeState }
        }
        let session = TransferSession(transfer: self, source: source, id: id, leafDigest: leafDigest, leafDigests: digests)
        do {
            let result = try await session.run()
            if let path = options.resumeStatePath { TransferResumeState.remove(at: path) }
            return result
        } catch {
            session.saveResumeState()
            throw error
        }
    }

    /// Stops the send: its call is cancelled and ``send(file:id:)`` throws `cancelled`.
    /// The receiver keeps what it acknowledged; a later send resumes from there.
    public func cancel() {
        let call = state.withLock { state in
            state.cancelled = true
            return state.call
        }
        call?.cancel()
    }

    // MARK: for the session

    /// Registers the current call (nil when it ended). Throws `cancelled` if cancelled.
    func setCall(_ call: AsyncCall?) throws {
        let cancelled = state.withLock { state in
            state.call = call
            return state.cancelled
        }
        if cancelled {
            call?.cancel()
            throw Self.cancelledError
        }
    }

    func checkCancelled() throws {
        if state.withLock({ $0.cancelled }) || Task.isCancelled { throw Self.cancelledError }
    }

    func didAcknowledge(_ resumeState: TransferResumeState, _ report: TransferProgress) {
        state.withLock { $0.resumeState = resumeState }
        progressContinuation.yield(report)
    }

    static let cancelledError = TransportError(code: .cancelled, reason: .taskCancelled, message: "the transfer was cancelled")
}
