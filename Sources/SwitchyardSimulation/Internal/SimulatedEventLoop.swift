import DequeModule
import Glibc
import Switchyard
import SwitchyardBackendKit
import Synchronization

/// A loop of a simulated network: its work and its timers are events of the network's
/// `VirtualClock`, in virtual time: run by the network's one thread when the test
/// drives the clock, or by a runner thread of its own when the network drives itself.
///
/// It keeps the toolkit's loop contract as a thread-backed loop does: `submit(_:)`
/// queues after what is queued and never runs inline, work deferred to the end of a turn
/// runs after each event (`DeferringEventLoop`), `inEventLoop` is true only inside
/// this loop's own events, and once stopped it refuses work. It is a `TaskExecutor`
/// too, so async code with it as executor preference runs in virtual time.
///
/// Safety of `@unchecked Sendable`: `deferred` is touched only inside this loop's events;
/// `ready`, `stopQueued` and `runner` only with the clock's mutex held (`runner` is set
/// once, before the loop is shared); the runner's identity is atomic; the rest is
/// immutable.
final class SimulatedEventLoop: DeferringEventLoop, @unchecked Sendable {
    let id: Int
    let virtualClock: VirtualClock
    /// The loop the sleeps of this loop's tasks wake on: the network's own, which outlives
    /// every transport's loops (nil: this one is the network's).
    private let timerLoop: SimulatedEventLoop?
    let deferred = DeferredWork()

    // The clock's, for automatic driving.
    /// Events due now, in order.
    var ready = Deque<VirtualClock.Event>()
    /// The runner waits here (with the clock's mutex) for ready events.
    let wake = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    var runner: LoopThread?
    let runnerID = Atomic<UInt>(0)
    /// Whether `stopAndJoin()` queued the loop's stop.
    var stopQueued = false

    /// A loop of `clock` whose tasks' sleeps wake on `timerLoop` (nil: on this one);
    /// with automatic driving, its runner starts, named `name`.
    init(clock: VirtualClock, name: String, timerLoop: SimulatedEventLoop? = nil) throws(TransportError) {
        self.virtualClock = clock
        self.timerLoop = timerLoop
        id = clock.makeLoopID()
        pthread_cond_init(wake, nil)
        if clock.driving == .automatic {
            do {
                try clock.startRunner(for: self, name: name)
            } catch {
                pthread_cond_destroy(wake)
                wake.deallocate()
                throw error
            }
        }
    }

    deinit {
        pthread_cond_destroy(wake)
        wake.deallocate()
    }

    var inEventLoop: Bool { virtualClock.isRunning(self) }

    /// Driven by hand, the network's virtual time, with tasks on this loop; driving
    /// itself, the system's (see ``SimulatedNetwork/transportClock``).
    var clock: any TransportClock {
        guard virtualClock.driving == .manual else { return SystemTransportClock() }
        return VirtualTransportClock(clock: virtualClock, timerLoop: timerLoop ?? self, executor: self)
    }

    func submit(_ work: @escaping @Sendable () -> Void) -> Bool {
        virtualClock.enqueue(work, on: self)
    }

    /// Runs `work` on this loop at virtual time `time` (now if that has passed).
    func schedule(at time: Duration, _ work: @escaping () -> Void) {
        virtualClock.enqueue(work, on: self, at: time)
    }

    func stopAndJoin() {
        virtualClock.stop(self)
    }
}
