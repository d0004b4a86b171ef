import DequeModule
import Switchyard
import SwitchyardBackendKit
import Synchronization

/// One direction of an in-memory connection: the reader's receive buffer, which the
/// writer fills and the reader drains, and the wake-ups between the two.
///
/// The writer and the reader may live on different loops, so this is the one piece of
/// a connection shared across threads; all of it is behind one lock, held only to move
/// bytes in or out (never while calling a handler or another lock).
///
/// ## Flow control
/// The buffer holds at most ``capacity`` bytes, like a kernel socket buffer. The writer
/// moves what fits (``send(_:_:)``, ``move(from:)``); what does not stays queued on the
/// writer, which is then *blocked*. The reader takes at most one read buffer's worth at a time
/// (``read(into:)``); when that frees room for a blocked writer, the reader is told to
/// wake it. So a reader that does not read holds the writer back after `capacity`
/// bytes, exactly as TCP does.
///
/// ## Wake-ups (no lost wake-up, at most one outstanding each way)
/// - The reader, finding the buffer empty while it reads, sets `readerWantsWake` under
///   the lock. A writer that then adds bytes or the end of stream clears the flag under
///   the same lock and wakes the reader (an `execute` on the reader's loop).
/// - The writer, leaving bytes queued, sets `writerBlocked` under the lock. A reader that
///   then frees room, or goes away, clears the flag under the same lock and wakes the
///   writer.
/// Because each side checks and sets its flag under the lock the other side tests it
/// under, a wake-up is either sent or the sleeper sees the change itself.
///
/// ## Ends
/// - `finished` (FIN): the writer shut its output down or closed; the reader gets end of
///   stream after every byte in the buffer.
/// - `reset` (RST): the writer reset; the reader ends with `unavailable`/`reset` at once,
///   whether it reads or not, and the buffer is discarded.
/// - `readerGone`: the reader ended; bytes have nowhere to go, so a writer with bytes to
///   move ends with `unavailable`/`reset`, as a TCP write to a closed peer does.
final class MemoryPipe: Sendable {
    /// The default receive window, a typical kernel socket buffer.
    static let defaultCapacity = 256 * 1024

    /// How many bytes the receive buffer holds at most.
    let capacity: Int

    private struct State {
        var chunks: Deque<[UInt8]> = []
        /// Bytes of `chunks.first` already read.
        var headOffset = 0
        var buffered = 0
        var finished = false
        var reset = false
        var readerGone = false
        var readerWantsWake = false
        var writerBlocked = false
        var reader: MemoryConnection?
        var writer: MemoryConnection?

        /// Accounts for `count` of `offered` bytes added to the buffer: the writer is
        /// blocked if some did not fit, and the reader is returned to wake if it waits.
        mutating func moved(_ count: Int, of offered: Int) -> MoveResult {
            buffered += count
            if count < offered { writerBlocked = true }
            guard count > 0, readerWantsWake else { return .moved(count: count, wake: nil) }
            readerWantsWake = false
            return .moved(count: count, wake: reader)
        }
    }
    private let state = Mutex(State())

    init(capacity: Int = MemoryPipe.defaultCapacity) {
        // Programmer misuse only: the capacity is the backend's own constant, no input sets it.
        precondition(capacity > 0, "MemoryPipe(capacity:) was given \(capacity): a pipe holds 1 byte or more (a programming error)")
        self.capacity = capacity
    }

    /// Connects the two ends. Called once, before either end is used.
    func attach(writer: MemoryConnection, reader: MemoryConnection) {
        state.withLock { state in
            state.writer = writer
            state.reader = reader
        }
    }

    // MARK: writer side (on the writer's loop)

    /// What a ``move(from:)`` did.
    enum MoveResult {
        /// `count` bytes moved; wake `reader` (on its loop) if not nil.
        case moved(count: Int, wake: MemoryConnection?)
        /// The reader is gone and bytes are waiting: the writer's connection is reset.
        case peerGone
    }

    /// Copies `header` (if any) and then `body` into the receive buffer, as much as fits:
    /// the memory equivalent of a nonblocking `send`, which copies borrowed bytes into
    /// the kernel. If not all fit, the writer is blocked (woken when the reader frees
    /// room). A send of nothing to a reader that is gone moves nothing and is not an
    /// error, as an empty TCP write is not.
    func send(_ header: UnsafeRawBufferPointer?, _ body: UnsafeRawBufferPointer) -> MoveResult {
        let headerCount = header?.count ?? 0
        let total = headerCount + body.count
        return state.withLock { state in
            if state.readerGone { return total > 0 ? .peerGone : .moved(count: 0, wake: nil) }
            let count = min(max(0, capacity - state.buffered), total)
            if count > 0 {
                state.chunks.append(Array(unsafeUninitializedCapacity: count) { chunk, initialized in
                    let target = UnsafeMutableRawBufferPointer(chunk)
                    let fromHeader = min(count, headerCount)
                    if let header, fromHeader > 0 {
                        target.copyMemory(from: UnsafeRawBufferPointer(rebasing: header[..<fromHeader]))
                    }
                    if count > fromHeader {
                        UnsafeMutableRawBufferPointer(rebasing: target[fromHeader...])
                            .copyMemory(from: UnsafeRawBufferPointer(rebasing: body[..<(count - fromHeader)]))
                    }
                    initialized = count
                })
            }
            return state.moved(count, of: total)
        }
    }

    /// Moves as many of `writes`' bytes as fit into the receive buffer, from the front, in
    /// order; the caller then takes the count off its queue. Whole writes that fit move
    /// without a copy.
    func move(from writes: PendingWrites) -> MoveResult {
        state.withLock { state in
            if state.readerGone { return writes.bytes > 0 ? .peerGone : .moved(count: 0, wake: nil) }
            var room = max(0, capacity - state.buffered)
            var moved = 0
            for entry in writes.entries {
                guard room > 0 else { break }
                let count = min(room, entry.remaining)
                if count == 0 { continue }
                if entry.offset == 0 && count == entry.bytes.count {
                    state.chunks.append(entry.bytes)
                } else {
                    state.chunks.append(Array(entry.bytes[entry.offset..<entry.offset + count]))
                }
                moved += count
                room -= count
            }
            return state.moved(moved, of: writes.bytes)
        }
    }

    /// The writer has bytes queued: returns true when they can move now (there is room,
    /// or the reader is gone and the move will say so); otherwise the writer is blocked
    /// and the reader wakes it once it frees room.
    func writerWaits() -> Bool {
        state.withLock { state in
            if state.readerGone || state.buffered < capacity { return true }
            state.writerBlocked = true
            return false
        }
    }

    /// Sends the end of stream (after the bytes already in the buffer) and forgets the
    /// writer. Returns the reader to wake, if it waits for data.
    func finish() -> MemoryConnection? {
        state.withLock { state in
            state.writer = nil
            state.writerBlocked = false
            guard !state.finished, !state.reset else { return nil }
            state.finished = true
            guard state.readerWantsWake else { return nil }
            state.readerWantsWake = false
            return state.reader
        }
    }

    /// Resets the stream: the reader's buffer is discarded and it ends with a reset.
    /// Returns the reader to wake (always: a reset is seen even by a reader that does
    /// not read).
    func resetByWriter() -> MemoryConnection? {
        state.withLock { state in
            state.writer = nil
            state.writerBlocked = false
            guard !state.reset, !state.readerGone else { return nil }
            state.reset = true
            state.chunks.removeAll()
            state.headOffset = 0
            state.buffered = 0
            state.readerWantsWake = false
            return state.reader
        }
    }

    // MARK: reader side (on the reader's loop)

    /// What a ``read(into:)`` found.
    enum ReadResult {
        /// `count` bytes copied into the buffer; wake `writer` (on its loop) if not nil.
        case bytes(count: Int, wake: MemoryConnection?)
        /// Every byte was read and the writer finished.
        case endOfStream
        /// The writer reset the stream.
        case reset
        /// Nothing to read now; the reader will be woken when that changes.
        case empty
    }

    /// Copies up to `buffer.count` bytes out of the receive buffer.
    func read(into buffer: UnsafeMutableRawBufferPointer) -> ReadResult {
        state.withLock { state in
            if state.reset { return .reset }
            if state.buffered == 0 {
                if state.finished { return .endOfStream }
                state.readerWantsWake = true
                return .empty
            }
            var count = 0
            while count < buffer.count, let first = state.chunks.first {
                let available = first.count - state.headOffset
                let take = min(available, buffer.count - count)
                first.withUnsafeBytes { source in
                    (buffer.baseAddress! + count).copyMemory(from: source.baseAddress! + state.headOffset, byteCount: take)
                }
                count += take
                if take == available {
                    state.chunks.removeFirst()
                    state.headOffset = 0
                } else {
                    state.headOffset += take
                }
            }
            state.buffered -= count
            var wake: MemoryConnection?
            if state.writerBlocked {
                state.writerBlocked = false
                wake = state.writer
            }
            return .bytes(count: count, wake: wake)
        }
    }

    /// Whether the writer reset the stream (checked by a reader that is not reading).
    var isReset: Bool { state.withLock { $0.reset } }

    /// The reader ended: discard the buffer and forget the reader. Returns the writer to
    /// wake if it is blocked (it will find the reader gone).
    func closeReader() -> MemoryConnection? {
        state.withLock { state in
            state.readerGone = true
            state.reader = nil
            state.readerWantsWake = false
            state.chunks.removeAll()
            state.headOffset = 0
            state.buffered = 0
            guard state.writerBlocked else { return nil }
            state.writerBlocked = false
            return state.writer
        }
    }
}
