import DequeModule
public import Logging
import Synchronization

/// Suspend and resume for a process or a server (behaviour 7 of the design): one object
/// that the process owns, and that its listeners, connections and channels are
/// registered with.
///
/// ## Contract
///
/// - **States.** ``LifecycleState/active`` → ``suspend()`` →
///   ``LifecycleState/suspending`` → ``LifecycleState/suspended`` → ``resume()`` →
///   ``LifecycleState/resuming`` → ``LifecycleState/active``. ``observe(_:)`` hears every
///   change, in order.
/// - **Call order and idempotence.** ``suspend()`` and ``resume()`` may be called from
///   any task, any number of times; they run one at a time, in the order they were
///   called. A suspend while suspended (or a resume while active) returns at once and
///   changes nothing. A resume called during a suspend waits for the suspend to finish,
///   then resumes. Cancelling the task that called either does not cut it short (a
///   suspend takes its hooks plus at most the grace period; a resume, its listens and
///   hooks).
/// - **Listeners** made with ``listen(on:using:options:)`` close the moment a suspend
///   begins, so a client that connects while suspended is refused at once (never left
///   hanging in a backlog); ``resume()`` reopens them on the same address and port (the
///   port a `port: 0` listener got the first time). Their ``SuspendableListener/connections``
///   (or ``SuspendableListener/acceptConnections(_:)`` handler) go on across suspensions.
///   A listener that cannot reopen (its port was taken meanwhile, its transport shut
///   down) is closed for good, and ``resume()`` throws its error after resuming the rest.
///   Listening while suspending or suspended throws `unavailable`, reason `suspended`.
/// - **Background work.** ``beginBackgroundWork(_:expiration:)`` returns a token the
///   caller ends with ``BackgroundWork/end()``. A suspend waits for every token that is
///   outstanding (begun before the suspend, or during it) for at most ``gracePeriod``.
///   When the grace period runs out first, the expiration handler of each token still
///   outstanding runs once, in the order the work began, on the suspending task; the
///   tokens count as ended (a later ``BackgroundWork/end()`` does nothing), and the
///   suspend goes on at once without waiting for anything else: the grace period is
///   timed by the clock, never by the network, so a black-holed peer cannot delay it.
///   Work begun once the suspend is past its grace phase, or while suspended, expires at
///   once: its handler runs on a new task. An expiration handler must not block.
/// - **Connections** registered with ``register(_:policy:willSuspend:didResume:)``
///   follow their ``SuspendPolicy``. When a suspend begins, every registered connection's
///   `willSuspend` hook runs (in registration order, each awaited before the next, before
///   the grace period starts; a hook must not wait on the network), while background
///   work may still use the connections. After the grace phase, `.close` connections
///   are closed with ``Connection/close()``, which waits on nothing (queued writes complete with
///   `cancelled`/`closed` and their handlers hear `connectionDidClose(error: nil)`), and
///   their registrations end; `.keep` connections are left open, untouched, and their
///   `didResume` hooks run (in registration order, each awaited) at the end of the next
///   resume. The hooks run on the task that suspends or resumes, not on the connection's
///   loop: to change loop-confined state (or to be sure a `stopReading()` took effect
///   before the suspend goes on), hop to the loop and await the hop.
///   A connection registered while the lifecycle is suspending or suspended gets at once
///   what the others got (its `willSuspend`, on a new task; closed when `.close` and
///   suspended).
/// - **Channels** registered with SwitchyardCalls' `register(_:)` keep making calls while the suspend
///   is in its grace phase (background work may need them). After it, every open call
///   ends with `unavailable`, reason `suspended` (its connection reset), and until the
///   resume ends a new call fails at once with the same error, without connecting.
///   After resume the next call connects afresh.
/// - **Call servers** started with a lifecycle
///   (SwitchyardCalls' `CallServer.start(transport:on:options:configuration:lifecycle:policy:makeHandler:)`) listen on a
///   ``SuspendableListener``; under `.close` their open calls end with `unavailable`,
///   reason `suspended` (the peer sees its connection reset), under `.keep` they go on.
/// - **Registrations** end with ``LifecycleRegistration/cancel()`` (the lifecycle stops
///   acting on the object; a channel cancelled while suspended makes calls again). A
///   registration does not keep a connection or channel alive: one that is gone (a
///   connection that ended and that nothing else holds) is dropped.
/// - **Errors.** ``suspend()`` never throws. ``resume()`` throws only a listener's
///   failure to reopen (the lifecycle is active anyway).
///
/// On Linux, `SwitchyardBackendKit`'s `LifecycleSignals` drives a lifecycle from
/// `SIGTSTP` (suspend) and `SIGCONT` (resume).
///
/// ## Logging
/// Through ``logger``, once per suspend or resume (metadata `switchyard.lifecycle.participants`:
/// how many listeners, connections and channels were registered):
///
/// | level | message | more metadata |
/// | --- | --- | --- |
/// | info | `suspending` | |
/// | notice | `suspended` | `switchyard.lifecycle.expired_work` (background work expired after the grace period), `switchyard.lifecycle.closed` (participants that closed) |
/// | info | `resuming` | |
/// | notice | `resumed` | |
/// | warning | `resumed with a listener that could not reopen` | `switchyard.error` |
public final class Lifecycle: Sendable {
    /// How long a suspend waits for outstanding background work before it expires it.
    public let gracePeriod: Duration
    /// The clock the grace period is timed on.
    public let clock: any TransportClock
    /// Where suspends and resumes are logged (see Logging above); by default nowhere.
    public let logger: Logger

    private struct OutstandingWork {
        let id: UInt64
        let work: BackgroundWork
    }

    private struct State {
        var phase: LifecycleState = .active
        /// Whether new background work is waited for (false from the end of a suspend's
        /// grace phase until the next resume begins).
        var waitsForWork = true
        /// By registration id; ids grow, so sorting them gives registration order. A
        /// dictionary, not an array: registering and cancelling happen per connection
        /// (a server registers every one it accepts) and must not cost O(registered).
        var participants: [UInt64: any LifecycleParticipant] = [:]
        /// When `participants` reaches this size, `add` drops those that are gone
        /// (doubling, so the sweep costs O(1) amortized per registration).
        var sweepAt = 64
        var work: [OutstandingWork] = []
        var observers: [UInt64: Observer] = [:]
        var nextID: UInt64 = 0
        /// The suspend waiting for the last background work to end.
        var drainWaiter: CheckedContinuation<Void, Never>?
        var drainCancelled = false
        /// Whether a suspend or resume is running; the rest wait in `queue`.
        var busy = false
        var queue: Deque<CheckedContinuation<Void, Never>> = []

        mutating func takeID() -> UInt64 {
            nextID += 1
            return nextID
        }

        /// Drops participants that are gone (a connection or channel freed) and returns
        /// them, for the caller to release after the lock (the last reference to a
        /// connection may go with them, and nothing runs under the lock that need not).
        mutating func sweep() -> [any LifecycleParticipant] {
            var gone: [any LifecycleParticipant] = []
            participants = participants.filter { entry in
                guard entry.value.lifecycleIsGone else { return true }
                gone.append(entry.value)
                return false
            }
            sweepAt = max(64, 2 * participants.count)
            return gone
        }

        /// The participants in registration order.
        var ordered: [any LifecycleParticipant] {
            participants.sorted { $0.key < $1.key }.map(\.value)
        }
    }

    /// An observer (a class: see ``AcceptedConnections``' note on closures in a `Mutex`).
    private final class Observer: Sendable {
        let body: @Sendable (LifecycleState) -> Void
        init(_ body: @escaping @Sendable (LifecycleState) -> Void) { self.body = body }
    }

    private let state = Mutex(State())

    /// A lifecycle, active, whose suspends give background work up to `gracePeriod`,
    /// logging its suspends and resumes to `logger` (by default nowhere).
    public convenience init(gracePeriod: Duration = .seconds(5), logger: Logger = TransportConfiguration.disabledLogger) {
        self.init(gracePeriod: gracePeriod, clock: SystemTransportClock(), logger: logger)
    }

    /// A lifecycle, active, whose suspends give background work up to `gracePeriod` of
    /// `clock`'s time, and start their tasks on its executor (a simulated network's
    /// transports give theirs, so that a suspend runs in virtual time and replays),
    /// logging its suspends and resumes to `logger` (by default nowhere).
    public init(gracePeriod: Duration = .seconds(5), clock: any TransportClock, logger: Logger = TransportConfiguration.disabledLogger) {
        precondition(gracePeriod >= .zero, "a Lifecycle's grace period cannot be negative, was given \(gracePeriod) (a programming error)")
        self.gracePeriod = gracePeriod
        self.clock = clock
        self.logger = logger
    }

    /// The state now.
    public var current: LifecycleState { state.withLock { $0.phase } }

    /// Calls `observer` with every state change from now on, in order, on the task that
    /// made the change, until the registration is cancelled.
    public func observe(_ observer: @escaping @Sendable (LifecycleState) -> Void) -> LifecycleRegistration {
        let id = state.withLock { state in
            let id = state.takeID()
            state.observers[id] = Observer(observer)
            return id
        }
        return LifecycleRegistration { [weak self] in
            _ = self?.state.withLock { $0.observers.removeValue(forKey: id) }
        }
    }

    // MARK: - Registering

    /// Listens on `endpoint` with `transport`, on a listener that closes on suspend and
    /// reopens on the same port on resume.
    /// - Throws: what ``Transport/listen(on:options:)`` throws; `unavailable`, reason
    ///   `suspended`, while suspending or suspended.
    public func listen(
        on endpoint: Endpoint, using transport: any Transport, options: ListenOptions = ListenOptions()
    ) async throws -> SuspendableListener {
        try refuseWhileSuspended("cannot listen on \(endpoint)")
        let inner = try await transport.listen(on: endpoint, options: options)
        let listener = SuspendableListener(inner, transport: transport, options: options)
        add(listener)
        return listener
    }

    /// Registers `connection` to follow `policy` on suspend. `willSuspend` runs when a
    /// suspend begins (for both policies), `didResume` when a resume ends (`.keep` only:
    /// a `.close` connection is gone by then). Both run on the task that suspends or
    /// resumes, which awaits them, not on the connection's loop: hop there
    /// (``TransportEventLoop/execute(_:)``) and await the hop to touch loop-confined state.
    @discardableResult
    public func register(
        _ connection: any Connection, policy: SuspendPolicy,
        willSuspend: (@Sendable () async -> Void)? = nil, didResume: (@Sendable () async -> Void)? = nil
    ) -> LifecycleRegistration {
        add(RegisteredConnection(connection, policy: policy, willSuspend: willSuspend, didResume: didResume))
    }

    /// Adds a participant and brings it to the lifecycle's current state.
    @discardableResult
    package func add(_ participant: any LifecycleParticipant) -> LifecycleRegistration {
        let (id, phase, gone) = state.withLock { state in
            let gone = state.participants.count >= state.sweepAt ? state.sweep() : []
            let id = state.takeID()
            state.participants[id] = participant
            return (id, state.phase, gone)
        }
        withExtendedLifetime(gone) {}
        if phase == .suspending || phase == .suspended {
            participant.lifecycleSuspendDidBegin()
            Task(executorPreference: clock.taskExecutor) { await participant.lifecycleWillSuspend() }
        }
        if phase == .suspended, !participant.lifecycleSuspend(Self.suspendedError) {
            remove(id)
        }
        return LifecycleRegistration(participant: id, of: self)
    }

    @discardableResult
    func remove(_ id: UInt64) -> (any LifecycleParticipant)? {
        state.withLock { $0.participants.removeValue(forKey: id) }
    }

    // MARK: - Background work

    /// Begins work that a suspend should let finish; end it with ``BackgroundWork/end()``.
    /// If a suspend's grace period runs out first, `expiration` runs once and the work
    /// counts as ended. See the contract for work begun during or after a suspend.
    public func beginBackgroundWork(
        _ name: String = "background work", expiration: @escaping @Sendable () -> Void = {}
    ) -> BackgroundWork {
        let work = BackgroundWork(name: name, expiration: expiration)
        let waited = state.withLock { state in
            guard state.waitsForWork else { return false }
            let id = state.takeID()
            work.attach(to: self, id: id)
            state.work.append(OutstandingWork(id: id, work: work))
            return true
        }
        if !waited {
            Task(executorPreference: clock.taskExecutor) { work.expire() }
        }
        return work
    }

    /// Background work that ended (called by ``BackgroundWork/end()``).
    func backgroundWorkEnded(_ id: UInt64) {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            state.work.removeAll { $0.id == id }
            guard state.work.isEmpty else { return nil }
            defer { state.drainWaiter = nil }
            return state.drainWaiter
        }
        waiter?.resume()
    }

    /// Background work begun and not yet ended or expired.
    public var outstandingBackgroundWork: Int { state.withLock { $0.work.count } }

    // MARK: - Suspend and resume

    /// The error calls and listens get while suspended.
    static let suspendedError = TransportError(
        code: .unavailable, reason: .suspended, message: "the process is suspended (Lifecycle.suspend())")

    /// Suspends: closes listeners, waits up to ``gracePeriod`` for background work,
    /// expires what is left, closes `.close` connections and ends channels' calls.
    /// Returns once ``current`` is ``LifecycleState/suspended``. See the contract.
    public func suspend() async {
        // Not the caller's task: cancelling it must not cut the grace period short.
        await Task(executorPreference: clock.taskExecutor) { await self.serialized { await self.performSuspend() } }.value
    }

    /// Resumes: reopens listeners on their ports, lets channels call again, and runs the
    /// `.keep` connections' `didResume` hooks. Returns once ``current`` is
    /// ``LifecycleState/active``.
    /// - Throws: the error of the first listener that could not reopen (it is closed;
    ///   the rest resumed).
    public func resume() async throws {
        try await Task(executorPreference: clock.taskExecutor) { try await self.serialized { try await self.performResume() } }.value
    }

    private func performSuspend() async {
        let (participants, gone): ([any LifecycleParticipant]?, [any LifecycleParticipant]) = state.withLock { state in
            guard state.phase == .active else { return (nil, []) }
            state.phase = .suspending
            let gone = state.sweep()
            return (state.ordered, gone)
        }
        withExtendedLifetime(gone) {}
        guard let participants else { return }
        logger.info("suspending", metadata: ["switchyard.lifecycle.participants": "\(participants.count)"])
        notify(.suspending)
        for participant in participants { participant.lifecycleSuspendDidBegin() }
        for participant in participants { await participant.lifecycleWillSuspend() }

        await waitForBackgroundWork()
        let expired = state.withLock { state in
            state.waitsForWork = false
            defer { state.work = [] }
            return state.work.map(\.work)
        }
        for work in expired { work.expire() }

        // Registrations made during the grace phase were brought to `suspending` by `add`.
        let current = state.withLock { $0.participants.sorted { $0.key < $1.key } }
        var ended: [UInt64] = []
        for (id, participant) in current where !participant.lifecycleSuspend(Self.suspendedError) {
            ended.append(id)
        }
        state.withLock { state in
            for id in ended { state.participants.removeValue(forKey: id) }
            state.phase = .suspended
        }
        logger.notice("suspended", metadata: [
            "switchyard.lifecycle.participants": "\(current.count)",
            "switchyard.lifecycle.expired_work": "\(expired.count)",
            "switchyard.lifecycle.closed": "\(ended.count)",
        ])
        notify(.suspended)
    }

    private func performResume() async throws {
        let participants: [any LifecycleParticipant]? = state.withLock { state in
            guard state.phase == .suspended else { return nil }
            state.phase = .resuming
            state.waitsForWork = true
            return state.ordered
        }
        guard let participants else { return }
        logger.info("resuming", metadata: ["switchyard.lifecycle.participants": "\(participants.count)"])
        notify(.resuming)
        var failure: (any Error)?
        for participant in participants {
            do {
                try await participant.lifecycleResume()
            } catch {
                if failure == nil { failure = error }
            }
        }
        for participant in participants { await participant.lifecycleDidResume() }
        state.withLock { $0.phase = .active }
        if let failure {
            logger.warning("resumed with a listener that could not reopen", metadata: [
                "switchyard.lifecycle.participants": "\(participants.count)", "switchyard.error": "\(failure)",
            ])
        } else {
            logger.notice("resumed", metadata: ["switchyard.lifecycle.participants": "\(participants.count)"])
        }
        notify(.active)
        if let failure { throw failure }
    }

    /// Waits until no background work is outstanding, or the grace period passed.
    private func waitForBackgroundWork() async {
        let idle = state.withLock { state in
            state.drainCancelled = false
            return state.work.isEmpty
        }
        if idle { return }
        let graceEnds = clock.now + gracePeriod
        let clock = clock
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.backgroundWorkDrained() }
            group.addTask { try? await clock.sleep(until: graceEnds) }
            await group.next()
            group.cancelAll()
        }
    }

    private func backgroundWorkDrained() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = state.withLock { state in
                    if state.work.isEmpty || state.drainCancelled { return true }
                    state.drainWaiter = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            let waiter = state.withLock { state in
                state.drainCancelled = true
                defer { state.drainWaiter = nil }
                return state.drainWaiter
            }
            waiter?.resume()
        }
    }

    private func notify(_ phase: LifecycleState) {
        let observers = state.withLock { state in
            state.observers.sorted { $0.key < $1.key }.map(\.value)
        }
        for observer in observers { observer.body(phase) }
    }

    /// Throws `unavailable`/`suspended` while suspending or suspended.
    private func refuseWhileSuspended(_ what: String) throws(TransportError) {
        let phase = current
        if phase == .suspending || phase == .suspended {
            var error = Self.suspendedError
            error.message = "\(what): the process is suspended (Lifecycle.suspend())"
            throw error
        }
    }

    /// Runs `body` after every suspend and resume called before it has finished.
    private func serialized<T: Sendable>(_ body: () async throws -> T) async rethrows -> T {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = state.withLock { state in
                if state.busy {
                    state.queue.append(continuation)
                    return false
                }
                state.busy = true
                return true
            }
            if now { continuation.resume() }
        }
        defer {
            let next = state.withLock { state -> CheckedContinuation<Void, Never>? in
                if let next = state.queue.popFirst() { return next }
                state.busy = false
                return nil
            }
            next?.resume()
        }
        return try await body()
    }
}

/// A registration with a ``Lifecycle`` (a listener, connection, channel, server or
/// observer); cancel it to end it.
public final class LifecycleRegistration: Sendable {
    /// What cancelling undoes. A participant's registration names it by id instead of
    /// holding a closure: one allocation less per registered connection.
    private enum Target {
        case participant(UInt64, Lifecycle)
        case action(@Sendable () -> Void)
    }
    /// A participant's target holds its lifecycle until cancelled (the lifecycle holds
    /// no registration, so this makes no cycle).
    private let target: Mutex<Target?>

    init(onCancel: @escaping @Sendable () -> Void) { target = Mutex(.action(onCancel)) }
    init(participant id: UInt64, of lifecycle: Lifecycle) { target = Mutex(.participant(id, lifecycle)) }

    /// Ends the registration: the lifecycle stops acting on the object. Idempotent.
    public func cancel() {
        let taken = target.withLock { target in
            defer { target = nil }
            return target
        }
        switch taken {
        case .participant(let id, let lifecycle):
            lifecycle.remove(id)?.lifecycleUnregistered()
        case .action(let action):
            action()
        case nil:
            break
        }
    }
}

/// Something a ``Lifecycle`` acts on. Every method is called on the task that suspends
/// or resumes, one participant at a time, in registration order. Switchyard's own modules
/// add theirs (a call channel, a call server's listener) with ``Lifecycle/add(_:)``.
package protocol LifecycleParticipant: AnyObject, Sendable {
    /// A suspend began: listeners close here, all at once.
    func lifecycleSuspendDidBegin()
    /// Then, one participant after the other: `willSuspend` hooks run.
    func lifecycleWillSuspend() async
    /// The grace phase is over: close what the policy closes. Returns whether the
    /// participant stays registered.
    func lifecycleSuspend(_ error: TransportError) -> Bool
    /// A resume began (listeners reopen here).
    func lifecycleResume() async throws
    /// A resume is ending (channels call again; `didResume` hooks run).
    func lifecycleDidResume() async
    /// The registration was cancelled.
    func lifecycleUnregistered()
    /// Whether the object is gone (released, closed for good), so the entry can go.
    var lifecycleIsGone: Bool { get }
}

extension LifecycleParticipant {
    package func lifecycleSuspendDidBegin() {}
    package func lifecycleWillSuspend() async {}
    package func lifecycleSuspend(_ error: TransportError) -> Bool { true }
    package func lifecycleResume() async throws {}
    package func lifecycleDidResume() async {}
    package func lifecycleUnregistered() {}
}

/// A connection registered with a policy and hooks.
///
/// Holds the connection strongly and counts it gone once this is the only reference left
/// (its transport lets go of a connection when it ends, its handler and its user when they
/// are done with it): the next sweep drops the entry and so frees the connection. Not a
/// `weak` reference, because a weakly referenced object gets a side table, and from then
/// on every retain and release of it, on every read and write of the connection, takes
/// the runtime's slow path (250 instructions a round trip of the BSD echo server, measured
/// with callgrind).
private final class RegisteredConnection: LifecycleParticipant {
    private struct State {
        /// The connection, as an object so that its uniqueness can be asked.
        var connection: AnyObject?
    }
    private let state: Mutex<State>
    let policy: SuspendPolicy
    let willSuspend: (@Sendable () async -> Void)?
    let didResume: (@Sendable () async -> Void)?

    init(
        _ connection: any Connection, policy: SuspendPolicy,
        willSuspend: (@Sendable () async -> Void)?, didResume: (@Sendable () async -> Void)?
    ) {
        self.state = Mutex(State(connection: connection as AnyObject))
        self.policy = policy
        self.willSuspend = willSuspend
        self.didResume = didResume
    }

    func lifecycleWillSuspend() async { await willSuspend?() }

    func lifecycleSuspend(_ error: TransportError) -> Bool {
        guard policy.closes else { return true }
        let connection = state.withLock { state in
            defer { state.connection = nil }
            return state.connection
        }
        (connection as? any Connection)?.close()
        return false
    }

    func lifecycleDidResume() async {
        if !lifecycleIsGone { await didResume?() }
    }

    var lifecycleIsGone: Bool {
        state.withLock { state in
            guard state.connection != nil else { return true }
            return isKnownUniquelyReferenced(&state.connection!)
        }
    }

    func lifecycleUnregistered() {
        let connection = state.withLock { state in
            defer { state.connection = nil }
            return state.connection
        }
        withExtendedLifetime(connection) {}
    }
}
