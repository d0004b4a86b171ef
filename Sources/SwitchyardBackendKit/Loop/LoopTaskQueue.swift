import Synchronization

/// The queue that carries work onto a loop from any thread, with at most one wake-up
/// outstanding: the first submitter of a batch wakes the loop (an eventfd write, a
/// `uv_async_send`), the rest only append. Once the loop stops, the queue refuses work,
/// so the submitter can finish it another way (nothing is silently dropped).
///
/// The loop takes a whole batch at once by swapping arrays under the lock, so taking
/// neither copies nor allocates.
///
/// Safety of `@unchecked Sendable`: the queue is behind its lock and the hint is atomic;
/// `spare` is touched only by the loop (in ``runBatch(after:)``).
public final class LoopTaskQueue: @unchecked Sendable {
    /// What ``LoopTaskQueue/submit(_:wakeNeeded:wake:)`` did.
    public enum Submission: Sendable {
        /// Queued; wake the loop if `wake` (the first submitter since the last batch).
        case queued(wake: Bool)
        /// The loop has stopped: the work was not queued.
        case refused
    }

    private struct State {
        var items: [@Sendable () -> Void] = []
        var wakePending = false
        var stopped = false
    }
    private let state = Mutex(State())
    /// Set with every submission, so the loop skips the lock on turns with nothing
    /// queued (almost every turn under I/O load).
    private let queued = Atomic<Bool>(false)
    /// The array the loop trades with the queue's, so taking a batch neither copies nor
    /// allocates. Loop-confined.
    private var spare: [@Sendable () -> Void] = []

    public init() {}

    /// Queues `work`. `wakeNeeded` false when the loop will look at the queue anyway
    /// (the caller is the loop itself and the loop checks the queue every turn).
    /// `wake`, when given, is called under the lock for the first submission of a batch
    /// (for a wake-up that must not race the loop closing it); otherwise the result says
    /// whether to wake.
    public func submit(_ work: @escaping @Sendable () -> Void, wakeNeeded: Bool = true, wake: (() -> Void)? = nil) -> Submission {
        state.withLock { queue in
            if queue.stopped { return .refused }
            queue.items.append(work)
            // Inside the lock: a pending wake-up always comes with the flag set.
            queued.store(true, ordering: .releasing)
            if queue.wakePending || !wakeNeeded { return .queued(wake: false) }
            queue.wakePending = true
            if let wake {
                wake()
                return .queued(wake: false)
            }
            return .queued(wake: true)
        }
    }

    /// A loop's ``BackendEventLoop/submit(_:)`` in one call: queues `work` and calls
    /// `wakeUp` (outside the lock) when the loop needs waking; true when queued, false
    /// (and `work` is not run) once the loop has stopped.
    ///
    /// ```swift
    /// func submit(_ work: @escaping @Sendable () -> Void) -> Bool {
    ///     tasks.submit(work, wakeNeeded: !inEventLoop) { try? Posix.eventfdSignal(wakeFD) }
    /// }
    /// ```
    @inlinable
    public func submit(_ work: @escaping @Sendable () -> Void, wakeNeeded: Bool, wakingWith wakeUp: () -> Void) -> Bool {
        switch submit(work, wakeNeeded: wakeNeeded) {
        case .refused:
            return false
        case .queued(let wake):
            if wake { wakeUp() }
            return true
        }
    }

    /// Whether anything may be queued (a hint, read without the lock).
    public var mayHaveWork: Bool { queued.load(ordering: .acquiring) }

    /// Runs the queued batch, one item at a time, calling `after` after each (to run the
    /// work it deferred). Call on the loop; an item may call it again (a nested run takes
    /// what was queued since).
    public func runBatch(after: () -> Void) {
        queued.store(false, ordering: .relaxed)
        var batch: [@Sendable () -> Void] = []
        swap(&batch, &spare)
        state.withLock { queue in
            queue.wakePending = false
            swap(&queue.items, &batch)
        }
        for index in batch.indices {
            batch[index]()
            after()
        }
        batch.removeAll(keepingCapacity: true)
        swap(&batch, &spare)
    }

    /// Refuses work from now on (what was queued before still runs with the next batch).
    public func stop() {
        state.withLock { $0.stopped = true }
        queued.store(true, ordering: .relaxed)
    }

    /// Whether ``stop()`` was called.
    public var isStopped: Bool { state.withLock { $0.stopped } }
}
