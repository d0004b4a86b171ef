import Glibc
public import Switchyard
import SwitchyardBackendKit
import Synchronization

/// A simulated network: hosts joined by links with latency, on a virtual clock that
/// the test drives, with every random choice drawn from one seed.
///
/// Make ``SimulationTransport``s on it (one per host, or as many as a test likes); their
/// connections reach each other through this network only. Bytes travel as segments
/// over ``SimulatedLink``s, whose latency and jitter are virtual time; faults
/// (``SimulatedFault``) apply at a virtual time.
///
/// ```swift
/// let network = try SimulatedNetwork(seed: 42)
/// network.setLink(between: "10.0.0.1", and: "10.0.0.2", SimulatedLink(latency: .milliseconds(5)))
/// let server = try SimulationTransport(network: network, host: "10.0.0.2")
/// let client = try SimulationTransport(network: network, host: "10.0.0.1")
/// // listen, connect, write ...
/// await network.advance(by: .milliseconds(5))   // the bytes arrive now, not before
/// ```
///
/// ## Driving the clock
///
/// - ``SimulatedNetwork/Driving/manual`` (the default): nothing runs until the test drives:
///   `advance(by:)`, `run(until:)` and `runUntilIdle()` run the events due in
///   order, each at its virtual time. A run then depends only on the test's steps and
///   the seed, so the same seed replays the same `eventLog` byte for byte.
/// - ``SimulatedNetwork/Driving/automatic``: the network runs by itself, and its clock jumps to the next
///   event whenever nothing else is due: for code that only uses a `Transport` (the
///   conformance kit runs the `simulation` backend so, on `shared`). Timing then
///   depends on the threads of the code under test; the seed still decides every random
///   choice.
///
/// ## Replaying a seed
///
/// Print `seed` when a test fails (`description` includes it), then make the
/// network with that seed: the same steps give the same `eventLog`.
///
/// Driven by hand, one thread runs all of a network's loops, so nothing in it races;
/// driving itself, each loop has a thread of its own. They stop when the network and
/// its transports are released.
public final class SimulatedNetwork: Sendable, CustomStringConvertible {
    /// Who moves a network's clock.
    public struct Driving: Sendable, Hashable, CustomStringConvertible {
        let mode: VirtualClock.Driving

        /// The test moves the clock: ``SimulatedNetwork/advance(by:)``,
        /// ``SimulatedNetwork/run(until:)``, ``SimulatedNetwork/runUntilIdle()``.
        public static let manual = Driving(mode: .manual)
        /// The network runs by itself and jumps its clock to the next event whenever
        /// nothing else is due.
        public static let automatic = Driving(mode: .automatic)

        public var description: String { mode == .manual ? "manual" : "automatic" }
    }

    /// The seed every random choice is drawn from.
    public let seed: UInt64
    /// Who moves the clock.
    public let driving: Driving

    let clock: VirtualClock
    let state: Mutex<SimulatedNetworkState>
    /// The loop the network's own events (faults) run on.
    let controlLoop: SimulatedEventLoop

    /// A network whose random choices come from `seed`, driven as `driving` says, where
    /// a pair of hosts without a link of its own (`setLink(between:and:_:)`) is joined
    /// by `link`. With `recordsEvents` false, `eventLog` stays empty (for a network
    /// that runs for long, as `shared` does).
    /// - Throws: a `TransportError` if the network's thread cannot start.
    public init(
        seed: UInt64 = .random(in: .min ... .max), driving: Driving = .manual, link: SimulatedLink = SimulatedLink(),
        recordsEvents: Bool = true
    ) throws(TransportError) {
        self.seed = seed
        self.driving = driving
        clock = try VirtualClock(seed: seed, driving: driving.mode, recordsEvents: recordsEvents)
        state = Mutex(SimulatedNetworkState(defaultLink: link))
        do {
            controlLoop = try SimulatedEventLoop(clock: clock, name: "sy-sim-net")
        } catch {
            clock.finish()
            throw error
        }
    }

    deinit {
        controlLoop.stopAndJoin()
        clock.finish()
    }

    /// The environment variable that seeds `shared` (a decimal `UInt64`); without it
    /// the seed is random.
    public static let seedVariable = "SWITCHYARD_SIMULATION_SEED"

    /// The network of the `simulation` backend in a `BackendRegistry`: automatic,
    /// process-wide (so the transports a registry makes reach each other), seeded from
    /// `seedVariable`, without an event log.
    /// - Throws: a `TransportError` if its thread could not start.
    public static var shared: SimulatedNetwork {
        get throws(TransportError) { try sharedNetwork.get() }
    }

    private static let sharedNetwork = Result { () throws(TransportError) -> SimulatedNetwork in
        try SimulatedNetwork(seed: sharedSeed, driving: .automatic, recordsEvents: false)
    }

    /// The seed of ``shared``: ``seedVariable``'s value, else random; chosen once per
    /// process, before the network is made (the backend's summary shows it).
    static let sharedSeed: UInt64 = getenv(seedVariable).flatMap { UInt64(String(cString: $0)) } ?? .random(in: .min ... .max)

    public var description: String { "simulated network (seed \(seed), \(driving), at \(VirtualClock.format(now)) s)" }

    /// The virtual time since the network was made.
    public var now: Duration { clock.now }

    /// The clock its transports and their loops hand to the code above them (channels,
    /// call servers, TLS: `TransportClock`).
    ///
    /// - Driven by hand, the network's own: that code reads the virtual time, sleeps in
    ///   it (a deadline, a keepalive, a backoff passes as the clock moves), draws its
    ///   jitter from the seed, and starts its tasks on the network's thread, so a run
    ///   (``run(_:)``) replays from its seed.
    /// - Driving itself, the system's: code outside the network (the conformance kit's
    ///   raw peers and its stopwatch) runs in real time beside it, and a clock that jumps
    ///   whenever the network is idle would pass its deadlines early.
    public var transportClock: any TransportClock { controlLoop.clock }

    /// What happened, one line per event, each stamped with its virtual time in
    /// seconds: connects and listens, every segment delivered or dropped, and faults.
    /// The same seed and the same steps give the same lines (manual driving), up to a
    /// transport's shutdown, which ends its connections in no set order.
    public var eventLog: [String] { clock.eventLog }

    // MARK: links

    /// Sets the link between hosts `a` and `b` (IP addresses), both ways.
    public func setLink(between a: String, and b: String, _ link: SimulatedLink) {
        let key = SimulatedNetworkState.linkKey(Self.canonical(a), Self.canonical(b))
        state.withLock { $0.links[key] = link }
    }

    /// The link between hosts `a` and `b`: its own, or the network's default.
    public func link(between a: String, and b: String) -> SimulatedLink {
        let key = SimulatedNetworkState.linkKey(Self.canonical(a), Self.canonical(b))
        return state.withLock { $0.links[key] ?? $0.defaultLink }
    }

    /// `host` as the network's tables key it (canonical IP literal), or as given.
    static func canonical(_ host: String) -> String {
        (try? InProcessHost.resolve(host, backend: SimulationTransport.backendName))?.first ?? host
    }

    // MARK: driving

    /// Moves the clock `duration` forward, running every event due meanwhile at its
    /// virtual time (the work that events queue included), and returns once the clock
    /// stands at the new time with nothing due. Manual driving only.
    public func advance(by duration: Duration) async {
        precondition(driving == .manual, "advance(by:) drives a manual network; \(self) drives itself (a programming error)")
        await clock.drive(to: .time(clock.now + max(duration, .zero)))
    }

    /// Moves the clock to `time` (since the network was made) as `advance(by:)` does;
    /// a time already passed runs what is due now. Manual driving only.
    public func run(until time: Duration) async {
        precondition(driving == .manual, "run(until:) drives a manual network; \(self) drives itself (a programming error)")
        await clock.drive(to: .time(max(time, clock.now)))
    }

    /// Runs `body` on the network's own loop and drives the clock until it returns:
    /// every event in order, the clock moving to the next one whenever nothing is due now;
    /// then runs the work `body` left due at that moment (without moving the clock) and
    /// returns what `body` returned (or throws what it threw).
    ///
    /// The way to run code that awaits (a `CallChannel`'s calls, a `CallServer`, a
    /// `Lifecycle`) in virtual time: `body`'s task and the tasks it starts as children,
    /// the transports' loops, and the tasks the code above them starts on their
    /// `TransportClock` all run on the network's one thread, so a manually driven network
    /// replays the same run, event log and all, from the same seed. A task of the body's
    /// own that it starts unstructured (`Task {}`) runs elsewhere and breaks that; start it
    /// with `Task(executorPreference: transport.clock.taskExecutor)`. A network that drives
    /// itself just runs `body` on its loop.
    ///
    /// The clock jumps ahead while `body` waits for nothing but time, so a body that waits
    /// on a keepalive or a deadline returns at once in wall-clock time. One that waits for
    /// something that never comes runs the timers left (a channel's 30-minute idle
    /// timeout, say), then waits for ever, as it would on a real network.
    public func run<Result: Sendable>(_ body: @escaping @Sendable () async throws -> Result) async throws -> Result {
        let task: Task<Result, any Error>
        guard driving == .manual else {
            task = Task(executorPreference: controlLoop) { try await body() }
            return try await task.value
        }
        let run = VirtualClock.Run()
        task = Task(executorPreference: controlLoop) { [clock] in
            defer { clock.finish(run) }
            return try await body()
        }
        await clock.drive(to: .untilDone(run))
        return try await task.value
    }

    /// Runs every event, moving the clock to each in turn, until none is left (the clock
    /// then stands at the last one). Manual driving only.
    public func runUntilIdle() async {
        precondition(driving == .manual, "runUntilIdle() drives a manual network; \(self) drives itself (a programming error)")
        await clock.drive(to: .idle)
    }
}

/// A simulated network's tables, behind its lock: listeners and ports, links, the
/// faults in force, and the open connection ends (for faults that end them).
struct SimulatedNetworkState {
    var listeners: [SimulatedBinding: SimulationListener] = [:]
    var ports = InProcessPorts()

    var defaultLink: SimulatedLink
    var links: [String: SimulatedLink] = [:]
    var blackHoles: Set<String> = []
    /// Addresses a `SimulatedConnectivityMonitor`'s path lost: black holes too, until a
    /// path has them again.
    var offPath: Set<String> = []
    var notReading: Set<String> = []
    /// Hosts whose incoming segments are answered with a reset.
    var rejecting: Set<String> = []

    /// Open connection ends by the order they opened in (faults act on them in that
    /// order, so a replay acts in the same one).
    var ends: [Int: SimulatedConnection] = [:]
    var nextEnd = 0

    init(defaultLink: SimulatedLink) {
        self.defaultLink = defaultLink
    }

    static func linkKey(_ a: String, _ b: String) -> String {
        a < b ? "\(a) \(b)" : "\(b) \(a)"
    }

    func link(_ a: String, _ b: String) -> SimulatedLink {
        links[Self.linkKey(a, b)] ?? defaultLink
    }

    func isBlackHoled(_ a: String, _ b: String) -> Bool {
        (!blackHoles.isEmpty && (blackHoles.contains(a) || blackHoles.contains(b)))
            || (!offPath.isEmpty && (offPath.contains(a) || offPath.contains(b)))
    }

    /// The open ends whose local address is on `host`, in the order they opened.
    func ends(on host: String) -> [SimulatedConnection] {
        ends.keys.sorted().compactMap { key in ends[key].flatMap { $0.localAddress.host == host ? $0 : nil } }
    }
}
