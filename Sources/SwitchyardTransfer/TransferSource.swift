import Crypto
import Switchyard

/// What a ``Transfer`` sends: a sized, randomly readable sequence of bytes.
///
/// A source must read the same bytes at the same offsets for as long as it reports the
/// same ``identity``; a source whose content changes should report another identity
/// (a file's identity includes its size and modification time), so a resume never
/// splices two versions.
public protocol TransferSource: Sendable {
    /// The total size in bytes.
    var size: UInt64 { get }
    /// What names this version of the content (for resume state): a path with its size
    /// and modification time, or a name the application gives.
    var identity: String { get }
    /// Up to `count` bytes at `offset` (fewer only at the end).
    func read(at offset: UInt64, count: Int) throws -> [UInt8]
    /// Reads up to `buffer.count` bytes at `offset` into `buffer`; returns how many
    /// (fewer only at the end). The sender reads chunks with it straight into the
    /// message it sends. The default copies from ``read(at:count:)``.
    func read(at offset: UInt64, into buffer: UnsafeMutableRawBufferPointer) throws -> Int
    /// Throws `failedPrecondition`, reason `source changed`, if the content is no longer
    /// what it was when the source was opened. The sender checks before each attempt.
    func checkUnchanged() throws
}

extension TransferSource {
    public func checkUnchanged() throws {}

    public func read(at offset: UInt64, into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
        let bytes = try read(at: offset, count: buffer.count)
        bytes.withUnsafeBytes { buffer.copyMemory(from: $0) }
        return bytes.count
    }

    /// The SHA-256 of the whole source (reads it once, 1 MiB at a time).
    public func sha256() throws -> [UInt8] {
        var hasher = SHA256()
        var offset: UInt64 = 0
        while offset < size {
            let bytes = try read(at: offset, count: Int(min(UInt64(1 << 20), size - offset)))
            guard !bytes.isEmpty else {
                throw TransportError(code: .failedPrecondition, reason: .sourceChanged, message: "\(identity) ended at \(offset) of \(size) bytes")
            }
            hasher.update(data: bytes)
            offset += UInt64(bytes.count)
        }
        return Array(hasher.finalize())
    }
}

/// A source held in memory.
public struct MemoryTransferSource: TransferSource {
    public let bytes: [UInt8]
    public let identity: String
    public var size: UInt64 { UInt64(bytes.count) }

    /// `bytes`, named `identity` (default: `memory:<size>`).
    public init(_ bytes: [UInt8], identity: String? = nil) {
        self.bytes = bytes
        self.identity = identity ?? "memory:\(bytes.count)"
    }

    public func read(at offset: UInt64, count: Int) throws -> [UInt8] {
        let start = Int(min(offset, size))
        return Array(bytes[start..<min(bytes.count, start + count)])
    }
}
