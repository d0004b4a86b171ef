import Glibc
import CSwitchyardPosix
import HeapModule
import Switchyard
import SwitchyardBackendKit
import Synchronization
import SwitchyardPosix

/// Something registered with a loop's epoll instance: it gets the ready events.
protocol Selectable: AnyObject {
    /// Called on the loop with the epoll event bits.
    func handleEvents(_ events: UInt32)
}

/// A handle to a timer scheduled on a loop; cancel it on the loop.
final class LoopTimer {
    fileprivate var cancelled = false
    fileprivate let work: () -> Void
    fileprivate init(work: @escaping () -> Void) { self.work = work }
    /// Cancels the timer. Call on its loop.
    func cancel() { cancelled = true }
}

/// One epoll event loop on its own thread.
///
/// Registered objects are kept in a table indexed by descriptor; the epoll data word
/// carries the descriptor and a generation, so an event that was already fetched for a
/// descriptor closed (and perhaps reused) in the same batch is dropped, not misrouted.
/// Work from other threads enters through a locked queue and an eventfd wake-up; work
/// queued on the loop itself needs no wake-up. Each loop owns one read buffer that its
/// connections read into, so reading allocates nothing.
///
/// Safety of `@unchecked Sendable`: everything but `tasks`, `threadID` and `state` is
/// touched only on the loop's thread (checked in debug builds by `assertInLoop`).
final class EpollEventLoop: DescriptorEventLoop, DeferringEventLoop, @unchecked Sendable {
    let index: Int
    private let epfd: CInt
    private let wakeFD: CInt
    private static let wakeToken: UInt64 = .max

    private let tasks = LoopTaskQueue()
    private let threadID = Atomic<UInt>(0)
    private var thread: LoopThread?

    private struct Slot {
        var object: (any Selectable)?
        var generation: UInt32 = 0
    }
    private var slots: [Slot] = []
    private var running = true
    private var timers = Heap<TimerEntry>()
    private var timerSequence: UInt64 = 0
    /// Work deferred to the end of the current turn (not inline in a user's call):
    /// `deferToEndOfTurn` and `deferCompletion` are the toolkit's (``DeferringEventLoop``).
    let deferred = DeferredWork()

    /// The buffer every connection on this loop reads into; valid only on the loop.
    let readBuffer: UnsafeMutableRawBufferPointer
    static let readBufferSize = 64 * 1024
    /// Scratch iovecs for gathered writes; valid only on the loop.
    let writeVectors: UnsafeMutablePointer<iovec>
    static let writeVectorCount = 64

    private struct TimerEntry: Comparable {
        let deadline: ContinuousClock.Instant
        let sequence: UInt64
        let timer: LoopTimer
        static func < (a: TimerEntry, b: TimerEntry) -> Bool {
            a.deadline == b.deadline ? a.sequence < b.sequence : a.deadline < b.deadline
        }
        static func == (a: TimerEntry, b: TimerEntry) -> Bool { a.sequence == b.sequence }
    }

    /// Creates the loop and starts its thread.
    init(index: Int, name: String) throws(TransportError) {
        self.index = index
        do {
            (epfd, wakeFD) = try epollCreateWithWakeup(wakeData: Self.wakeToken)
        } catch {
            throw ErrnoTable.error(error, while: "creating an event loop")
        }
        readBuffer = .allocate(byteCount: Self.readBufferSize, alignment: 16)
        writeVectors = .allocate(capacity: Self.writeVectorCount)
        thread = try LoopThread(name: name) { [self] in run() }
    }

    var inEventLoop: Bool {
        threadID.load(ordering: .acquiring) == currentThreadID()
    }

    /// Queues `work` for the loop from another thread; false (and `work` is not run) once
    /// the loop has stopped, so the caller can finish the work another way.
    func submit(_ work: @escaping @Sendable () -> Void) -> Bool {
        // One queue for work from the loop itself and from other threads, so work runs
        // in the order it was queued; the loop needs no wake-up for its own work.
        tasks.submit(work, wakeNeeded: !inEventLoop, wakingWith: { try? Posix.eventfdSignal(wakeFD) })
    }

    /// Runs `work` on the loop after `delay`. Call on the loop.
    @discardableResult
    func schedule(after delay: Duration, _ work: @escaping () -> Void) -> LoopTimer {
        assertInLoop()
        let timer = LoopTimer(work: work)
        timerSequence += 1
        timers.insert(TimerEntry(deadline: .now + delay, sequence: timerSequence, timer: timer))
        return timer
    }

    // MARK: registration

    /// Registers `object` for `fd` with `events`. Call on the loop.
    func register(_ fd: CInt, events: UInt32, object: any Selectable) throws(SyscallError) {
        assertInLoop()
        let index = Int(fd)
        if index >= slots.count { slots.append(contentsOf: repeatElement(Slot(), count: index + 1 - slots.count + 64)) }
        slots[index].generation &+= 1
        slots[index].object = object
        do throws(SyscallError) {
            try Posix.epollControl(epfd, EPOLL_CTL_ADD, fd, events: events, data: token(fd))
        } catch {
            slots[index].object = nil
            throw error
        }
    }

    /// Changes the events `fd` is watched for. Call on the loop.
    func reregister(_ fd: CInt, events: UInt32) throws(SyscallError) {
        try Posix.epollControl(epfd, EPOLL_CTL_MOD, fd, events: events, data: token(fd))
    }

    /// Stops watching `fd`. Call on the loop, before closing `fd`.
    func deregister(_ fd: CInt) {
        assertInLoop()
        let index = Int(fd)
        guard index < slots.count, slots[index].object != nil else { return }
        slots[index].object = nil
        slots[index].generation &+= 1
        try? Posix.epollControl(epfd, EPOLL_CTL_DEL, fd, events: 0, data: 0)
    }

    private func token(_ fd: CInt) -> UInt64 {
        UInt64(slots[Int(fd)].generation) << 32 | UInt64(UInt32(bitPattern: fd))
    }

    // MARK: the loop

    private func run() {
        threadID.store(UInt(pthread_self()), ordering: .releasing)
        let capacity: CInt = 256
        let events = UnsafeMutablePointer<epoll_event>.allocate(capacity: Int(capacity))
        defer { events.deallocate() }
        while running {
            let timeout = nextTimeout()
            let count: Int
            do {
                count = try Posix.epollWait(epfd, events, capacity: capacity, timeoutMilliseconds: timeout)
            } catch {
                // No input reaches this: epoll_wait on the loop's own epoll descriptor
                // fails only with EBADF or EINVAL (someone else in the process closed or
                // reused that descriptor: a programming error) or EFAULT (a bug here);
                // EINTR never comes here: Posix.epollWait returns no events for it, and the
                // loop goes round with its timeout computed again. A loop that cannot wait
                // can only spin.
                fatalError("epoll_wait failed on loop \(index): \(error) (the loop's epoll descriptor was closed or replaced underneath it: a programming error)")
            }
            for i in 0..<count {
                let event = events[i]
                let data = event.data.u64
                if data == Self.wakeToken {
                    try? Posix.eventfdDrain(wakeFD)
                    continue
                }
                let fd = Int(UInt32(truncatingIfNeeded: data))
                let generation = UInt32(truncatingIfNeeded: data >> 32)
                guard fd < slots.count, slots[fd].generation == generation, let object = slots[fd].object else { continue }
                object.handleEvents(event.events)
                deferred.run()
            }
            runTimers()
            runTasks()
        }
        // Drain what is left so no continuation is stranded, then release the loop.
        runTasks()
        tasks.stop()
        runTasks()
        // Timers that will never fire: a cancelled one stays in the heap until its
        // deadline, and its work holds what scheduled it (a connector, which holds this
        // loop): kept, they made a cycle that leaked the whole loop group of a transport
        // shut down with a connect pending (found by AddressSanitizer's leak check).
        timers = Heap()
        threadID.store(0, ordering: .releasing)
    }

    private func nextTimeout() -> CInt {
        if !deferred.isEmpty { return 0 }
        if tasks.mayHaveWork { return 0 }
        while let first = timers.min, first.timer.cancelled { _ = timers.popMin() }
        guard let first = timers.min else { return -1 }
        let remaining = ContinuousClock.now.duration(to: first.deadline)
        if remaining <= .zero { return 0 }
        let (seconds, attoseconds) = remaining.components
        // Capped before the multiplication: a timer may be set centuries ahead (a connect
        // timeout of `.seconds(Int64.max)` means "never"), and seconds * 1000 would overflow.
        if seconds >= 60 { return 60_000 }
        let milliseconds = seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000
        return CInt(min(milliseconds, 60_000))
    }

    private func runTimers() {
        guard !timers.isEmpty else { return }
        let now = ContinuousClock.now
        while let first = timers.min, first.deadline <= now {
            _ = timers.popMin()
            if !first.timer.cancelled {
                first.timer.cancelled = true
                first.timer.work()
                deferred.run()
            }
        }
    }

    private func runTasks() {
        if !tasks.mayHaveWork { return }
        tasks.runBatch { deferred.run() }
    }

    // MARK: stopping

    /// Stops the loop after the work queued before this call, and waits for its thread.
    /// Call from outside the loop. Idempotent.
    func stopAndJoin() {
        precondition(!inEventLoop, "stopAndJoin called on the loop's own thread: it would wait for itself (a programming error)")
        guard let thread else { return }
        self.thread = nil
        execute { [self] in running = false }
        thread.join()
        slots.removeAll()
        try? Posix.close(wakeFD)
        try? Posix.close(epfd)
        readBuffer.deallocate()
        writeVectors.deallocate()
    }
}

/// The bsd backend's loops.
typealias EpollEventLoopGroup = TransportEventLoopGroup<EpollEventLoop>

extension TransportEventLoopGroup where Loop == EpollEventLoop {
    /// Starts `count` epoll loops (default: one per core), threads named `name-N`.
    convenience init(count: Int?, name: String) throws(TransportError) {
        try self.init(count: count ?? Posix.onlineCores()) { index throws(TransportError) in
            try EpollEventLoop(index: index, name: "\(name)-\(index)")
        }
    }
}
