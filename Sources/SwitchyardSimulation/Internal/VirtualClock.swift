import DequeModule
import Glibc
import HeapModule
import Switchyard
import SwitchyardBackendKit
import Synchronization

/// The one clock of a simulated network: every loop's work and every timer is an event
/// ordered by (virtual time, sequence number), and time moves only as the driving says.
///
/// - Ready work (an `SimulatedEventLoop/execute(_:)`) is an event at the current time,
///   after those already queued for it; a timer is an event at a later time.
/// - **Manual** driving: one thread runs every loop's events, one at a time, in
///   (time, sequence) order, and nothing runs, ready work included, until the test
///   drives: `drive(to:)` runs every event up to a time (or until none is left) and
///   moves the clock there. Two events never race and, while nothing is driving, the
///   test's steps queue their work in the order they ran, so the same steps and the same
///   seed replay the same log. A shutdown holds the clock open (`holdingOpen(_:)`) so
///   that its own hops to the loops run without moving time.
/// - **Automatic** driving: each loop has a runner thread of its own (code written for
///   real loops may hold one loop while another works, and the conformance kit does), and
///   the clock jumps to the next timer only when every runner is idle: no ready work
///   anywhere and no event running. Time thus passes only while nothing else can happen.
///
/// Everything here is behind one pthread mutex (ThreadSanitizer sees it): the events,
/// the loops' ready queues, the generator and the log. Threads wait on condition
/// variables of that mutex: the manual thread and each runner for work, callers of
/// `stop(_:)` for the loop to stop.
///
/// Safety of `@unchecked Sendable`: every stored `var` (and each loop's `ready` queue) is
/// touched only with `mutex` held; the current loop and the manual thread's identity are
/// atomic; the rest is immutable.
final class VirtualClock: @unchecked Sendable {
    /// Who moves the clock.
    enum Driving: Equatable {
        case manual, automatic
    }

    /// How far a manual drive runs.
    enum Bound {
        /// Every event up to this time, then the clock stands at it.
        case time(Duration)
        /// Every event, however far ahead (a network that never goes quiet keeps going).
        case idle
        /// Every event, however far ahead, until `run` is done (``finish(_:)``), then the
        /// events due at that moment; with no event left and the run not done, the drive
        /// waits for work to arrive.
        case untilDone(Run)
    }

    /// A body run on the network (`SimulatedNetwork.run(_:)`): done once it returned.
    /// Its flag is read and written with the clock's mutex held.
    final class Run: @unchecked Sendable {
        fileprivate var done = false
    }

    struct Event: Comparable {
        let time: Duration
        let sequence: UInt64
        /// The loop the event belongs to.
        let loop: SimulatedEventLoop
        let work: () -> Void

        static func < (a: Event, b: Event) -> Bool {
            a.time == b.time ? a.sequence < b.sequence : a.time < b.time
        }

        static func == (a: Event, b: Event) -> Bool { a.sequence == b.sequence }
    }

    let driving: Driving
    /// Where virtual time zero stands among `ContinuousClock`'s instants: the moment the
    /// clock was made.
    let origin = ContinuousClock.now
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    /// The manual thread waits here for events, a drive or the end.
    private let workArrived = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    /// A caller of `stop(_:)` waits here for the loop's stop to run.
    private let loopStopped = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

    /// Manual: every event. Automatic: the timers (events after now); ready work is in the
    /// loops' own queues.
    private var events = Heap<Event>()
    private var sequence: UInt64 = 0
    private var current: Duration = .zero
    private var generator: SeededGenerator
    private var log: [String]?
    private var stoppedLoops: Set<Int> = []
    /// The sequence numbers of timers cancelled before they ran: dropped, not run, and
    /// the clock does not move to them.
    private var cancelledTimers: Set<UInt64> = []
    /// The sequence numbers of timers still queued (``enqueueTimer(_:on:at:)``), so that a
    /// cancel knows at once whether its timer has run.
    private var pendingTimers: Set<UInt64> = []
    private var nextLoopID = 1
    private var finished = false

    // Manual driving.
    /// How far the drive under way runs, and who waits for it.
    private var bound: Bound?
    private var driveWaiters: [CheckedContinuation<Void, Never>] = []
    /// How many shutdowns hold the clock open for ready work.
    private var holds = 0
    private var thread: LoopThread?
    private let threadID = Atomic<UInt>(0)
    /// The loop whose event the manual thread runs now (0: none).
    private let runningLoop = Atomic<Int>(0)

    // Automatic driving.
    /// Events in the loops' ready queues, and events running now: the clock moves only
    /// when both are zero.
    private var readyCount = 0
    private var runningCount = 0

    init(seed: UInt64, driving: Driving, recordsEvents: Bool) throws(TransportError) {
        self.driving = driving
        generator = SeededGenerator(seed: seed)
        log = recordsEvents ? [] : nil
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(workArrived, nil)
        pthread_cond_init(loopStopped, nil)
        if driving == .manual {
            thread = try LoopThread(name: "sy-sim") { [self] in runManually() }
        }
    }

    /// Stops the threads (joining the manual one unless called on it); events not run are
    /// dropped, and drives under way return.
    func finish() {
        lock()
        finished = true
        let waiters = driveWaiters
        driveWaiters = []
        pthread_cond_broadcast(workArrived)
        pthread_cond_broadcast(loopStopped)
        unlock()
        for waiter in waiters { waiter.resume() }
        if let thread, threadID.load(ordering: .acquiring) != currentThreadID() { thread.join() }
    }

    deinit {
        pthread_cond_destroy(loopStopped)
        pthread_cond_destroy(workArrived)
        pthread_mutex_destroy(mutex)
        loopStopped.deallocate()
        workArrived.deallocate()
        mutex.deallocate()
    }

    // MARK: what loops and the network ask

    /// The virtual time now.
    var now: Duration { locked { current } }

    /// Whether the caller runs inside one of `loop`'s events.
    func isRunning(_ loop: SimulatedEventLoop) -> Bool {
        switch driving {
        case .manual:
            threadID.load(ordering: .acquiring) == currentThreadID() && runningLoop.load(ordering: .relaxed) == loop.id
        case .automatic:
            loop.runnerID.load(ordering: .acquiring) == currentThreadID()
        }
    }

    /// A new loop's identity.
    func makeLoopID() -> Int {
        locked {
            defer { nextLoopID += 1 }
            return nextLoopID
        }
    }

    /// Queues `work` for `loop` at `time` (nil: now, after what is queued for now).
    /// False, and the work is dropped, once the loop has stopped.
    @discardableResult
    func enqueue(_ work: @escaping () -> Void, on loop: SimulatedEventLoop, at time: Duration? = nil) -> Bool {
        locked { enqueueLocked(work, on: loop, at: time) }
    }

    /// `enqueue(_:on:at:)`, mutex held.
    private func enqueueLocked(_ work: @escaping () -> Void, on loop: SimulatedEventLoop, at time: Duration?) -> Bool {
        if finished || stoppedLoops.contains(loop.id) { return false }
        sequence += 1
        let event = Event(time: max(time ?? current, current), sequence: sequence, loop: loop, work: work)
        switch driving {
        case .manual:
            events.insert(event)
            pthread_cond_signal(workArrived)
        case .automatic:
            if event.time <= current {
                makeReady(event)
            } else {
                events.insert(event)
                advanceIfIdle()
            }
        }
        return true
    }

    /// Queues `work` for `loop` at `time`, as `enqueue(_:on:at:)` does, and returns the
    /// timer's number for `cancelTimer(_:)`; nil, and the work is dropped, once the loop
    /// has stopped.
    func enqueueTimer(_ work: @escaping () -> Void, on loop: SimulatedEventLoop, at time: Duration) -> UInt64? {
        locked {
            guard enqueueLocked(work, on: loop, at: time) else { return nil }
            // Queued, unless automatic driving made it ready at once.
            if driving == .manual || time > current { pendingTimers.insert(sequence) }
            return sequence
        }
    }

    /// Drops timer `number` if it has not run: it will not run, and time will not move
    /// to it.
    func cancelTimer(_ number: UInt64) {
        locked {
            guard pendingTimers.remove(number) != nil else { return }
            cancelledTimers.insert(number)
        }
    }

    /// A uniformly random number in `range`, from the seeded generator.
    func random(in range: ClosedRange<Double>) -> Double {
        locked { Double.random(in: range, using: &generator) }
    }

    /// A uniformly random duration in `0...limit`, from the seeded generator.
    func random(upTo limit: Duration) -> Duration {
        let nanoseconds = UInt64(clamping: limit.nanoseconds)
        guard nanoseconds > 0 else { return .zero }
        return locked { .nanoseconds(Int64(UInt64.random(in: 0...nanoseconds, using: &generator))) }
    }

    /// Appends `line` to the event log, stamped with the virtual time.
    func record(_ line: @autoclosure () -> String) {
        locked {
            guard log != nil else { return }
            log!.append("\(Self.format(current)) \(line())")
        }
    }

    /// The event log so far.
    var eventLog: [String] { locked { log ?? [] } }

    /// `time` as seconds with nine decimals, the log's stamp.
    static func format(_ time: Duration) -> String {
        let nanoseconds = time.nanoseconds
        let fraction = String(nanoseconds % 1_000_000_000)
        return "\(nanoseconds / 1_000_000_000).\(String(repeating: "0", count: 9 - fraction.count))\(fraction)"
    }

    // MARK: stopping a loop

    /// Stops `loop` after the work queued for it before this call, and waits for that
    /// unless called inside the loop (or, manually driven, on the network's thread, which
    /// runs it later). Then its timers are dropped and it refuses work. Idempotent.
    func stop(_ loop: SimulatedEventLoop) {
        lock()
        guard !stoppedLoops.contains(loop.id), !finished, !loop.stopQueued else {
            unlock()
            return
        }
        loop.stopQueued = true
        sequence += 1
        let marker = Event(time: current, sequence: sequence, loop: loop, work: { [self] in
            locked {
                stoppedLoops.insert(loop.id)
                // Its timers will never run: drop them now, and what they hold with them.
                // Work queued before now still runs, so no continuation is stranded.
                events = Heap(events.unordered.filter { $0.loop !== loop || $0.time <= current })
                if !pendingTimers.isEmpty { pendingTimers.formIntersection(events.unordered.map(\.sequence)) }
                pthread_cond_broadcast(loopStopped)
            }
        })
        let waits: Bool
        switch driving {
        case .manual:
            events.insert(marker)
            pthread_cond_signal(workArrived)
            waits = threadID.load(ordering: .acquiring) != currentThreadID()
        case .automatic:
            makeReady(marker)
            waits = loop.runnerID.load(ordering: .acquiring) != currentThreadID()
        }
        if waits {
            holds += 1
            while !stoppedLoops.contains(loop.id) && !finished {
                pthread_cond_wait(loopStopped, mutex)
            }
            holds -= 1
        }
        unlock()
        if waits { loop.runner?.join() }
    }

    // MARK: manual driving

    /// Runs events up to `bound` (manual driving) and returns once none is left within it.
    func drive(to bound: Bound) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let done: Bool = locked {
                if finished { return true }
                switch (self.bound, bound) {
                case (nil, _), (_, .untilDone): self.bound = bound
                case (.untilDone, _): break
                case (_, .idle): self.bound = bound
                case (.time(let a), .time(let b)): self.bound = .time(max(a, b))
                case (.idle, .time): break
                }
                driveWaiters.append(continuation)
                pthread_cond_signal(workArrived)
                return false
            }
            if done { continuation.resume() }
        }
    }

    /// Marks `run` done: the drive that waits for it runs what is due now, then ends.
    func finish(_ run: Run) {
        locked {
            run.done = true
            pthread_cond_signal(workArrived)
        }
    }

    /// Runs `body` with the network's ready work running (manual driving), without
    /// moving the clock: for a shutdown, whose hops to the loops must run.
    func holdingOpen(_ body: () async -> Void) async {
        locked {
            holds += 1
            pthread_cond_signal(workArrived)
        }
        await body()
        locked { holds -= 1 }
    }

    /// The manual thread: runs the events the drive allows, in order, one at a time.
    private func runManually() {
        threadID.store(currentThreadID(), ordering: .releasing)
        lock()
        while !finished {
            if let event = takeManualEvent() {
                unlock()
                runningLoop.store(event.loop.id, ordering: .relaxed)
                event.work()
                event.loop.deferred.run()
                runningLoop.store(0, ordering: .relaxed)
                lock()
                continue
            }
            if let bound {
                if case .untilDone(let run) = bound, !run.done {
                    // Nothing left to run and the body still waits: for work from
                    // outside the network (a thread of its own), which wakes this one.
                    pthread_cond_wait(workArrived, mutex)
                    continue
                }
                if case .time(let time) = bound { current = max(current, time) }
                self.bound = nil
                let waiters = driveWaiters
                driveWaiters = []
                unlock()
                for waiter in waiters { waiter.resume() }
                lock()
                continue
            }
            pthread_cond_wait(workArrived, mutex)
        }
        unlock()
    }

    /// The next event the drive (or a hold) lets run, the clock moved to its time; nil
    /// when none may run. Events of a loop that stopped are dropped. Mutex held.
    private func takeManualEvent() -> Event? {
        while let first = events.min {
            if !cancelledTimers.isEmpty, cancelledTimers.remove(first.sequence) != nil {
                takeMinEvent()
                continue
            }
            let runnable =
                switch bound {
                case .idle: true
                // Once the body returned, the work it left due now still runs (a
                // shutdown's hops, say: dropped, they would keep the network alive).
                case .untilDone(let run): !run.done || first.time <= current
                case .time(let limit): first.time <= limit
                case nil: holds > 0 && first.time <= current
                }
            guard runnable else { return nil }
            takeMinEvent()
            if stoppedLoops.contains(first.loop.id) && first.time > current { continue }
            current = max(current, first.time)
            return first
        }
        return nil
    }

    // MARK: automatic driving

    /// Starts `loop`'s runner (automatic driving).
    func startRunner(for loop: SimulatedEventLoop, name: String) throws(TransportError) {
        loop.runner = try LoopThread(name: name) { [self] in runAutomatically(loop) }
    }

    /// A loop's runner: its ready events in order; when every runner is idle, the clock
    /// jumps to the next timer. Ends once the loop stopped and the work it had accepted
    /// before ran (so no continuation is stranded).
    private func runAutomatically(_ loop: SimulatedEventLoop) {
        loop.runnerID.store(currentThreadID(), ordering: .releasing)
        lock()
        while !finished {
            guard let event = loop.ready.popFirst() else {
                if stoppedLoops.contains(loop.id) { break }
                pthread_cond_wait(loop.wake, mutex)
                continue
            }
            readyCount -= 1
            runningCount += 1
            unlock()
            event.work()
            loop.deferred.run()
            lock()
            runningCount -= 1
            advanceIfIdle()
        }
        unlock()
    }

    /// Puts `event` on its loop's ready queue and wakes the runner. Mutex held.
    private func makeReady(_ event: Event) {
        event.loop.ready.append(event)
        readyCount += 1
        pthread_cond_signal(event.loop.wake)
    }

    /// When every runner is idle, moves the clock to the next timer and makes every event
    /// of that time ready. Mutex held.
    private func advanceIfIdle() {
        guard readyCount == 0, runningCount == 0 else { return }
        while readyCount == 0, let first = events.min {
            if !cancelledTimers.isEmpty, cancelledTimers.remove(first.sequence) != nil {
                takeMinEvent()
                continue
            }
            current = max(current, first.time)
            while let next = events.min, next.time <= current {
                takeMinEvent()
                if stoppedLoops.contains(next.loop.id) || (!cancelledTimers.isEmpty && cancelledTimers.remove(next.sequence) != nil) { continue }
                makeReady(next)
            }
        }
    }

    /// Removes the earliest event from the queue (it runs, or is dropped). Mutex held.
    private func takeMinEvent() {
        let event = events.removeMin()
        if !pendingTimers.isEmpty { pendingTimers.remove(event.sequence) }
    }

    private func lock() { pthread_mutex_lock(mutex) }
    private func unlock() { pthread_mutex_unlock(mutex) }

    private func locked<T>(_ body: () -> T) -> T {
        lock()
        defer { unlock() }
        return body()
    }
}

extension Duration {
    /// The whole duration in nanoseconds (saturating).
    var nanoseconds: Int64 {
        let (seconds, attoseconds) = components
        let (whole, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        if overflow { return seconds < 0 ? .min : .max }
        let (total, sumOverflow) = whole.addingReportingOverflow(attoseconds / 1_000_000_000)
        return sumOverflow ? .max : total
    }
}
