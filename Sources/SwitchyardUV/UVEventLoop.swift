import CLibUV
import CSwitchyardEpollGuard
import Switchyard
import SwitchyardBackendKit
import Synchronization

/// One libuv loop (`uv_loop_t`) on its own thread.
///
/// Work from other threads enters through a locked queue and one `uv_async_t` wake-up
/// (sent only by the first submitter of a batch); work queued on the loop itself goes to
/// a local list and needs no lock. Every libuv callback into this module ends with
/// ``drainDeferred()``, which runs the work deferred during the callback
/// (``deferToEndOfTurn(_:)``): completions and handler calls caused by a user's call run
/// after that call returns, never inside it.
///
/// The loop owns one 64 KiB read buffer, which its connections' alloc callbacks hand to
/// libuv: libuv calls alloc, `read(2)`, then the read callback, one connection at a time,
/// and the bytes are delivered borrowed before the next alloc, so one buffer serves the
/// whole loop and a read allocates nothing.
///
/// The loop thread blocks SIGPIPE (libuv writes with `write(2)`, not `MSG_NOSIGNAL`), and a
/// connection whose `uv_write` failed with `UV_EPIPE` takes the SIGPIPE that left pending
/// on the thread (`csy_uv_take_pending_sigpipe`), so none is ever delivered or kept.
///
/// **Reclaimed descriptors.** libuv calls `abort()` when `epoll_ctl` fails in its poll,
/// which a descriptor reclaimed underneath a connection makes it do (`ENOENT`, `EPERM`,
/// `EBADF`). The loop's epoll descriptor is registered with the epoll guard
/// (`CSwitchyardEpollGuard`, the process's own `epoll_ctl`): such a failure is reported
/// to libuv as success, recorded, and the loop woken; ``takeReclaimedDescriptors()`` then
/// ends the connection on that descriptor `reclaimed`. The loop knows its connections by
/// descriptor for that: a table indexed by the descriptor's number (descriptors are the
/// lowest free numbers, so it is as long as the highest one in use), one slot write when a
/// connection opens and one when it ends, no hashing, nothing per message.
///
/// Safety of `@unchecked Sendable`: everything but `tasks` (a mutex), `threadID`
/// (atomic) and the immutable pointers is touched only on the loop's thread, or before
/// the thread starts and after it was joined.
final class UVEventLoop: DeferringEventLoop, @unchecked Sendable {
    let index: Int
    /// The libuv loop; use only on the loop thread.
    let loop: UnsafeMutablePointer<uv_loop_t>
    private let async: UnsafeMutablePointer<uv_async_t>

    private let tasks = LoopTaskQueue()
    private let threadID = Atomic<UInt>(0)
    private var thread: LoopThread?
    private var joined = false

    private var localTasks: [() -> Void] = []
    /// The array `runTasks` runs the loop's own tasks from, swapped with `localTasks`.
    private var localRunning: [() -> Void] = []
    private var localWakePending = false
    private var localStopped = false
    /// Work deferred to the end of the current libuv callback (`deferToEndOfTurn` and
    /// `deferCompletion` are the toolkit's: ``DeferringEventLoop``).
    let deferred = DeferredWork()

    /// What `uv_loop_close` returned when the loop ended (nil while it runs): 0 when
    /// every handle was closed, `UV_EBUSY` when one was left open (a leak).
    private(set) var closeResult: Int32?
    /// Handles still open when the loop was told to stop (closed then, and counted as a
    /// leak in ``closeResult``).
    private(set) var leakedHandles = 0

    /// The buffer every connection on this loop reads into; valid only on the loop.
    let readBuffer: UnsafeMutableRawBufferPointer
    static let readBufferSize = 64 * 1024
    /// The open connections by descriptor (the index), for the epoll guard's and the
    /// paused-read watch's reports. Loop-confined: no runtime exclusivity check.
    @exclusivity(unchecked) private var connectionsByDescriptor: [UVConnection?] = []
    /// The epoll guard's slot for libuv's epoll descriptor (-1: not guarded).
    private let guardSlot: CInt
    /// Whether the epoll guard protects this loop: registered, and the `epoll_ctl` libuv
    /// binds to is the guard's. Not when SwitchyardUV lives in a library loaded at run
    /// time (libuv's call was bound to libc's first); its connections then check their
    /// descriptor before each change of what libuv watches (see ``UVConnection``).
    let epollGuarded: Bool

    /// Reports the errors of connections that nobody reads (see ``PausedReadWatch``); nil
    /// only until the initializer made it, and after the loop's last task closed it.
    private(set) var pausedReadWatch: PausedReadWatch?

    /// Scratch buffers for gathered writes (libuv copies them into its request).
    let writeBuffers: UnsafeMutablePointer<uv_buf_t>
    static let writeBufferCount = 64

    /// Creates the loop and starts its thread.
    init(index: Int, name: String) throws(TransportError) {
        self.index = index
        loop = .allocate(capacity: 1)
        async = .allocate(capacity: 1)
        let status = uv_loop_init(loop)
        if status != 0 {
            loop.deallocate()
            async.deallocate()
            throw UVErrorTable.error(status, "creating a libuv loop")
        }
        let asyncStatus = uv_async_init(loop, async, { handle in
            guard let handle, let data = handle.pointee.data else { return }
            Unmanaged<UVEventLoop>.fromOpaque(data).takeUnretainedValue().runTasks()
        })
        if asyncStatus != 0 {
            _ = uv_loop_close(loop)
            loop.deallocate()
            async.deallocate()
            throw UVErrorTable.error(asyncStatus, "creating a libuv loop's wake-up")
        }
        readBuffer = .allocate(byteCount: Self.readBufferSize, alignment: 16)
        writeBuffers = .allocate(capacity: Self.writeBufferCount)
        // Woken from inside libuv's poll, on the loop thread: uv_async_send only marks the
        // wake-up and writes its eventfd, so the poll returns at once.
        guardSlot = csy_epoll_guard_register(uv_backend_fd(loop), { context in
            _ = uv_async_send(context!.assumingMemoryBound(to: uv_async_t.self))
        }, UnsafeMutableRawPointer(async))
        epollGuarded = guardSlot >= 0 && csy_epoll_guard_is_active() == 1
        // Unretained: the loop object outlives its thread (the group joins before release).
        async.pointee.data = Unmanaged.passUnretained(self).toOpaque()
        pausedReadWatch = PausedReadWatch(loop: loop, owner: self)
        try startThread(name: name)
    }

    private func startThread(name: String) throws(TransportError) {
        do {
            thread = try LoopThread(name: name) { [self] in
                _ = csy_uv_block_sigpipe()
                run()
            }
        } catch {
            csy_epoll_guard_unregister(guardSlot)
            pausedReadWatch?.close()
            pausedReadWatch = nil
            uv_close(csy_uv_async_handle(async), nil)
            _ = uv_run(loop, UV_RUN_DEFAULT)
            _ = uv_loop_close(loop)
            release()
            throw error
        }
    }

    var inEventLoop: Bool {
        threadID.load(ordering: .acquiring) == currentThreadID()
    }

    /// Queues `work` to run on the loop (never inline). Returns false, and drops `work`,
    /// when the loop has stopped.
    @discardableResult
    func submit(_ work: @escaping @Sendable () -> Void) -> Bool {
        if inEventLoop {
            if localStopped { return false }
            localTasks.append(work)
            if !localWakePending {
                localWakePending = true
                uv_async_send(async)
            }
            return true
        }
        // The wake-up is sent under the queue's lock, so it can never race the loop
        // closing the async handle (which happens after the queue stopped, under the
        // same lock).
        let async = self.async
        if case .refused = tasks.submit(work, wake: { uv_async_send(async) }) { return false }
        return true
    }

    /// Runs `work` on the loop, or `otherwise` on the caller's thread if the loop has
    /// stopped (so that a continuation or a completion is never stranded).
    func submit(_ work: @escaping @Sendable () -> Void, otherwise: () -> Void) {
        if !submit(work) { otherwise() }
    }

    /// Runs the deferred work, including work deferred while it runs. Every libuv
    /// callback into this module calls it last.
    @inline(__always)
    func drainDeferred() {
        deferred.run()
    }

    private func runTasks() {
        takeReclaimedDescriptors()
        tasks.runBatch { deferred.run() }
        localWakePending = false
        if !localTasks.isEmpty {
            // Work queued by these tasks on the loop runs on the next wake-up, so a task
            // that requeues itself cannot starve I/O.
            swap(&localTasks, &localRunning)
            for index in localRunning.indices {
                localRunning[index]()
                drainDeferred()
            }
            localRunning.removeAll(keepingCapacity: true)
        }
    }

    private func run() {
        threadID.store(currentThreadID(), ordering: .releasing)
        _ = uv_run(loop, UV_RUN_DEFAULT)
        csy_epoll_guard_unregister(guardSlot)
        let result = uv_loop_close(loop)
        closeResult = leakedHandles > 0 ? UV_EBUSY.rawValue : result
        threadID.store(0, ordering: .releasing)
    }

    // MARK: reclaimed descriptors

    /// Tracks an open connection by its descriptor. Call on the loop.
    func track(_ connection: UVConnection, descriptor: CInt) {
        guard descriptor >= 0 else { return }
        let index = Int(descriptor)
        if index >= connectionsByDescriptor.count {
            connectionsByDescriptor.append(contentsOf: repeatElement(nil, count: index + 1 - connectionsByDescriptor.count))
        }
        connectionsByDescriptor[index] = connection
    }

    /// The open connection on `descriptor`, if any. Call on the loop.
    private func connection(on descriptor: CInt) -> UVConnection? {
        let index = Int(descriptor)
        return index >= 0 && index < connectionsByDescriptor.count ? connectionsByDescriptor[index] : nil
    }

    /// Stops tracking `connection` (it ended). Call on the loop.
    func untrack(_ connection: UVConnection, descriptor: CInt) {
        if self.connection(on: descriptor) === connection { connectionsByDescriptor[Int(descriptor)] = nil }
    }

    /// Ends the connections whose descriptor the epoll guard reported (libuv's
    /// `epoll_ctl` failed on it); when the guard lost reports, checks every connection.
    /// A descriptor that is not a connection's (a connect in progress, a listener) is
    /// left to its owner's own end (its timeout, its close). Runs on every wake-up: with
    /// nothing recorded it is one call that reads one counter.
    private func takeReclaimedDescriptors() {
        guard guardSlot >= 0 else { return }
        let capacity = 16
        let ended = withUnsafeTemporaryAllocation(of: CInt.self, capacity: 2 * capacity) { buffer in
            let fds = buffer.baseAddress!
            let errnos = fds + capacity
            var ended = false
            while true {
                let taken = Int(csy_epoll_guard_take(guardSlot, fds, errnos, CInt(capacity)))
                if taken < 0 {
                    for connection in connectionsByDescriptor.compactMap({ $0 }) { connection.checkDescriptor() }
                    ended = true
                    continue
                }
                for index in 0..<taken {
                    connection(on: fds[index])?.watchFailed(errno: errnos[index])
                }
                ended = ended || taken > 0
                if taken < capacity { return ended }
            }
        }
        if ended { drainDeferred() }
    }

    // MARK: connections nobody reads

    /// libuv found the paused-read watch's epoll instance ready (or, with `status` < 0,
    /// failed on it): each connection whose watch reported reacts
    /// (``UVConnection/pausedReadWatchFired(token:)``); a report for a descriptor no
    /// connection holds, or holds under another watch, is a socket that outlived its
    /// connection, and is ignored. Runs in libuv's callback.
    func pausedReadWatchReady(status: CInt) {
        guard let watch = pausedReadWatch else { return }
        if status < 0 {
            // libuv stopped the handle; connections go without from now on.
            watch.fail()
            return
        }
        watch.takeReady { descriptor, token in
            connection(on: descriptor)?.pausedReadWatchFired(token: token)
        }
        drainDeferred()
    }

    /// The handles open on this loop that are not closing (`uv_walk`), the loop's own
    /// wake-up handle (and the paused-read watch's, ``PausedReadWatch``) included. Call on
    /// the loop.
    func openHandleCount() -> Int {
        var count = 0
        uv_walk(loop, { handle, argument in
            guard let handle, uv_is_closing(handle) == 0 else { return }
            argument!.assumingMemoryBound(to: Int.self).pointee += 1
        }, &count)
        return count
    }

    /// Runs on the loop as its last task: no more work is taken, what was queued runs,
    /// the wake-up handle closes, and any handle still open is closed and counted as a
    /// leak. `uv_run` then returns, since nothing is left active.
    private func beginStop() {
        tasks.stop()
        runTasks()
        localStopped = true
        runTasks()
        pausedReadWatch?.close()
        pausedReadWatch = nil
        uv_close(csy_uv_async_handle(async), nil)
        var leaked = 0
        uv_walk(loop, { handle, argument in
            guard let handle, uv_is_closing(handle) == 0 else { return }
            argument!.assumingMemoryBound(to: Int.self).pointee += 1
            uv_close(handle, nil)
        }, &leaked)
        leakedHandles = leaked
    }

    /// Stops the loop after the work queued before this call, waits for its thread, and
    /// frees the loop. Call from outside the loop. Idempotent.
    func stopAndJoin() {
        precondition(!inEventLoop, "stopAndJoin called on the loop's own thread: it would wait for itself (a programming error)")
        guard let thread, !joined else { return }
        joined = true
        if !submit({ [self] in beginStop() }) {
            // Already stopping: the thread ends by itself.
        }
        thread.join()
        release()
    }

    private func release() {
        readBuffer.deallocate()
        writeBuffers.deallocate()
        async.deallocate()
        loop.deallocate()
    }
}

/// The libuv backend's loops.
typealias UVEventLoopGroup = TransportEventLoopGroup<UVEventLoop>

extension TransportEventLoopGroup where Loop == UVEventLoop {
    /// Starts `count` libuv loops (default: one per core), threads named `name-N`.
    convenience init(count: Int?, name: String) throws(TransportError) {
        try self.init(count: count ?? Int(uv_available_parallelism())) { index throws(TransportError) in
            try UVEventLoop(index: index, name: "\(name)-\(index)")
        }
    }

    /// What `uv_loop_close` gave for each loop, once stopped (nil before).
    var closeResults: [Int32]? {
        let results = loops.map(\.closeResult)
        if results.contains(where: { $0 == nil }) { return nil }
        return results.map { $0! }
    }
}
