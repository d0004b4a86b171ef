import Switchyard

/// The clock the kit measures and waits by: the system's, except inside a simulated
/// fault network (`SimulatedFaultNetwork`), where a scenario's body runs in the
/// network's virtual time, so its stall timeouts, keepalives and backoffs pass in no
/// wall-clock time and its figures are virtual times, held to the same bounds.
///
/// A task-local value: the scenario's task and the tasks it starts see it. Code that
/// runs in a transport's callbacks (a handler, a monitor's observer) is in no task:
/// an object that takes times there reads the clock once, when the scenario makes it
/// (`CallRecorder`, `WaitProgress`).
enum KitClock {
    @TaskLocal static var current: any TransportClock = SystemTransportClock()

    /// The time now, on the current clock.
    static var now: ContinuousClock.Instant { current.now }

    /// Sleeps `duration` on the current clock.
    static func sleep(for duration: Duration) async throws {
        let clock = current
        try await clock.sleep(until: clock.now + duration)
    }

    /// Sleeps until `deadline` on the current clock.
    static func sleep(until deadline: ContinuousClock.Instant) async throws {
        try await current.sleep(until: deadline)
    }

    /// The executor the kit's own unstructured tasks start on: the simulated network's
    /// thread inside one (so the network sees them as its own work and does not move its
    /// clock while they run), else none.
    static var taskExecutor: (any TaskExecutor)? { current.taskExecutor }
}
