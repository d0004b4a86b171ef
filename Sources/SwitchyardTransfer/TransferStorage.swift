import Switchyard

/// What a receiver knows about one transfer.
public struct TransferRecord: Sendable, Hashable {
    /// The transfer's id (the sender's choice; also the finished file's name in a
    /// ``DirectoryTransferStorage``).
    public var id: String
    /// The whole source's size in bytes.
    public var size: UInt64
    /// The file's transfer digest (``TransferChunkDigest``, 32 bytes) once it is
    /// complete; empty before.
    public var sha256: [UInt8]
    /// Bytes from the start that are durable (written and synced).
    public var durableOffset: UInt64
    /// Whether the file was received whole and its transfer digest checked.
    public var isComplete: Bool
    /// How the stored leaf digests were made (the offer's ``TransferLeafDigest``).
    public var leafDigest: TransferLeafDigest

    public init(
        id: String, size: UInt64, sha256: [UInt8] = [], durableOffset: UInt64 = 0, isComplete: Bool = false,
        leafDigest: TransferLeafDigest = .standard
    ) {
        self.id = id
        self.size = size
        self.sha256 = sha256
        self.durableOffset = durableOffset
        self.isComplete = isComplete
        self.leafDigest = leafDigest
    }
}

/// Where a receiver puts the bytes of its transfers: the file I/O behind the protocol,
/// so tests keep them in memory (``MemoryTransferStorage``) and a server in a folder
/// (``DirectoryTransferStorage``).
///
/// The receiver calls it for one id at a time (a new call for an id waits until the
/// previous call for it has ended), in this order: ``record(for:)`` (then
/// ``leafDigests(id:)`` and a ``read(id:at:count:)`` of the last durable leaf, for an
/// incomplete transfer with bytes); ``create(_:)`` for a new id (or to start one over);
/// for each chunk, in offset order starting at the durable offset, ``write(_:at:id:)``
/// then ``writeLeafDigests(_:fromLeaf:id:)`` (from a worker thread, never the event
/// loop); ``sync(id:through:)`` before each acknowledgement, from another thread while
/// later writes go on (at most one sync at a time, and it covers only bytes and digests
/// whose writes returned before it was called); at the end ``complete(id:sha256:)`` or,
/// if the digest differs, ``discard(id:)``. The receiver never reads a whole file back:
/// the digests it checks at the end are the ones it stored. Errors it throws end the
/// call with that error (a `TransportError` as is, anything else as `internal`, reason
/// `i/o error`).
public protocol TransferStorage: Sendable {
    /// What is stored for `id`, nil if nothing. Bytes and leaf digests written past the
    /// durable offset and never synced are forgotten: the next write starts at the
    /// durable offset.
    func record(for id: String) throws -> TransferRecord?
    /// Starts a new transfer with no bytes (replacing whatever was stored for its id);
    /// the record's ``TransferRecord/leafDigest`` must be kept with it.
    func create(_ record: TransferRecord) throws
    /// Stores `bytes` at `offset` (not yet durable). `bytes` is a slice of the received
    /// message: not copied on the way here.
    func write(_ bytes: ArraySlice<UInt8>, at offset: UInt64, id: String) throws
    /// Stores the leaf digests (32 bytes each, made as the record's
    /// ``TransferRecord/leafDigest`` says) of the bytes just written, the first for leaf `index` (not yet durable).
    func writeLeafDigests(_ digests: [UInt8], fromLeaf index: Int, id: String) throws
    /// The stored leaf digests of the durable bytes, concatenated (32 bytes per leaf).
    func leafDigests(id: String) throws -> [UInt8]
    /// Up to `count` stored bytes at `offset` (the receiver reads its last durable leaf
    /// on resume, nothing else).
    func read(id: String, at offset: UInt64, count: Int) throws -> [UInt8]
    /// Makes every byte and leaf digest below `offset` durable (their writes returned
    /// before this call; writes of later ones may run at the same time) and records
    /// `offset` as the durable offset (it survives a restart of the receiver).
    func sync(id: String, through offset: UInt64) throws
    /// The file is whole and checked: publish it, mark the record complete and keep its
    /// transfer digest `sha256`.
    func complete(id: String, sha256: [UInt8]) throws
    /// Forgets the transfer and its bytes (after an integrity mismatch).
    func discard(id: String) throws
}

extension TransferRecord {
    /// Whether `id` may be used as a transfer id (and a file name): 1 to 255 bytes of
    /// ASCII letters, digits, `.`, `_` and `-`, not starting with `.`.
    public static func isValid(id: String) -> Bool {
        let bytes = Array(id.utf8)
        guard !bytes.isEmpty, bytes.count <= TransferMessage.maximumIDLength, bytes[0] != UInt8(ascii: ".") else { return false }
        return bytes.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "-"):
                true
            default:
                false
            }
        }
    }
}
