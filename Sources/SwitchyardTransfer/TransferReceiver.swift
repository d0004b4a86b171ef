import Switchyard
import SwitchyardCalls

/// The receiving end of one transfer call (the protocol's steps are in
/// ``TransferMessage``): answers the offer with the durable offset and the digest of the
/// bytes below it, hashes each chunk on a worker off the event loop and stores it with
/// its leaf digests while a ``TransferAcknowledger`` syncs and acknowledges behind it,
/// and checks the whole file's transfer digest from the stored leaf digests at the end
/// (``TransferChunkDigest``: no byte is read back but the last durable leaf on resume).
///
/// It asks the call for one message at a time (flow control on): while the worker hashes
/// and writes one chunk, the loop receives the next, and it hands that one over only
/// when the worker is done with the first. So it holds at most two chunks plus one read
/// buffer whatever the sender does.
struct TransferReceiver {
    let storage: any TransferStorage
    let options: TransferServerOptions
    let leases: TransferLeases
    let didFinish: @Sendable (TransferRecord) -> Void

    func serve(_ call: AsyncCall) async throws -> CallStatus {
        guard let first = try await call.next() else { throw Self.violation("the call ended before its offer") }
        guard case .offer(let version, let id, let size, let window, let leafDigest) = try TransferMessage(decoding: first) else {
            throw Self.violation("the first message is not an offer")
        }
        guard version == TransferMessage.version else {
            throw TransportError(code: .unimplemented, reason: .protocolViolation, message: "transfer protocol version \(version); this receiver speaks \(TransferMessage.version)")
        }
        guard TransferRecord.isValid(id: id) else {
            throw TransportError(code: .invalidArgument, reason: .protocolViolation, message: "transfer id \"\(id)\" is not 1-255 letters, digits, '.', '_' or '-' (not starting with '.')")
        }
        guard window > 0 else { throw Self.violation("an offer with a window of 0") }

        let token = await leases.acquire(id, for: call)
        defer { leases.release(id, token: token) }

        var (record, digests) = try await resumePoint(id: id, size: size, leafDigest: leafDigest)
        var offset = record.durableOffset
        let prefix = record.isComplete ? record.sha256 : TransferChunkDigest.digest(ofLeafDigests: digests[...])
        try await call.write(TransferMessage.resume(offset: offset, sha256: prefix).encoded)

        let ackEvery = UInt64(max(1, min(options.ackInterval, Int(window / 2))))
        let acknowledger = TransferAcknowledger(storage: storage, id: id, call: call, interval: ackEvery, from: offset)
        // The worker's task for the chunk before the one just received: its leaf digests.
        var pending: Task<[UInt8], any Error>?
        do {
            while true {
                guard let message = try await call.next() else { throw Self.violation("the sender finished before its end message") }
                // Chunks are read in place: the bytes go to the worker as a slice of the message.
                if let (chunkOffset, sha256, bytes) = try TransferMessage.chunk(in: message) {
                    guard chunkOffset == offset else { throw Self.violation("a chunk at \(chunkOffset); expected \(offset)") }
                    guard chunkOffset % UInt64(TransferChunkDigest.leafSize) == 0 else {
                        throw Self.violation("a chunk at \(chunkOffset), not a multiple of the leaf size \(TransferChunkDigest.leafSize)")
                    }
                    guard !record.isComplete, UInt64(bytes.count) <= size - offset else {
                        throw Self.violation("a chunk of \(bytes.count) bytes at \(offset) runs past the size \(size)")
                    }
                    if let previous = pending { digests += try await previous.value }
                    offset += UInt64(bytes.count)
                    pending = store(
                        message, at: chunkOffset, through: offset, expected: Array(sha256), leafDigest: leafDigest, id: id, call: call,
                        acknowledger: acknowledger)
                    continue
                }
                if let previous = pending {
                    pending = nil
                    digests += try await previous.value
                }
                guard case .end(let sha256) = try TransferMessage(decoding: message) else {
                    throw Self.violation("an unexpected message from the sender")
                }
                guard offset == size else { throw Self.violation("end at \(offset) of \(size) bytes") }
                try await acknowledger.finish(through: offset)
                if !record.isComplete {
                    let received = TransferChunkDigest.digest(ofLeafDigests: digests[...])
                    guard received == sha256 else {
                        try io { try storage.discard(id: id) }
                        throw TransportError(
                            code: .aborted, reason: .integrityMismatch,
                            message: "transfer \(id): received digest \(TransferDigest.hex(received)), sent \(TransferDigest.hex(sha256)); the partial file was discarded")
                    }
                    try await offLoop { try storage.complete(id: id, sha256: received) }
                    record.isComplete = true
                    record.durableOffset = size
                    record.sha256 = received
                    didFinish(record)
                } else if sha256 != record.sha256 {
                    throw TransportError(
                        code: .failedPrecondition, reason: .sourceChanged,
                        message: "transfer \(id) is complete with digest \(TransferDigest.hex(record.sha256)); the sender ended with \(TransferDigest.hex(sha256))")
                }
                break
            }
        } catch {
            if let pending { _ = try? await pending.value }
            await acknowledger.stop()
            throw error
        }
        try await call.write(TransferMessage.done(size: size, sha256: record.sha256).encoded)
        return .ok
    }

    /// Where the transfer `id` of `size` bytes hashed with `leafDigest` goes on: its
    /// record and the leaf digests of its durable bytes. A new id is created; a known one
    /// with another size refused. One kept with another leaf digest starts over, complete
    /// or not (its digests cannot be compared with the sender's). An incomplete one's last
    /// durable leaf is read back and hashed: if it is not what the stored digest says (a
    /// torn write, a disk that lost it), the transfer starts over.
    private func resumePoint(id: String, size: UInt64, leafDigest: TransferLeafDigest) async throws -> (TransferRecord, [UInt8]) {
        let fresh = TransferRecord(id: id, size: size, leafDigest: leafDigest)
        guard let known = try io({ try storage.record(for: id) }) else {
            try io { try storage.create(fresh) }
            return (fresh, [])
        }
        guard known.size == size else {
            throw TransportError(
                code: .failedPrecondition, reason: .sourceChanged,
                message: "transfer \(id) is known with \(known.size) bytes; offered \(size) bytes: the source changed, refusing to splice")
        }
        guard known.leafDigest == leafDigest else {
            try io { try storage.create(fresh) }
            return (fresh, [])
        }
        guard !known.isComplete, known.durableOffset > 0 else { return (known, []) }
        let durable = known.durableOffset
        let intact: [UInt8]? = try await offLoop { [storage] in
            let digests = try storage.leafDigests(id: id)
            let leaves = TransferChunkDigest.leafCount(size: durable)
            guard digests.count == leaves * TransferLeafDigest.byteCount else { return nil }
            let start = UInt64((leaves - 1) * TransferChunkDigest.leafSize)
            let tail = try storage.read(id: id, at: start, count: Int(durable - start))
            let stored = digests[((leaves - 1) * TransferLeafDigest.byteCount)...]
            return TransferChunkDigest.leafDigests(of: tail[...], using: leafDigest)[...] == stored ? digests : nil
        }
        if let intact { return (known, intact) }
        try io { try storage.create(fresh) }
        return (fresh, [])
    }

    /// Starts the worker for one chunk (`message`, at `offset`, ending at `end`): it
    /// hashes the chunk's leaves, checks them against the chunk's digest `expected`,
    /// stores bytes and leaf digests, and hands `end` to the acknowledger. A chunk that
    /// does not match ends the call with `unavailable`, reason `integrity mismatch` (the
    /// sender resumes and sends it again); a storage error ends it with that error.
    private func store(
        _ message: [UInt8], at offset: UInt64, through end: UInt64, expected: [UInt8], leafDigest: TransferLeafDigest, id: String,
        call: AsyncCall, acknowledger: TransferAcknowledger
    ) -> Task<[UInt8], any Error> {
        let storage = self.storage
        return Task(executorPreference: globalConcurrentExecutor) {
            do throws(TransportError) {
                let bytes = message[TransferMessage.chunkHeaderSize...]
                let leaves = TransferChunkDigest.leafDigests(of: bytes, using: leafDigest)
                guard TransferChunkDigest.digest(ofLeafDigests: leaves[...]) == expected else {
                    throw TransportError(
                        code: .unavailable, reason: .integrityMismatch,
                        message: "transfer \(id): the chunk at \(offset) (\(bytes.count) bytes) does not match its digest; not stored, to be sent again")
                }
                try io {
                    try storage.write(bytes, at: offset, id: id)
                    try storage.writeLeafDigests(leaves, fromLeaf: Int(offset / UInt64(TransferChunkDigest.leafSize)), id: id)
                }
                acknowledger.wrote(through: end)
                return leaves
            } catch {
                // The loop may wait for a chunk the sender holds back for want of an ack.
                call.call.finish(CallStatus(error: error))
                throw error
            }
        }
    }

    static func violation(_ what: String) -> TransportError {
        TransportError(code: .internal, reason: .protocolViolation, message: "transfer: \(what)")
    }
}

/// Runs storage I/O, turning errors that are not ``TransportError``s into `internal`,
/// reason `i/o error`.
func io<T>(_ work: () throws -> T) throws(TransportError) -> T {
    do {
        return try work()
    } catch let error as TransportError {
        throw error
    } catch {
        throw TransportError(code: .internal, reason: .ioError, message: "transfer storage: \(error)")
    }
}

/// Runs blocking storage I/O (fsync, reading back a leaf) on the global pool, not on
/// the call's event loop, which other connections share.
func offLoop<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
    try await withTaskExecutorPreference(globalConcurrentExecutor) {
        try io(work)
    }
}
