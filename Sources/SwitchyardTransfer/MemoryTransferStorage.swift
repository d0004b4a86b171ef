import Switchyard
import Synchronization

/// A ``TransferStorage`` in memory, for tests: "durable" means synced here, and what
/// was written past the last sync is forgotten by the next ``record(for:)``, as a
/// crash would lose it.
public final class MemoryTransferStorage: TransferStorage {
    private struct Entry {
        var record: TransferRecord
        var bytes: [UInt8]
        var digests: [UInt8] = []
    }
    private let entries = Mutex<[String: Entry]>([:])

    public init() {}

    /// The bytes of a complete transfer, nil if `id` is not complete.
    public func completedFile(id: String) -> [UInt8]? {
        entries.withLock { entries in
            guard let entry = entries[id], entry.record.isComplete else { return nil }
            return entry.bytes
        }
    }

    public func record(for id: String) throws -> TransferRecord? {
        entries.withLock { entries -> TransferRecord? in
            guard var entry = entries[id] else { return nil }
            entry.bytes.removeSubrange(Int(entry.record.durableOffset)...)
            let leaves = TransferChunkDigest.leafCount(size: entry.record.durableOffset)
            entry.digests.removeSubrange(min(entry.digests.count, leaves * TransferLeafDigest.byteCount)...)
            entries[id] = entry
            return entry.record
        }
    }

    public func create(_ record: TransferRecord) throws {
        entries.withLock { $0[record.id] = Entry(record: record, bytes: []) }
    }

    public func write(_ bytes: ArraySlice<UInt8>, at offset: UInt64, id: String) throws {
        try entries.withLock { entries in
            guard var entry = entries[id] else { throw Self.unknown(id) }
            guard offset == UInt64(entry.bytes.count) else {
                throw TransportError(code: .internal, reason: .ioError, message: "write at \(offset) after \(entry.bytes.count) bytes of \(id)")
            }
            entries[id] = nil
            entry.bytes += bytes
            entries[id] = entry
        }
    }

    public func sync(id: String, through offset: UInt64) throws {
        try entries.withLock { entries in
            guard entries[id] != nil else { throw Self.unknown(id) }
            entries[id]!.record.durableOffset = offset
        }
    }

    public func writeLeafDigests(_ digests: [UInt8], fromLeaf index: Int, id: String) throws {
        try entries.withLock { entries in
            guard var entry = entries[id] else { throw Self.unknown(id) }
            guard index * TransferLeafDigest.byteCount == entry.digests.count else {
                throw TransportError(code: .internal, reason: .ioError, message: "leaf digests from leaf \(index) after \(entry.digests.count / 32) of \(id)")
            }
            entries[id] = nil
            entry.digests += digests
            entries[id] = entry
        }
    }

    public func leafDigests(id: String) throws -> [UInt8] {
        try entries.withLock { entries in
            guard let entry = entries[id] else { throw Self.unknown(id) }
            return entry.digests
        }
    }

    public func read(id: String, at offset: UInt64, count: Int) throws -> [UInt8] {
        try entries.withLock { entries in
            guard let entry = entries[id] else { throw Self.unknown(id) }
            let start = Int(min(offset, UInt64(entry.bytes.count)))
            return Array(entry.bytes[start..<min(entry.bytes.count, start + count)])
        }
    }

    public func complete(id: String, sha256: [UInt8]) throws {
        try entries.withLock { entries in
            guard entries[id] != nil else { throw Self.unknown(id) }
            entries[id]!.record.isComplete = true
            entries[id]!.record.durableOffset = entries[id]!.record.size
            entries[id]!.record.sha256 = sha256
        }
    }

    public func discard(id: String) throws {
        _ = entries.withLock { $0.removeValue(forKey: id) }
    }

    private static func unknown(_ id: String) -> TransportError {
        TransportError(code: .internal, reason: .ioError, message: "no transfer \(id) in storage")
    }
}
