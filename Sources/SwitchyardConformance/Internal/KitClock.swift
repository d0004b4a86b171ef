import Switchyard
import SwitchyardSimulation
import Synchronization

/// The clock the kit measures and waits by: the system's, except while a pair of the
/// simulation runs. Such a run is on a simulated network of its own, driven by hand
/// (``simulatedNetwork``), and the scenario runs in that network's virtual time: its
/// stall timeouts, keepalives, backoffs and deadlines pass in no wall-clock time, and
/// the times it measures are virtual, held to the same bounds.
///
/// One value for the process, set by the runner for the length of a run (the kit runs
/// one at a time), so that code in a transport's callbacks and in a server's handlers,
/// which runs in no task of the scenario's, reads the same clock.
enum KitClock {
    private static let network = Mutex<SimulatedNetwork?>(nil)

    /// The simulated network of the run in progress, if it is a pair of the simulation.
    static var simulatedNetwork: SimulatedNetwork? { network.withLock { $0 } }

    /// Runs `body` with `simulated` as the run's network (nil: the system's clock).
    static func running<T>(on simulated: SimulatedNetwork?, _ body: () async throws -> T) async rethrows -> T {
        network.withLock { $0 = simulated }
        defer { network.withLock { $0 = nil } }
        return try await body()
    }

    /// The clock now: the run's network's, else the system's.
    static var current: any TransportClock {
        simulatedNetwork?.transportClock ?? SystemTransportClock()
    }

    /// The time now, on the current clock.
    static var now: ContinuousClock.Instant { current.now }

    /// Sleeps `duration` on the current clock.
    static func sleep(for duration: Duration) async throws {
        try await current.sleep(for: duration)
    }

    /// Sleeps until `deadline` on the current clock.
    static func sleep(until deadline: ContinuousClock.Instant) async throws {
        try await current.sleep(until: deadline)
    }

    /// The executor the kit's own unstructured tasks start on: the simulated network's
    /// thread in a run of the simulation (so the network counts them as its own work and
    /// does not move its clock while they run), else none.
    static var taskExecutor: (any TaskExecutor)? { current.taskExecutor }
}

extension TransportClock {
    /// Sleeps `duration` on this clock.
    func sleep(for duration: Duration) async throws {
        try await sleep(until: now + duration)
    }
}
