import Switchyard
import SwitchyardCalls
import Synchronization

/// The receiver's syncs and `ack`s, behind its writes: the receiving loop tells it each
/// offset it has written through (``wrote(through:)``), and a task off the event loop
/// syncs the storage through the newest such offset, then acknowledges it, while the loop
/// goes on receiving and writing. A slow `fsync` (milliseconds on a disk) so overlaps with
/// the network instead of stopping it.
///
/// At most one sync runs at a time; offsets handed over while one runs fold into the
/// next (the newest wins). An offset is handed over once the bytes written since the last
/// one reach `interval` (the receiver's ack interval, at most half the sender's window).
/// So a sender that holds back for want of an `ack` always gets one: it holds back only
/// with more than a window minus a chunk (at least half a window) unacknowledged, so at
/// least `interval` of those bytes were handed over, and the sync they wait for runs on
/// its own, with no further chunk needed to start it.
///
/// A sync that fails ends the call with its error at once (the loop may be waiting for a
/// chunk that the sender holds back for want of an `ack`); ``finish(through:)`` and
/// ``stop()`` give the error.
///
/// ``wrote(through:)`` may be called from the receiver's worker (one call at a time,
/// offsets rising); its handler must ``stop()`` (or ``finish(through:)``) it
/// before it lets go of the transfer's id, so no sync of an old call runs on while a new
/// call for the id reads the record.
final class TransferAcknowledger: Sendable {
    private let requests: AsyncStream<UInt64>.Continuation
    private let task: Task<TransportError?, Never>
    private let interval: UInt64
    private let requested: Mutex<UInt64>

    /// Starts the task for the call `call` of transfer `id`, whose durable offset is
    /// `offset`.
    init(storage: any TransferStorage, id: String, call: AsyncCall, interval: UInt64, from offset: UInt64) {
        let (offsets, requests) = AsyncStream<UInt64>.makeStream(bufferingPolicy: .bufferingNewest(1))
        self.requests = requests
        self.interval = interval
        self.requested = Mutex(offset)
        self.task = Task(executorPreference: globalConcurrentExecutor) {
            for await offset in offsets {
                do throws(TransportError) {
                    try io { try storage.sync(id: id, through: offset) }
                } catch {
                    call.call.finish(CallStatus(error: error))
                    return error
                }
                call.call.send(TransferMessage.ack(offset: offset).encoded)
            }
            return nil
        }
    }

    /// The loop has written every byte below `offset`: hands it over for a sync when
    /// `interval` bytes were written since the last one.
    func wrote(through offset: UInt64) {
        let hand = requested.withLock { requested in
            guard offset - requested >= interval else { return false }
            requested = offset
            return true
        }
        if hand { requests.yield(offset) }
    }

    /// Syncs through `offset` (every byte received), waits for that sync and its `ack`
    /// to be sent, and ends the task.
    /// - Throws: the first sync's error.
    func finish(through offset: UInt64) async throws(TransportError) {
        let hand = requested.withLock { requested in
            guard offset > requested else { return false }
            requested = offset
            return true
        }
        if hand { requests.yield(offset) }
        requests.finish()
        if let error = await task.value { throw error }
    }

    /// Ends the task after the sync under way, if any (the call ended early); nothing
    /// more is synced.
    func stop() async {
        task.cancel()
        requests.finish()
        _ = await task.value
    }
}
