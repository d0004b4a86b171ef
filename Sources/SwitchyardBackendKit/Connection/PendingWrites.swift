public import DequeModule
public import Switchyard

/// A connection's writes that are not yet all taken (by the kernel, or by the peer's
/// receive window for an in-memory backend), in call order, with their completions.
///
/// Only the unsent tail of each write is pending: `bytes[offset...]`. A backend hands the
/// kernel what it can straight from the caller's bytes and queues what is left, either
/// the caller's array itself with an offset (no copy) or a copy of the tail. The queue
/// runs each completion exactly once, in order: with `nil` when
/// ``ConnectionStateMachine/writesTaken(_:completed:)`` says its last byte was taken, or
/// with the terminal error when ``ConnectionStateMachine/end(with:bytesTaken:)`` ends the
/// connection first.
///
/// Touched only on the connection's loop.
public struct PendingWrites {
    /// One write.
    public struct Entry {
        /// The write's bytes; `bytes[offset...]` is still to go.
        public var bytes: [UInt8]
        /// How many of `bytes` already went.
        public var offset: Int
        /// Runs once with the write's outcome; nil for a write nobody waits for.
        public let completion: WriteCompletion?

        /// Bytes still to go.
        @inlinable public var remaining: Int { bytes.count - offset }

        @inlinable
        public init(bytes: [UInt8], offset: Int, completion: WriteCompletion?) {
            self.bytes = bytes
            self.offset = offset
            self.completion = completion
        }
    }

    /// The writes, oldest first.
    public internal(set) var entries: Deque<Entry> = []
    /// Bytes still to go, over every entry.
    public internal(set) var bytes = 0

    @inlinable public var isEmpty: Bool { entries.isEmpty }
    @inlinable public var count: Int { entries.count }

    public init() {}

    /// Queues `bytes[offset...]`; `completion` runs once every byte of it went.
    public mutating func append(_ bytes: [UInt8], offset: Int = 0, completion: WriteCompletion?) {
        // Programmer misuse only: the offset is what the backend itself wrote of `bytes`.
        precondition(
            offset >= 0 && offset <= bytes.count,
            "a pending write's offset \(offset) lies outside its \(bytes.count) bytes (a bug in the backend)")
        entries.append(Entry(bytes: bytes, offset: offset, completion: completion))
        self.bytes += bytes.count - offset
    }

    /// Takes `count` bytes off the front: every entry they cover in full is removed and
    /// its completion appended to `completed`; a partly covered entry keeps its tail.
    public mutating func consume(_ count: Int, completed: inout [WriteCompletion]) {
        // Programmer misuse only: `count` is what the kernel took of these very bytes.
        precondition(count >= 0 && count <= bytes, "\(count) bytes were taken of \(bytes) pending (a bug in the backend)")
        bytes -= count
        var left = count
        while let first = entries.first {
            let remaining = first.remaining
            if remaining <= left {
                left -= remaining
                if let completion = entries.removeFirst().completion { completed.append(completion) }
            } else {
                entries[entries.startIndex].offset += left
                return
            }
        }
    }

    /// Removes every entry. The completions of the leading entries that `bytesTaken`
    /// covers in full go to `succeeded`, the rest to `failed`, in order.
    public mutating func removeAll(bytesTaken: Int, succeeded: inout [WriteCompletion], failed: inout [WriteCompletion]) {
        var taken = bytesTaken
        var broken = false
        for entry in entries {
            let done = !broken && entry.remaining <= taken
            if done { taken -= entry.remaining } else { broken = true }
            if let completion = entry.completion {
                if done { succeeded.append(completion) } else { failed.append(completion) }
            }
        }
        entries.removeAll()
        bytes = 0
    }
}
