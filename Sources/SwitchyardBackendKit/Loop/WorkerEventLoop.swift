import Glibc
public import Switchyard
import Synchronization
import SwitchyardPosix

/// An event loop with no I/O of its own: a thread that runs the work handed to it, in
/// order, and the work that work defers to the end of its turn. For a backend whose
/// "I/O" is other loops handing it work (the in-memory backend), or that waits for its
/// events some other way and hands them over with ``execute(_:)``.
///
/// It sleeps in `poll(2)` on one eventfd; the first submitter of a batch wakes it. Like
/// every toolkit loop it is a `TaskExecutor`, owns one read buffer for its connections
/// (valid only on the loop), and once stopped it refuses work (``submit(_:)`` returns
/// false) so that nothing is dropped silently.
///
/// Safety of `@unchecked Sendable`: `deferred` and `running` are touched
/// only on the loop's thread; the task queue is locked, `threadID` atomic, the rest
/// immutable.
public final class WorkerEventLoop: BackendEventLoop, @unchecked Sendable {
    public let index: Int
    private let wakeFD: CInt
    private let tasks = LoopTaskQueue()
    private let deferred = DeferredWork()
    private let threadID = Atomic<UInt>(0)
    private var thread: LoopThread?
    private var running = true
    private let joined = Atomic<Bool>(false)

    /// The buffer connections on this loop read into; valid only on the loop.
    public let readBuffer: UnsafeMutableRawBufferPointer
    public static let readBufferSize = 64 * 1024

    /// Creates the loop and starts its thread, named `name`.
    public init(index: Int, name: String) throws(TransportError) {
        self.index = index
        do {
            wakeFD = try Posix.eventfdCreate()
        } catch {
            throw ErrnoTable.error(error, while: "creating an event loop")
        }
        readBuffer = .allocate(byteCount: Self.readBufferSize, alignment: 16)
        do {
            thread = try LoopThread(name: name) { [self] in run() }
        } catch {
            readBuffer.deallocate()
            try? Posix.close(wakeFD)
            throw error
        }
    }

    public var inEventLoop: Bool { threadID.load(ordering: .acquiring) == currentThreadID() }

    public func submit(_ work: @escaping @Sendable () -> Void) -> Bool {
        tasks.submit(work, wakeNeeded: !inEventLoop, wakingWith: { try? Posix.eventfdSignal(wakeFD) })
    }

    public func deferToEndOfTurn(_ work: @escaping () -> Void) {
        assertInLoop()
        deferred.append(work)
    }

    public func deferCompletion(_ completion: @escaping WriteCompletion, _ result: TransportError?) {
        assertInLoop()
        deferred.append(completion, result)
    }

    private func run() {
        threadID.store(currentThreadID(), ordering: .releasing)
        var descriptor = pollfd(fd: wakeFD, events: Int16(POLLIN), revents: 0)
        while running {
            if !tasks.mayHaveWork && deferred.isEmpty {
                descriptor.revents = 0
                _ = poll(&descriptor, 1, -1)
                try? Posix.eventfdDrain(wakeFD)
            }
            tasks.runBatch { deferred.run() }
            deferred.run()
        }
        // Drain what is left so no continuation is stranded, then refuse more.
        tasks.runBatch { deferred.run() }
        tasks.stop()
        tasks.runBatch { deferred.run() }
        threadID.store(0, ordering: .releasing)
    }

    /// Stops the loop after the work queued before this call and waits for its thread.
    /// Call from outside the loop. Idempotent.
    public func stopAndJoin() {
        precondition(!inEventLoop, "stopAndJoin called on the loop's own thread: it would wait for itself (a programming error)")
        guard !joined.exchange(true, ordering: .acquiringAndReleasing), let thread else { return }
        execute { [self] in running = false }
        thread.join()
        try? Posix.close(wakeFD)
        readBuffer.deallocate()
    }
}

extension TransportEventLoopGroup where Loop == WorkerEventLoop {
    /// Starts `count` worker loops (default: one per core), threads named `name-N`.
    public convenience init(count: Int?, name: String) throws(TransportError) {
        try self.init(count: count ?? Posix.onlineCores()) { index throws(TransportError) in
            try WorkerEventLoop(index: index, name: "\(name)-\(index)")
        }
    }
}
