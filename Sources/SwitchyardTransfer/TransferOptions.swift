import Switchyard
import SwitchyardCalls

/// Settings of a ``Transfer`` (the sending side).
public struct TransferOptions: Sendable {
    /// Bytes per chunk message (default 1 MiB, what a ``TransferServer`` takes by default;
    /// at most half the ``window``). Rounded down to a multiple of
    /// ``TransferChunkDigest/leafSize`` (64 KiB), and at least one leaf whatever the
    /// window. Each chunk costs a hand-off to a worker at each end: 1 MiB chunks took
    /// about a tenth less CPU per GiB than 256 KiB ones at each end over loopback. The
    /// receiver holds up to two chunks and a read per transfer.
    public var chunkSize: Int
    /// The most bytes sent and not yet acknowledged (default 4 MiB). After a broken call
    /// at most this many bytes are sent again.
    public var window: Int
    /// Calls in a row that may break before the transfer gives up (default 10); a call
    /// that got the receiver's `resume` answer starts the count again.
    public var maximumAttempts: Int
    /// How long after a break the sender keeps trying to resume (default 30 s).
    public var reconnectTimeout: Duration
    /// The wait before the first new call after a break (default 50 ms), doubling up to
    /// ``maximumRetryDelay`` (default 1 s).
    public var retryDelay: Duration
    public var maximumRetryDelay: Duration
    /// Where to keep the resume state, if anywhere: loaded when a send starts, saved as
    /// acknowledgements arrive (at most every 100 ms) and when a send stops, removed when
    /// it succeeds.
    public var resumeStatePath: String?
    /// How each 64 KiB leaf is hashed (default XXH3-128; ``TransferLeafDigest`` says when
    /// to choose SHA-256). A send that resumes from a saved state hashes as that state's
    /// send did, whatever this says, so the receiver can go on from its bytes.
    public var leafDigest: TransferLeafDigest

    public init(
        chunkSize: Int = 1 << 20, window: Int = 4 << 20, maximumAttempts: Int = 10,
        reconnectTimeout: Duration = .seconds(30), retryDelay: Duration = .milliseconds(50),
        maximumRetryDelay: Duration = .seconds(1), resumeStatePath: String? = nil, leafDigest: TransferLeafDigest = .standard
    ) {
        precondition(
            chunkSize > 0 && window >= 2 && window <= Int(UInt32.max) && maximumAttempts > 0,
            "TransferOptions: chunkSize \(chunkSize) (> 0), window \(window) (2...UInt32.max), maximumAttempts \(maximumAttempts) (> 0) out of range (a programming error)")
        self.chunkSize = chunkSize
        self.window = window
        self.maximumAttempts = maximumAttempts
        self.reconnectTimeout = reconnectTimeout
        self.retryDelay = retryDelay
        self.maximumRetryDelay = maximumRetryDelay
        self.resumeStatePath = resumeStatePath
        self.leafDigest = leafDigest
    }

    /// The chunk size used: ``chunkSize`` capped at half the window, in whole leaves (at
    /// least one).
    var effectiveChunkSize: Int {
        let leaf = TransferChunkDigest.leafSize
        return max(1, min(chunkSize, window / 2) / leaf) * leaf
    }

    /// The calls' options: flow control on.
    var callOptions: CallConfiguration { CallConfiguration(enableFlowControl: true) }
}
