import Crypto
import Switchyard
import Synchronization

/// A ``TransferStorage`` in memory, for tests: "durable" means synced here, and what
/// was written past the last sync is forgotten by the next ``record(for:)``, as a
/// crash would lose it.
public final class MemoryTransferStorage: TransferStorage {
    private struct Entry {
        var record: TransferRecord
        var bytes: [UInt8]
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
        entries.withLock { entries in
            guard var entry = entries[id] else { return nil }
            entry.bytes.removeSubrange(Int(entry.record.durableOffset)...)
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

    public func digest(id: String) throws -> [UInt8] {
        try entries.withLock { entries in
            guard let entry = entries[id] else { throw Self.unknown(id) }
            return Array(SHA256.hash(data: entry.bytes))
        }
    }

    public func complete(id: String) throws {
        try entries.withLock { entries in
            guard entries[id] != nil else { throw Self.unknown(id) }
            entries[id]!.record.isComplete = true
        }
    }

    public func discard(id: String) throws {
        _ = entries.withLock { $0.removeValue(forKey: id) }
    }

    private static func unknown(_ id: String) -> TransportError {
        TransportError(code: .internal, reason: .ioError, message: "no transfer \(id) in storage")
    }
}
