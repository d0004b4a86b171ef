import Synchronization

/// The bytes a transport's connections have written and read so far.
public struct ByteTotals: Sendable, Hashable {
    /// Bytes handed to `bsd`'s connections to write, through any of the write entry
    /// points (for `lossy`, after its loss; writes that later fail included).
    public var written: Int
    /// Bytes delivered to the connections' handlers.
    public var read: Int

    public init(written: Int, read: Int) {
        self.written = written
        self.read = read
    }
}

/// One transport's counts, shared by its connections on every loop: relaxed atomics, so
/// no lock is taken per write or read.
final class ByteCounter: Sendable {
    private let writtenBytes = Atomic<Int>(0)
    private let readBytes = Atomic<Int>(0)

    func wrote(_ count: Int) { writtenBytes.wrappingAdd(count, ordering: .relaxed) }
    func read(_ count: Int) { readBytes.wrappingAdd(count, ordering: .relaxed) }

    var totals: ByteTotals {
        ByteTotals(written: writtenBytes.load(ordering: .relaxed), read: readBytes.load(ordering: .relaxed))
    }
}
