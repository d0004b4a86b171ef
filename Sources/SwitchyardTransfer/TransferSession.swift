import Switchyard
import SwitchyardCalls

/// One send of a ``Transfer``: the sender's half of the protocol (``TransferMessage``)
/// and the retry loop around it. Used by one task only (not an event loop's: it reads
/// and hashes each chunk before handing it to the call).
///
/// It keeps the leaf digests (``TransferChunkDigest``, made as `leafDigest` says) of
/// the bytes it read, 32 bytes per 64 KiB: a `resume` answer is checked against them,
/// the `end` digest is made of them. Digests it does not have (bytes a send before this
/// one sent) it computes from the source when the receiver answers, reading only those
/// bytes.
final class TransferSession<Source: TransferSource> {
    let transfer: Transfer
    let source: Source
    let id: String
    let size: UInt64
    let options: TransferOptions
    /// How leaves are hashed: the options', or the resumed state's.
    let leafDigest: TransferLeafDigest
    let clock = ContinuousClock()
    let started: ContinuousClock.Instant

    /// Bytes the receiver acknowledged as durable.
    private var acknowledged: UInt64 = 0
    /// The end of the furthest chunk sent so far (bytes below it sent again are resent).
    private var highestSent: UInt64 = 0
    private var bytesSent: UInt64 = 0
    private var bytesResent: UInt64 = 0
    private var resumes = 0
    private var startOffset: UInt64?
    private var lastSave: ContinuousClock.Instant?
    /// Whether the current call got the receiver's `resume` answer.
    private var answered = false
    /// The leaf digests of the source's first bytes, in order (32 bytes per leaf).
    private var leafDigests: [UInt8]
    /// The transfer digest of the acknowledged leaves, for the resume state (reset where
    /// `leafDigests` is cut or replaced).
    private var acknowledgedDigest = RunningTransferDigest()
    /// Calls in a row the receiver ended for a corrupted chunk with no ack in between,
    /// and the acknowledged offset when the last of them ended.
    private var corruptions = 0
    private var acknowledgedAtCorruption: UInt64 = 0

    /// `leafDigests`: what the caller computed already of the source's first bytes (a
    /// resume state's check), with `leafDigest`.
    init(transfer: Transfer, source: Source, id: String, leafDigest: TransferLeafDigest, leafDigests: [UInt8]) {
        self.transfer = transfer
        self.source = source
        self.id = id
        self.leafDigest = leafDigest
        self.leafDigests = leafDigests
        self.size = source.size
        self.options = transfer.options
        self.started = clock.now
        self.acknowledged = transfer.resumeState?.acknowledgedOffset ?? 0
        self.highestSent = acknowledged
    }

    func run() async throws -> TransferResult {
        var breaks = 0
        var brokenSince: ContinuousClock.Instant?
        var delay = options.retryDelay
        var calls = 0
        while true {
            try transfer.checkCancelled()
            try source.checkUnchanged()
            calls += 1
            answered = false
            do {
                let digest = try await attempt(resuming: calls > 1)
                return TransferResult(
                    id: id, size: size, bytesSent: bytesSent, bytesResent: bytesResent, resumes: resumes,
                    startOffset: startOffset ?? 0, sha256: digest, duration: clock.now - started, leafDigest: leafDigest)
            } catch let error as TransportError where error.code == .unavailable && error.reason != .resumeImpossible {
                if error.reason == .integrityMismatch {
                    // A chunk arrived corrupted: the next call sends it again, unless
                    // that keeps happening with nothing acknowledged in between.
                    corruptions = acknowledged > acknowledgedAtCorruption ? 1 : corruptions + 1
                    acknowledgedAtCorruption = acknowledged
                    if corruptions >= options.maximumAttempts {
                        throw TransportError(
                            code: .aborted, reason: .integrityMismatch,
                            message: "transfer \(id): \(corruptions) calls in a row ended for a corrupted chunk at \(acknowledged) of \(size) bytes; the last: \(error.message)")
                    }
                }
                if answered {
                    breaks = 0
                    brokenSince = nil
                    delay = options.retryDelay
                }
                breaks += 1
                let since = brokenSince ?? clock.now
                brokenSince = since
                saveResumeState()
                let waited = clock.now - since
                if breaks >= options.maximumAttempts || waited >= options.reconnectTimeout {
                    // The last error's native code is this error's: said once, at the end.
                    var last = error
                    last.native = nil
                    throw TransportError(
                        code: .unavailable, reason: .resumeImpossible,
                        message: "transfer \(id) could not resume at \(acknowledged) of \(size) bytes: \(breaks) call(s) in a row broke over \(waited); the last: \(last)",
                        native: error.native)
                }
                do {
                    try await Task.sleep(for: min(delay, options.reconnectTimeout - waited))
                } catch {
                    throw Transfer.cancelledError
                }
                delay = min(delay * 2, options.maximumRetryDelay)
            }
        }
    }

    /// One call: offer, resume, chunks within the window, end, done. Returns the
    /// transfer digest both ends agreed on.
    private func attempt(resuming: Bool) async throws -> [UInt8] {
        try await transfer.channel.withCall(options: options.callOptions) { call in
            try transfer.setCall(call)
            defer { try? transfer.setCall(nil) }
            do {
                return try await withTaskCancellationHandler {
                    try await exchange(on: call, resuming: resuming)
                } onCancel: {
                    call.cancel()
                }
            } catch {
                // A write that was pending when the call was ended from outside (the
                // channel's network change, a suspend) fails with the connection's local
                // close; the call's status says why it ended. A broken call is retried.
                call.cancel()
                if let ended = await call.status().error, ended.code == .unavailable { throw ended }
                throw error
            }
        }
    }

    private func exchange(on call: AsyncCall, resuming: Bool) async throws -> [UInt8] {
        let offer = TransferMessage.offer(version: TransferMessage.version, id: id, size: size, window: UInt32(options.window), leafDigest: leafDigest)
        try await call.write(offer.encoded)
        guard case .resume(let offset, let prefix) = try await next(call), offset <= size,
              offset == size || offset % UInt64(TransferChunkDigest.leafSize) == 0 else {
            throw violation("the receiver's first answer is not a resume at a leaf boundary within the size")
        }
        answered = true
        try await checkPrefix(offset: offset, digest: prefix)
        // A resume: a new call after a broken one, or a first call that finds part of
        // the file at the receiver already (a sender restarted from its saved state).
        if resuming || (startOffset == nil && offset > 0 && offset < size) { resumes += 1 }
        if startOffset == nil { startOffset = offset }
        acknowledged = offset
        acknowledge(offset, force: true)

        var sent = offset
        let chunk = UInt64(options.effectiveChunkSize)
        let window = UInt64(options.window)
        // The next chunk is read and hashed by a worker while this one is written and
        // acknowledgements are awaited: never on the call's event loop.
        var prepared = sent < size ? prepare(at: sent, count: min(chunk, size - sent)) : nil
        defer { prepared?.cancel() }
        while sent < size {
            let count = min(chunk, size - sent)
            while sent > acknowledged && sent - acknowledged + count > window {
                try await readAck(call, sent: sent)
            }
            guard let task = prepared else { break }
            let (message, leaves) = try await task.value
            let after = sent + count
            prepared = after < size ? prepare(at: after, count: min(chunk, size - after)) : nil
            let header = TransferMessage.chunkHeaderSize
            guard message.count == header + Int(count) else {
                throw TransportError(code: .failedPrecondition, reason: .sourceChanged, message: "\(source.identity) ended at \(sent + UInt64(message.count - header)) of \(size) bytes")
            }
            let firstLeaf = Int(sent / UInt64(TransferChunkDigest.leafSize)) * TransferLeafDigest.byteCount
            if firstLeaf == leafDigests.count { leafDigests += leaves }
            if highestSent > sent { bytesResent += min(count, highestSent - sent) }
            try await call.write(message)
            sent += count
            bytesSent += count
            highestSent = max(highestSent, sent)
        }
        let digest = TransferChunkDigest.digest(ofLeafDigests: leafDigests[...])
        try await call.write(TransferMessage.end(sha256: digest).encoded)
        while true {
            switch try await next(call) {
            case .ack(let offset):
                try take(ack: offset, sent: sent)
            case .done(let doneSize, let doneSHA):
                guard doneSize == size, doneSHA == digest else { throw violation("done with another size or digest") }
                acknowledge(size, force: true)
                // The receiver's OK status follows `done` and ends the call (closing it).
                guard try await call.next() == nil else { throw violation("a message after done") }
                return digest
            default:
                throw violation("an unexpected message after end")
            }
        }
    }

    /// A task off the event loop that reads `count` bytes at `offset` into a `chunk`
    /// message and hashes them.
    private func prepare(at offset: UInt64, count: UInt64) -> Task<(message: [UInt8], leafDigests: [UInt8]), any Error> {
        let source = self.source
        let leafDigest = self.leafDigest
        return Task(executorPreference: globalConcurrentExecutor) {
            try TransferMessage.chunk(offset: offset, count: Int(count), using: leafDigest) { buffer in
                try source.read(at: offset, into: buffer)
            }
        }
    }

    /// Checks the receiver's digest of the bytes below `offset` against the source's,
    /// hashing from the source the ones this send has no digest for; keeps the digests of
    /// those bytes only (later chunks are hashed again as they are sent).
    private func checkPrefix(offset: UInt64, digest: [UInt8]) async throws {
        let leaves = TransferChunkDigest.leafCount(size: offset) * TransferLeafDigest.byteCount
        // A digest held is always of a whole leaf (or of the source's last one), and
        // `offset` is a leaf boundary or the size: the first `leaves` held are the ones.
        if leafDigests.count < leaves {
            leafDigests = try await offLoop { [source, leafDigest] in try TransferChunkDigest.leafDigests(of: source, count: offset, using: leafDigest) }
        }
        leafDigests.removeSubrange(leaves...)
        acknowledgedDigest.reset()
        guard TransferChunkDigest.digest(ofLeafDigests: leafDigests[...]) == digest else {
            throw TransportError(
                code: .failedPrecondition, reason: .sourceChanged,
                message: "transfer \(id): the receiver holds \(offset) bytes that are not the first bytes of \(source.identity) (their digests differ): refusing to splice")
        }
    }

    private func readAck(_ call: AsyncCall, sent: UInt64) async throws {
        guard case .ack(let offset) = try await next(call) else { throw violation("an unexpected message while sending") }
        try take(ack: offset, sent: sent)
    }

    private func take(ack offset: UInt64, sent: UInt64) throws {
        guard offset >= acknowledged, offset <= sent else {
            throw violation("an ack at \(offset) outside \(acknowledged)...\(sent)")
        }
        acknowledged = offset
        acknowledge(offset, force: false)
    }

    private func next(_ call: AsyncCall) async throws -> TransferMessage {
        guard let message = try await call.next() else { throw violation("the receiver ended the call early") }
        return try TransferMessage(decoding: message)
    }

    /// Reports progress and updates (and maybe saves) the resume state.
    private func acknowledge(_ offset: UInt64, force: Bool) {
        let elapsed = clock.now - started
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        let gained = Double(offset - min(offset, startOffset ?? offset))
        let rate = seconds > 0 && gained > 0 ? gained / seconds : 0
        let eta: Duration? = rate > 0 ? .seconds(Double(size - offset) / rate) : nil
        transfer.didAcknowledge(
            resumeState(),
            TransferProgress(bytesAcknowledged: offset, totalBytes: size, bytesPerSecond: rate, estimatedTimeRemaining: eta, resumes: resumes, bytesResent: bytesResent))
        let now = clock.now
        if force || lastSave.map({ now - $0 >= .milliseconds(100) }) ?? true {
            lastSave = now
            saveResumeState()
        }
    }

    private func resumeState() -> TransferResumeState {
        let leaves = min(leafDigests.count, TransferChunkDigest.leafCount(size: acknowledged) * TransferLeafDigest.byteCount)
        return TransferResumeState(
            id: id, sourceIdentity: source.identity, size: size,
            sha256: acknowledgedDigest.digest(of: leafDigests, through: leaves), acknowledgedOffset: acknowledged, leafDigest: leafDigest)
    }

    /// Saves the resume state where the options say (best effort: a failed save only
    /// costs a restarted sender the bytes since the last good one).
    func saveResumeState() {
        guard let path = options.resumeStatePath else { return }
        try? resumeState().save(to: path)
    }

    private func violation(_ what: String) -> TransportError {
        TransportError(code: .internal, reason: .protocolViolation, message: "transfer \(id): \(what)")
    }
}
