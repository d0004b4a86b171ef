// The integrity rule of the transfer protocol (version 3), in one place.
//
// A source is cut into leaves of `leafSize` bytes (the last one shorter; none for an
// empty source), and each leaf is hashed once at each end, as its bytes go by, with the
// leaf digest the sender's `offer` names (``TransferLeafDigest``: XXH3-128 by default,
// or SHA-256; 32 bytes each): the sender hashes a chunk's leaves when it reads the chunk
// to send it, the receiver when the chunk arrives, on a worker rather than the event
// loop, before it hands the bytes to the storage. Nothing is hashed twice and no file is
// read back.
//
// - A chunk covers whole leaves (it starts at a multiple of `leafSize`; it ends at one,
//   or at the size). Its digest, carried in the `chunk` message, is the SHA-256 of its
//   leaves' digests, concatenated: the receiver recomputes it, and a chunk whose bytes
//   do not give it is not stored (it is sent again).
// - The transfer digest of bytes [0, n) (`n` a leaf boundary or the size) is the
//   SHA-256 of the digests of the leaves in it, concatenated; the whole file's is the
//   one `end` and `done` carry and ``TransferResult/sha256`` reports. It is not the
//   SHA-256 of the file (`sha256sum` gives another value); ``root(of:using:)`` computes
//   it.
// - The receiver stores the leaves' digests beside the bytes (synced with them), and the
//   leaf digest in its record; on resume it answers the digest of its durable prefix,
//   and the sender refuses to go on (`source changed`) if its own source's prefix has
//   another one. It re-reads only its last durable leaf, to check it against its stored
//   digest (a torn or lost tail), and starts over if that leaf is not what it stored, or
//   if its record has another leaf digest than the offer's.
import Crypto
import Switchyard

/// The leaf hashes and transfer digests of the transfer protocol: the rule is in the
/// header of `TransferChunkDigest.swift` and in ``TransferMessage``.
public enum TransferChunkDigest {
    /// Bytes per leaf (64 KiB). Chunks start at multiples of it.
    public static let leafSize = 64 << 10

    /// The number of leaves of `size` bytes.
    public static func leafCount(size: UInt64) -> Int {
        Int((size + UInt64(leafSize) - 1) / UInt64(leafSize))
    }

    /// The digest of each leaf of `bytes` (which start at a leaf boundary), concatenated
    /// (32 bytes per leaf).
    public static func leafDigests(of bytes: UnsafeRawBufferPointer, using algorithm: TransferLeafDigest = .standard) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count + leafSize - 1) / leafSize * TransferLeafDigest.byteCount)
        var start = 0
        while start < bytes.count {
            let end = min(start + leafSize, bytes.count)
            algorithm.append(digestOf: UnsafeRawBufferPointer(rebasing: bytes[start..<end]), to: &out)
            start = end
        }
        return out
    }

    /// ``leafDigests(of:using:)-(UnsafeRawBufferPointer,_)`` of a slice.
    public static func leafDigests(of bytes: ArraySlice<UInt8>, using algorithm: TransferLeafDigest = .standard) -> [UInt8] {
        bytes.withUnsafeBytes { leafDigests(of: $0, using: algorithm) }
    }

    /// A chunk's digest (or a prefix's transfer digest): the SHA-256 of leaf digests.
    public static func digest(ofLeafDigests digests: ArraySlice<UInt8>) -> [UInt8] {
        Array(SHA256.hash(data: digests))
    }

    /// The transfer digest of `bytes`: what ``TransferResult/sha256`` says for a source
    /// of these bytes sent with leaf digest `algorithm`.
    public static func root(of bytes: [UInt8], using algorithm: TransferLeafDigest = .standard) -> [UInt8] {
        digest(ofLeafDigests: leafDigests(of: bytes[...], using: algorithm)[...])
    }

    /// The leaf digests of `source`'s first `count` bytes (a leaf boundary or the size),
    /// read 1 MiB at a time: what a sender that did not send them itself checks a
    /// receiver's `resume` answer with.
    /// - Throws: the source's read error; `failedPrecondition`, reason `source changed`,
    ///   if it ends early.
    static func leafDigests(of source: some TransferSource, count: UInt64, using algorithm: TransferLeafDigest) throws -> [UInt8] {
        var out: [UInt8] = []
        var offset: UInt64 = 0
        while offset < count {
            let bytes = try source.read(at: offset, count: Int(min(UInt64(1 << 20), count - offset)))
            guard !bytes.isEmpty else {
                throw TransportError(code: .failedPrecondition, reason: .sourceChanged, message: "\(source.identity) ended at \(offset) of \(count) bytes")
            }
            out += leafDigests(of: bytes[...], using: algorithm)
            offset += UInt64(bytes.count)
        }
        return out
    }
}

/// The transfer digest of a growing run of leaf digests, hashed as it grows rather than
/// from its first leaf each time: a sender's resume state is made after every `ack`,
/// and hashing all of a 1 GiB transfer's digests again each time (up to 512 KiB, once
/// per MiB acknowledged) would hash a quarter of the file's size once more.
struct RunningTransferDigest {
    private var hasher = SHA256()
    /// How many bytes of leaf digests are hashed.
    private var hashed = 0

    /// The digest of `digests[..<end]`, which must start with the bytes hashed before
    /// (``reset()`` when they change).
    mutating func digest(of digests: [UInt8], through end: Int) -> [UInt8] {
        if end < hashed { reset() }
        if end > hashed {
            hasher.update(data: digests[hashed..<end])
            hashed = end
        }
        return Array(hasher.finalize())
    }

    mutating func reset() {
        hasher = SHA256()
        hashed = 0
    }
}
