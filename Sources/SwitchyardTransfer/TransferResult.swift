/// How a successful ``Transfer`` went.
public struct TransferResult: Sendable, Hashable {
    public var id: String
    /// The source's size.
    public var size: UInt64
    /// Chunk bytes sent by this send, resent ones included (bytes the receiver already
    /// held when the send started are not sent, and not counted).
    public var bytesSent: UInt64
    /// Of those, bytes sent more than once.
    public var bytesResent: UInt64
    /// Times the transfer was picked up from an offset: a new call after a broken one,
    /// and a first call that found part of the file at the receiver already (a send
    /// restarted from saved state; a file the receiver holds whole is not a resume).
    public var resumes: Int
    /// The offset the first call of this send resumed at (what the receiver already held).
    public var startOffset: UInt64
    /// The transfer digest of the whole file, as sender and receiver agree (32 bytes):
    /// the SHA-256 of its 64 KiB leaves' digests (``TransferChunkDigest``), not the
    /// SHA-256 of the file.
    public var sha256: [UInt8]
    /// How long the send took.
    public var duration: Duration
    /// How the leaves were hashed.
    public var leafDigest: TransferLeafDigest

    public init(
        id: String, size: UInt64, bytesSent: UInt64, bytesResent: UInt64, resumes: Int, startOffset: UInt64, sha256: [UInt8], duration: Duration,
        leafDigest: TransferLeafDigest = .standard
    ) {
        self.id = id
        self.size = size
        self.bytesSent = bytesSent
        self.bytesResent = bytesResent
        self.resumes = resumes
        self.startOffset = startOffset
        self.sha256 = sha256
        self.duration = duration
        self.leafDigest = leafDigest
    }

    /// ``sha256`` in lowercase hex.
    public var sha256Hex: String { TransferDigest.hex(sha256) }
}
