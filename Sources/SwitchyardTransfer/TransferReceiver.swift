import Switchyard
import SwitchyardCalls

/// The receiving end of one transfer call (the protocol's steps are in
/// ``TransferMessage``): answers the offer, writes chunks through the storage while a
/// ``TransferAcknowledger`` syncs and acknowledges behind it, checks the whole file's
/// SHA-256 at the end.
///
/// It asks the call for one message at a time (flow control on), so it holds at most one
/// chunk plus one read buffer whatever the sender does; each chunk goes to the storage
/// before the next is asked for.
struct TransferReceiver {
    let storage: any TransferStorage
    let options: TransferServerOptions
    let leases: TransferLeases
    let didFinish: @Sendable (TransferRecord) -> Void

    func serve(_ call: AsyncCall) async throws -> CallStatus {
        guard let first = try await call.next() else { throw Self.violation("the call ended before its offer") }
        guard case .offer(let version, let id, let size, let sha256, let window) = try TransferMessage(decoding: first) else {
            throw Self.violation("the first message is not an offer")
        }
        guard version == TransferMessage.version else {
            throw TransportError(code: .unimplemented, reason: .protocolViolation, message: "transfer protocol version \(version); this receiver speaks \(TransferMessage.version)")
        }
        guard TransferRecord.isValid(id: id) else {
            throw TransportError(code: .invalidArgument, reason: .protocolViolation, message: "transfer id \"\(id)\" is not 1-255 letters, digits, '.', '_' or '-' (not starting with '.')")
        }
        guard sha256.count == TransferDigest.byteCount, window > 0 else { throw Self.violation("an offer with a malformed SHA-256 or window") }

        let token = await leases.acquire(id, for: call)
        defer { leases.release(id, token: token) }

        var record: TransferRecord
        if let known = try io({ try storage.record(for: id) }) {
            guard known.size == size, known.sha256 == sha256 else {
                throw TransportError(
                    code: .failedPrecondition, reason: .sourceChanged,
                    message: "transfer \(id) is known with \(known.size) bytes, sha256 \(TransferDigest.hex(known.sha256)); offered \(size) bytes, sha256 \(TransferDigest.hex(sha256)): the source changed, refusing to splice")
            }
            record = known
        } else {
            record = TransferRecord(id: id, size: size, sha256: sha256)
            try io { try storage.create(record) }
        }
        var offset = record.durableOffset
        try await call.write(TransferMessage.resume(offset: offset).encoded)

        let ackEvery = UInt64(max(1, min(options.ackInterval, Int(window / 2))))
        var acknowledger = TransferAcknowledger(storage: storage, id: id, call: call, interval: ackEvery, from: offset)
        do {
            while true {
                guard let message = try await call.next() else { throw Self.violation("the sender finished before its end message") }
                // Chunks are read in place: the bytes go to the storage as a slice of the message.
                if let (chunkOffset, bytes) = try TransferMessage.chunk(in: message) {
                    guard chunkOffset == offset else { throw Self.violation("a chunk at \(chunkOffset); expected \(offset)") }
                    guard !record.isComplete, UInt64(bytes.count) <= size - offset else {
                        throw Self.violation("a chunk of \(bytes.count) bytes at \(offset) runs past the size \(size)")
                    }
                    try io { try storage.write(bytes, at: offset, id: id) }
                    offset += UInt64(bytes.count)
                    acknowledger.wrote(through: offset)
                    continue
                }
                guard case .end = try TransferMessage(decoding: message) else {
                    throw Self.violation("an unexpected message from the sender")
                }
                guard offset == size else { throw Self.violation("end at \(offset) of \(size) bytes") }
                try await acknowledger.finish(through: offset)
                break
            }
        } catch {
            await acknowledger.stop()
            throw error
        }
        if !record.isComplete {
            let received = try await offLoop { try storage.digest(id: id) }
            guard received == sha256 else {
                try io { try storage.discard(id: id) }
                throw TransportError(
                    code: .aborted, reason: .integrityMismatch,
                    message: "transfer \(id): received sha256 \(TransferDigest.hex(received)), offered \(TransferDigest.hex(sha256)); the partial file was discarded")
            }
            try await offLoop { try storage.complete(id: id) }
            record.isComplete = true
            record.durableOffset = size
            didFinish(record)
        }
        try await call.write(TransferMessage.done(size: size, sha256: sha256).encoded)
        return .ok
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

/// Runs blocking storage I/O (fsync, hashing a whole file) on the global pool, not on
/// the call's event loop, which other connections share.
func offLoop<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
    try await withTaskExecutorPreference(globalConcurrentExecutor) {
        try io(work)
    }
}
