import Switchyard

/// One timer of an HTTP/2 connection, on the connection's loop: armed for an instant, it
/// runs its action there at that instant, unless it was armed again or cancelled first.
///
/// `TransportEventLoop` has no timers of its own, so an armed timer is a task that sleeps
/// on the loop's clock (`TransportClock`: virtual time on a simulated network) with the
/// loop as its executor (it wakes on the loop, with no hop through the global pool). A
/// timer costs nothing while unarmed, and one task per arming: keepalive and a server's
/// connection limits arm it once per period, never per message.
///
/// Safety of `@unchecked Sendable`: ``arm(at:)`` and ``cancel()`` are called on the
/// loop, and the task reads the state only on the loop.
final class ConnectionTimer: @unchecked Sendable {
    private let loop: any TransportEventLoop
    private let action: () -> Void
    private var task: Task<Void, Never>?
    /// Counts armings: a task that wakes for an older one does nothing.
    private var generation: UInt64 = 0

    /// A timer that runs `action` on `loop` when it fires.
    init(on loop: any TransportEventLoop, action: @escaping () -> Void) {
        self.loop = loop
        self.action = action
    }

    /// Fires at `instant` (at once, on the loop's next turn, if it has passed), instead
    /// of any earlier arming. On the loop.
    func arm(at instant: ContinuousClock.Instant) {
        task?.cancel()
        generation &+= 1
        let armed = generation
        task = Task(executorPreference: loop) {
            do {
                try await self.loop.clock.sleep(until: instant)
            } catch {
                return
            }
            // The task's executor is the loop; the check costs nothing if it runs there.
            if self.loop.inEventLoop {
                self.fire(armed)
            } else {
                self.loop.execute { self.fire(armed) }
            }
        }
    }

    /// Disarms the timer. On the loop.
    func cancel() {
        task?.cancel()
        task = nil
        generation &+= 1
    }

    private func fire(_ armed: UInt64) {
        guard armed == generation else { return }
        task = nil
        action()
    }
}
