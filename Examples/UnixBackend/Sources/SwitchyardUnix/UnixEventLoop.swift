import CUnixEpoll
import Glibc
import Switchyard
import SwitchyardBackendKit
import Synchronization

/// Something a loop watches a descriptor for: it gets the ready epoll events, on the loop.
protocol UnixWatcher: AnyObject {
    func handleEvents(_ events: UInt32)
}

/// One epoll loop on its own thread: the toolkit's queues (``LoopTaskQueue`` for work
/// from any thread, ``DeferredWork`` for the end of a turn) around `epoll_wait`.
///
/// Each watch gets a fresh number, carried in the epoll data word; a watch ended
/// forgets its number, so an event already fetched for a descriptor that closed (and
/// whose number may now belong to a new socket) finds no watcher and is dropped, never
/// misrouted. Each loop owns one read buffer and one array of iovecs for its
/// connections, so reading and gathering writes allocate nothing.
///
/// Safety of `@unchecked Sendable`: `watchers`, `nextWatch`, `running` and the buffers
/// are touched only on the loop's thread; the task queue is locked, `threadID` atomic.
final class UnixEventLoop: DescriptorEventLoop, DeferringEventLoop, @unchecked Sendable {
    private let epfd: CInt
    private let wakeFD: CInt
    private static let wakeData: UInt64 = 0
    private let tasks = LoopTaskQueue()
    let deferred = DeferredWork()
    private let threadID = Atomic<UInt>(0)
    private let joined = Atomic<Bool>(false)
    private var thread: LoopThread?
    private var running = true
    private var watchers: [UInt64: any UnixWatcher] = [:]
    private var nextWatch: UInt64 = 0

    /// The buffer connections on this loop read into; valid only on the loop.
    let readBuffer: UnsafeMutableRawBufferPointer
    /// Scratch iovecs for gathered writes; valid only on the loop.
    let writeVectors: UnsafeMutablePointer<iovec>
    static let writeVectorCount = 64

    init(name: String) throws(TransportError) {
        do {
            (epfd, wakeFD) = try epollCreateWithWakeup(wakeData: Self.wakeData)
        } catch {
            throw ErrnoTable.error(error, while: "creating a unix event loop")
        }
        readBuffer = .allocate(byteCount: 64 * 1024, alignment: 16)
        writeVectors = .allocate(capacity: Self.writeVectorCount)
        do {
            thread = try LoopThread(name: name) { [self] in run() }
        } catch {
            releaseResources()
            throw error
        }
    }

    // MARK: TransportEventLoop, BackendEventLoop

    var inEventLoop: Bool { threadID.load(ordering: .acquiring) == currentThreadID() }

    func submit(_ work: @escaping @Sendable () -> Void) -> Bool {
        tasks.submit(work, wakeNeeded: !inEventLoop, wakingWith: { UnixSystem.wake(wakeFD) })
    }

    func stopAndJoin() {
        precondition(!inEventLoop, "stopAndJoin called on the loop's own thread: it would wait for itself (a programming error)")
        guard !joined.exchange(true, ordering: .acquiringAndReleasing), let thread else { return }
        execute { [self] in running = false }
        thread.join()
        watchers.removeAll()
        releaseResources()
    }

    private func releaseResources() {
        UnixSystem.close(wakeFD)
        UnixSystem.close(epfd)
        readBuffer.deallocate()
        writeVectors.deallocate()
    }

    // MARK: watching descriptors (on the loop)

    /// Watches `fd` for `events` on behalf of `watcher`; returns the watch's number.
    func watch(_ fd: CInt, events: UInt32, by watcher: any UnixWatcher) throws(SyscallError) -> UInt64 {
        assertInLoop()
        nextWatch += 1
        try UnixSystem.epollControl(epfd, EPOLL_CTL_ADD, fd, events: events, data: nextWatch)
        watchers[nextWatch] = watcher
        return nextWatch
    }

    /// Changes the events a watch waits for.
    func change(_ fd: CInt, watch: UInt64, events: UInt32) throws(SyscallError) {
        try UnixSystem.epollControl(epfd, EPOLL_CTL_MOD, fd, events: events, data: watch)
    }

    /// Ends a watch. Call before closing `fd`.
    func unwatch(_ fd: CInt, watch: UInt64) {
        assertInLoop()
        watchers[watch] = nil
        try? UnixSystem.epollControl(epfd, EPOLL_CTL_DEL, fd, events: 0, data: 0)
    }

    // MARK: the loop

    private func run() {
        threadID.store(currentThreadID(), ordering: .releasing)
        var ready = EpollReadyEvents(capacity: 256)
        while running {
            let timeout: CInt = tasks.mayHaveWork || !deferred.isEmpty ? 0 : -1
            let count: Int
            do {
                count = try ready.wait(on: epfd, timeoutMilliseconds: timeout)
            } catch {
                // No input reaches this: epoll_wait on the loop's own epoll descriptor
                // fails only with EBADF or EINVAL (that descriptor closed or reused by
                // someone else in the process: a programming error) or EFAULT (a bug
                // here); EINTR is retried. A loop that cannot wait can only spin.
                fatalError("epoll_wait failed on a unix event loop: \(error) (its epoll descriptor was closed or replaced underneath it: a programming error)")
            }
            for index in 0..<count {
                let data = ready[index].data
                if data == Self.wakeData {
                    UnixSystem.drainWakeups(wakeFD)
                } else if let watcher = watchers[data] {
                    watcher.handleEvents(ready[index].events)
                    deferred.run()
                }
            }
            if tasks.mayHaveWork { tasks.runBatch { deferred.run() } }
            deferred.run()
        }
        // Run what is left so no continuation is stranded, then refuse more.
        tasks.runBatch { deferred.run() }
        tasks.stop()
        tasks.runBatch { deferred.run() }
        threadID.store(0, ordering: .releasing)
    }
}
