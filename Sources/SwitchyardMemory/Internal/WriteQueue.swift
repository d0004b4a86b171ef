import DequeModule
import Switchyard

/// A connection's writes that are not yet all in the peer's receive buffer, in call
/// order. Touched only on the connection's loop (and, inside ``MemoryPipe/move(from:)``,
/// by that loop while it holds the pipe's lock).
struct WriteQueue {
    struct Entry {
        /// The write's bytes; `bytes[offset...]` is still to move.
        var bytes: [UInt8]
        var offset = 0
        let completion: WriteCompletion?

        var remaining: Int { bytes.count - offset }
    }

    private(set) var entries: Deque<Entry> = []
    /// Bytes still to move, over every entry.
    private(set) var bytes = 0

    var isEmpty: Bool { entries.isEmpty }

    mutating func append(_ bytes: [UInt8], completion: WriteCompletion?) {
        entries.append(Entry(bytes: bytes, completion: completion))
        self.bytes += bytes.count
    }

    /// Marks `count` bytes of the entry at `index` as moved.
    mutating func advance(_ index: Int, by count: Int) {
        entries[index].offset += count
        bytes -= count
    }

    /// Removes the first entry if all its bytes moved and returns its completion
    /// (wrapped: `.some(nil)` for a write without one); nil if the first is not done.
    mutating func popCompleted() -> WriteCompletion?? {
        guard let first = entries.first, first.remaining == 0 else { return nil }
        entries.removeFirst()
        return .some(first.completion)
    }

    /// Removes every entry and returns their completions, in order.
    mutating func removeAll() -> [WriteCompletion?] {
        let completions = entries.map(\.completion)
        entries.removeAll()
        bytes = 0
        return completions
    }
}
