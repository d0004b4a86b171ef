/// The time, the chance and the executor that the code above a transport runs on: the
/// calls layer reads its clock here for deadlines, keepalive, backoff and idle timers,
/// draws its jitter here, and starts its timer and connect tasks on ``taskExecutor``.
///
/// A real transport's clock is ``SystemTransportClock``: the system's continuous clock,
/// the system's random numbers, the global concurrent executor. A simulated network
/// (SwitchyardSimulation) gives its transports a clock of its own: virtual time that the
/// test drives, numbers from one seed, and the network's thread as executor, so that the
/// code above runs in virtual time, in an order the seed decides, and replays.
///
/// ## Contract
/// - ``now`` never goes back.
/// - ``sleep(until:)`` returns once ``now`` has reached `deadline` (at once if it has),
///   and throws `CancellationError` as soon as the calling task is cancelled.
/// - ``random(in:)`` is uniform over `range`.
/// - Tasks that the code above starts with ``taskExecutor`` as preference
///   (`Task(executorPreference:)`) run where the clock's time moves: nil is the global
///   concurrent executor.
public protocol TransportClock: Sendable {
    /// The time now.
    var now: ContinuousClock.Instant { get }

    /// Waits until ``now`` reaches `deadline`.
    /// - Throws: `CancellationError` when the task is cancelled first.
    func sleep(until deadline: ContinuousClock.Instant) async throws

    /// A number drawn uniformly from `range` (a backoff's or a connection age's jitter).
    func random(in range: ClosedRange<Double>) -> Double

    /// The executor the code above prefers for the tasks it starts (nil: the global
    /// concurrent executor).
    var taskExecutor: (any TaskExecutor)? { get }
}

/// The system's clock: `ContinuousClock`, `Double.random(in:)` and the global concurrent
/// executor. Every transport of a real network has it.
public struct SystemTransportClock: TransportClock {
    public init() {}

    public var now: ContinuousClock.Instant { .now }

    public func sleep(until deadline: ContinuousClock.Instant) async throws {
        try await Task.sleep(until: deadline, clock: .continuous)
    }

    public func random(in range: ClosedRange<Double>) -> Double { .random(in: range) }

    public var taskExecutor: (any TaskExecutor)? { nil }
}

extension Transport {
    /// The transport's clock: the system's unless the transport says otherwise.
    public var clock: any TransportClock { SystemTransportClock() }
}

extension TransportEventLoop {
    /// The loop's clock: the system's unless the loop says otherwise.
    public var clock: any TransportClock { SystemTransportClock() }
}
