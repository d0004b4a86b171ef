import Switchyard
import SwitchyardCalls

/// One send of a ``Transfer``: the sender's half of the protocol (``TransferMessage``)
/// and the retry loop around it. Used by one task only.
final class TransferSession<Source: TransferSource> {
    let transfer: Transfer
    let source: Source
    let id: String
    let sha256: [UInt8]
    let size: UInt64
    let options: TransferOptions
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

    init(transfer: Transfer, source: Source, id: String, sha256: [UInt8]) {
        self.transfer = transfer
        self.source = source
        self.id = id
        self.sha256 = sha256
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
                try await attempt(resuming: calls > 1)
                return TransferResult(
                    id: id, size: size, bytesSent: bytesSent, bytesResent: bytesResent, resumes: resumes,
                    startOffset: startOffset ?? 0, sha256: sha256, duration: clock.now - started)
            } catch let error as TransportError where error.code == .unavailable && error.reason != .resumeImpossible {
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

    /// One call: offer, resume, chunks within the window, end, done.
    private func attempt(resuming: Bool) async throws {
        try await transfer.channel.withCall(options: options.callOptions) { call in
            try transfer.setCall(call)
            defer { try? transfer.setCall(nil) }
            do {
                try await withTaskCancellationHandler {
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

    private func exchange(on call: AsyncCall, resuming: Bool) async throws {
        let offer = TransferMessage.offer(version: TransferMessage.version, id: id, size: size, sha256: sha256, window: UInt32(options.window))
        try await call.write(offer.encoded)
        guard case .resume(let offset) = try await next(call), offset <= size else {
            throw violation("the receiver's first answer is not a resume within the size")
        }
        answered = true
        // A resume: a new call after a broken one, or a first call that finds part of
        // the file at the receiver already (a sender restarted from its saved state).
        if resuming || (startOffset == nil && offset > 0 && offset < size) { resumes += 1 }
        if startOffset == nil { startOffset = offset }
        acknowledged = offset
        acknowledge(offset, force: true)

        var sent = offset
        let chunk = UInt64(options.effectiveChunkSize)
        let window = UInt64(options.window)
        while sent < size {
            let count = min(chunk, size - sent)
            while sent > acknowledged && sent - acknowledged + count > window {
                try await readAck(call, sent: sent)
            }
            let message = try TransferMessage.chunk(offset: sent, count: Int(count)) { [source, sent] buffer in
                try source.read(at: sent, into: buffer)
            }
            guard message.count == 9 + Int(count) else {
                throw TransportError(code: .failedPrecondition, reason: .sourceChanged, message: "\(source.identity) ended at \(sent + UInt64(message.count - 9)) of \(size) bytes")
            }
            if highestSent > sent { bytesResent += min(count, highestSent - sent) }
            try await call.write(message)
            sent += count
            bytesSent += count
            highestSent = max(highestSent, sent)
        }
        try await call.write(TransferMessage.end.encoded)
        while true {
            switch try await next(call) {
            case .ack(let offset):
                try take(ack: offset, sent: sent)
            case .done(let doneSize, let doneSHA):
                guard doneSize == size, doneSHA == sha256 else { throw violation("done with another size or SHA-256") }
                acknowledge(size, force: true)
                // The receiver's OK status follows `done` and ends the call (closing it).
                guard try await call.next() == nil else { throw violation("a message after done") }
                return
            default:
                throw violation("an unexpected message after end")
            }
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
        TransferResumeState(id: id, sourceIdentity: source.identity, size: size, sha256: sha256, acknowledgedOffset: acknowledged)
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
