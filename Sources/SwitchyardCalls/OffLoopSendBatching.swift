import Switchyard
import Synchronization

/// The messages a call was given to send from off its event loop, waiting for the loop.
///
/// The rule: a send made off the loop appends its message to this queue under one lock,
/// and only the append that finds the queue empty schedules work on the loop (one wake
/// of the loop per batch, not per message). That work takes everything queued at once
/// and sends it, in order, inside one write hold of the call's HTTP/2 connection
/// (`H2Connection.holdWrites()`), so the batch leaves in one write. A send made on the
/// loop takes its direct path and never comes here.
///
/// What stays as it was: messages go out in the order they were queued, and before
/// anything the call was asked later from the same thread (a cancel, a half-close: those
/// are scheduled after the batch's work); each message is sent by the call's own
/// on-loop path, so it has its own write completion and, with flow control on, its own
/// `didWriteData`, once the batch's write is in the kernel; a message that reaches a
/// call that has ended fails the way a late send always did. The queue holds what the
/// senders handed over and not yet seen by the loop, as the loop's own job queue did
/// before it: it adds no buffering of its own.
///
/// Per message: one lock and an append into an array whose capacity is kept from batch
/// to batch (the loop swaps it with a spare), no allocation and no hop; per batch: one
/// job on the loop (`TransportEventLoop.execute`, the loop's queue lock and wake-up).
///
/// Safety of `@unchecked Sendable`: `queued` is behind its lock; `spare` is touched only
/// by ``drain(_:)``, which runs on the call's loop.
final class OffLoopSendBatching: @unchecked Sendable {
    /// One message and the completion its sender gave.
    struct Item {
        let message: [UInt8]
        let completion: WriteCompletion?
    }

    private let queued = Mutex<[Item]>([])
    /// The array the last batch was taken in, emptied with its capacity kept.
    private var spare: [Item] = []

    init() {}

    /// Queues `item`. Returns true when the queue was empty: the caller schedules
    /// ``drain(_:)`` on the loop (once per batch).
    func enqueue(_ item: Item) -> Bool {
        queued.withLock { items in
            items.append(item)
            return items.count == 1
        }
    }

    /// On the loop: takes everything queued and hands each item to `send`, in order. An
    /// item queued meanwhile schedules the next drain.
    func drain(_ send: (Item) -> Void) {
        queued.withLock { swap(&$0, &spare) }
        for item in spare { send(item) }
        spare.removeAll(keepingCapacity: true)
    }
}
