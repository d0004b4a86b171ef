/// One progress report of a ``Transfer``, sent whenever the receiver acknowledges bytes,
/// and when a call resumes.
public struct TransferProgress: Sendable, Hashable {
    /// Bytes the receiver has acknowledged as durable (from the start of the file).
    public var bytesAcknowledged: UInt64
    /// The source's size.
    public var totalBytes: UInt64
    /// Bytes acknowledged per second since this send started (bytes the receiver held
    /// before it are not counted); 0 until there is a measurement.
    public var bytesPerSecond: Double
    /// The time left at that rate; nil while the rate is unknown.
    public var estimatedTimeRemaining: Duration?
    /// Times the transfer was picked up from an offset so far (``TransferResult/resumes``).
    public var resumes: Int
    /// Bytes sent more than once so far (sent, not acknowledged, then the call broke).
    public var bytesResent: UInt64

    public init(bytesAcknowledged: UInt64, totalBytes: UInt64, bytesPerSecond: Double, estimatedTimeRemaining: Duration?, resumes: Int, bytesResent: UInt64) {
        self.bytesAcknowledged = bytesAcknowledged
        self.totalBytes = totalBytes
        self.bytesPerSecond = bytesPerSecond
        self.estimatedTimeRemaining = estimatedTimeRemaining
        self.resumes = resumes
        self.bytesResent = bytesResent
    }

    /// The share done, 0 to 1 (1 for an empty source).
    public var fractionCompleted: Double {
        totalBytes == 0 ? 1 : Double(bytesAcknowledged) / Double(totalBytes)
    }
}
