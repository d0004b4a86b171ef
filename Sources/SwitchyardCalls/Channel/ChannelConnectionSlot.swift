import Synchronization
import Switchyard
import SwitchyardHTTP2

/// A channel's connection and its connectivity state: the driver of
/// ``ChannelConnectionStateMachine``, which makes every decision (when to connect, who
/// waits, who fails, when to retry, when to go idle). The slot does the I/O and keeps the
/// clocks: it makes the connects the machine asks for, arms its timers, hands
/// connections to calls, and tells the machine what happened.
///
/// Every input is given to the machine under the slot's lock, and the actions it returns
/// are done in their order: the state changes are published and timers and connects
/// started under the lock (so subscribers see the states in order), connections closed
/// and waiting calls resumed after it (both may call back into the slot).
final class ChannelConnectionSlot: Sendable {
    typealias Machine = ChannelConnectionStateMachine
    typealias ConnectionID = ChannelConnectionStateMachine.ConnectionID

    let target: Endpoint
    let transport: any Transport
    /// The transport's clock: the state machine's time, the timers' sleeps, the backoff's
    /// jitter (unless the configuration has a source of its own), the tasks' executor.
    let clock: any TransportClock
    let configuration: ChannelConfiguration
    let connectOptions: ConnectOptions
    /// The request head every call starts from: scheme and authority.
    let requestHead: GRPCRequestHead
    /// The keepalive of the channel's connections (nil: none).
    let keepalive: ChannelKeepalive?

    /// A connection handed to a call; the call gives it back with ``callEnded(on:)``.
    struct Lease: Sendable {
        let connection: ChannelConnection
        let id: ConnectionID
    }

    private struct State {
        var machine: Machine
        /// Connections made and not yet closed: the ready one and draining ones.
        var connections: [ConnectionID: ChannelConnection] = [:]
        /// Attempts under way.
        var attempts: [ConnectionID: Task<Void, Never>] = [:]
        /// Calls waiting for a connection.
        var waiting: [Machine.Waiter: CheckedContinuation<Lease, any Error>] = [:]
        /// Calls handed each connection that have not ended.
        var openCalls: [ConnectionID: Int] = [:]
        var retryTimer: Task<Void, Never>?
        var idleTimer: Task<Void, Never>?
        var subscribers: [UInt64: AsyncStream<ChannelConnectivityState>.Continuation] = [:]
        var nextSubscriber: UInt64 = 0
        /// The channel was let go of: nothing new starts.
        var released = false
    }
    private let state: Mutex<State>

    /// What the actions leave to do once the lock is released, in order.
    fileprivate struct AfterLock {
        var started: [ChannelConnection] = []
        var resumes: [(CheckedContinuation<Lease, any Error>, Result<Lease, any Error>)] = []
        var closes: [(ChannelConnection, TransportError?)] = []
        var drains: [ChannelConnection] = []
        var finished: [AsyncStream<ChannelConnectivityState>.Continuation] = []

        func run() {
            for connection in started { connection.start() }
            for (connection, error) in closes { connection.close(with: error) }
            for connection in drains { connection.closeWhenIdle() }
            for (continuation, result) in resumes { continuation.resume(with: result) }
            for subscriber in finished { subscriber.finish() }
        }
    }

    init(target: Endpoint, transport: any Transport, connectOptions: ConnectOptions, configuration: ChannelConfiguration) {
        self.target = target
        self.transport = transport
        self.connectOptions = connectOptions
        self.configuration = configuration
        self.keepalive = configuration.keepalive.map(ChannelKeepalive.init)
        let authority = configuration.authority ?? (target.path != nil ? "localhost" : target.description)
        self.requestHead = GRPCRequestHead(scheme: configuration.scheme, path: "/", authority: authority, acceptEncodings: [])
        let clock = transport.clock
        self.clock = clock
        self.state = Mutex(State(machine: Machine(backoff: configuration.backoff.drawingJitter(from: clock), idleTimeout: configuration.idleTimeout)))
    }

    // MARK: connectivity state

    var connectivityState: ChannelConnectivityState { state.withLock { $0.machine.connectivityState } }

    /// The state now, then each change; finishes after `shutdown` or when the channel is
    /// let go of.
    func connectivityStates() -> AsyncStream<ChannelConnectivityState> {
        let (stream, continuation) = AsyncStream<ChannelConnectivityState>.makeStream(bufferingPolicy: .unbounded)
        let finished: Bool = state.withLock { state in
            continuation.yield(state.machine.connectivityState)
            if state.released || state.machine.connectivityState == .shutdown { return true }
            let id = state.nextSubscriber
            state.nextSubscriber += 1
            state.subscribers[id] = continuation
            continuation.onTermination = { [weak self] _ in
                _ = self?.state.withLock { $0.subscribers.removeValue(forKey: id) }
            }
            return false
        }
        if finished { continuation.finish() }
        return stream
    }

    // MARK: calls

    /// The connection a new call uses: the ready one, or the one the channel is making
    /// (the call waits for it; a wait-for-ready call also waits through failed attempts).
    /// - Throws: the attempt's error when it failed (or had failed: `transientFailure`)
    ///   and the call is fail-fast, or the name did not resolve; the deadline's error
    ///   (`deadlineExceeded`, reason `timed out`) when it passes first; `cancelled` when
    ///   the task is cancelled first; `cancelled`, reason `shutdown`, when the channel
    ///   closes first.
    func connection(waitForReady: Bool, deadline: CallDeadline?) async throws -> Lease {
        let request = WaitingRequest()
        return try await withTaskCancellationHandler {
            defer { request.done() }
            return try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Lease, any Error>) in
                var after = AfterLock()
                let waiter: Machine.Waiter? = state.withLock { state in
                    let decision = state.machine.callRequested(now: clock.now, waitForReady: waitForReady)
                    switch decision.answer {
                    case .use(let id):
                        if let connection = state.connections[id] {
                            state.openCalls[id, default: 0] += 1
                            after.resumes.append((continuation, .success(Lease(connection: connection, id: id))))
                        } else {
                            after.resumes.append((continuation, .failure(TransportError.closedLocally("the channel's connection is gone"))))
                        }
                    case .fail(let error):
                        after.resumes.append((continuation, .failure(error)))
                    case .wait(let waiter):
                        state.waiting[waiter] = continuation
                        perform(decision.actions, &state, &after)
                        return waiter
                    }
                    perform(decision.actions, &state, &after)
                    return nil
                }
                after.run()
                if let waiter {
                    // Cancelled or past the deadline before it was known to wait: take it back now.
                    if let error = request.waits(as: waiter, deadline: deadline, slot: self) { cancelWaiting(waiter, with: error) }
                }
            }
        } onCancel: {
            if let waiter = request.cancel() {
                cancelWaiting(waiter, with: TransportError(code: .cancelled, reason: .taskCancelled, message: "the call's task was cancelled while it waited for a connection"))
            }
        }
    }

    /// A waiting call gives up (cancelled, or its deadline passed) with `error`, unless it
    /// was resumed or failed already.
    fileprivate func cancelWaiting(_ waiter: Machine.Waiter, with error: TransportError) {
        let continuation = state.withLock { state -> CheckedContinuation<Lease, any Error>? in
            guard state.machine.cancelWaiting(waiter) else { return nil }
            return state.waiting.removeValue(forKey: waiter)
        }
        continuation?.resume(throwing: error)
    }

    /// Whether the channel was let go of (nothing new starts).
    var isReleased: Bool { state.withLock { $0.released } }

    /// A call handed `id` ended (or never started).
    func callEnded(on id: ConnectionID) {
        var after = AfterLock()
        state.withLock { state in
            guard let count = state.openCalls[id] else { return }
            state.openCalls[id] = count - 1
            guard state.machine.readyConnection == id else { return }
            perform(state.machine.callsChanged(openCalls: count - 1, now: clock.now), &state, &after)
        }
        after.run()
    }

    // MARK: inputs from the network and the channel

    private func connected(_ attempt: ConnectionID, _ connection: any Connection) {
        var after = AfterLock()
        state.withLock { state in
            state.attempts.removeValue(forKey: attempt)
            let made = ChannelConnection(
                connection: connection, configuration: H2Configuration(),
                maximumWaitingStreams: configuration.maximumWaitingCalls, keepalive: keepalive
            ) { [weak self] connection, closed in
                self?.connection(attempt, becameUnusable: closed)
            }
            guard !state.released else {
                after.closes.append((made, nil))
                return
            }
            state.connections[attempt] = made
            after.started.append(made)
            perform(state.machine.connectSucceeded(attempt: attempt, now: clock.now), &state, &after)
        }
        after.run()
    }

    private func connectFailed(_ attempt: ConnectionID, _ error: any Error) {
        let error = error as? TransportError
            ?? TransportError(code: .unavailable, reason: .refused, message: "the connect to \(target) failed: \(error)")
        var after = AfterLock()
        state.withLock { state in
            state.attempts.removeValue(forKey: attempt)
            perform(state.machine.connectFailed(attempt: attempt, error: error, now: clock.now), &state, &after)
        }
        after.run()
    }

    private func connection(_ id: ConnectionID, becameUnusable closed: Bool) {
        var after = AfterLock()
        state.withLock { state in
            if closed {
                state.connections.removeValue(forKey: id)
                state.openCalls.removeValue(forKey: id)
                perform(state.machine.connectionClosed(id: id, now: clock.now), &state, &after)
            } else {
                perform(state.machine.goAwayReceived(id: id), &state, &after)
            }
        }
        after.run()
    }

    private func timerFired(retry: Bool) {
        var after = AfterLock()
        state.withLock { state in
            let now = clock.now
            perform(retry ? state.machine.retryTimerFired(now: now) : state.machine.idleTimerFired(now: now), &state, &after)
        }
        after.run()
    }

    /// The network under the channel changed (or its lifecycle suspended): the
    /// connection closes with `error` if `isOnChangedPath` says its local address is on a
    /// path that changed, and an attempt under way (or the backoff after failed ones)
    /// starts over. A draining connection closes only if it is on the changed path.
    func drop(with error: TransportError, where isOnChangedPath: (Endpoint) -> Bool) {
        detach(with: error, where: isOnChangedPath).finish()
    }

    /// What ``detach(with:where:)`` left to do: close the connections it let go of, start
    /// the attempt that replaces them, hand it to the calls waiting.
    struct Detached {
        fileprivate let after: AfterLock
        func finish() { after.run() }
    }

    /// ``drop(with:where:)`` in two steps: now, the slot lets go of the connection (a
    /// call that asks for one from here on gets a new one); the closes and the rest wait
    /// for ``Detached/finish()``, so the caller can end the calls on the connection first,
    /// with `error`, rather than with the close.
    func detach(with error: TransportError, where isOnChangedPath: (Endpoint) -> Bool) -> Detached {
        var after = AfterLock()
        state.withLock { state in
            let machine = state.machine
            switch machine.connectivityState {
            case .ready:
                guard let id = machine.readyConnection, let current = state.connections[id], isOnChangedPath(current.localAddress) else { return }
            case .connecting, .transientFailure:
                break
            case .idle, .shutdown:
                // Only draining connections, which close once their calls end (the
                // channel ends those on the changed path itself).
                return
            }
            let actions = state.machine.networkChanged(error: error, now: clock.now).filter { action in
                guard case .close(let id, _) = action, let connection = state.connections[id] else { return true }
                return id == machine.readyConnection || isOnChangedPath(connection.localAddress)
            }
            perform(actions, &state, &after)
        }
        return Detached(after: after)
    }

    /// The channel closes: `shutdown`; waiting calls fail, connections and attempts close.
    func shutdown() {
        var after = AfterLock()
        state.withLock { state in
            perform(state.machine.shutdown(), &state, &after)
            state.retryTimer?.cancel()
            state.idleTimer?.cancel()
            after.finished += state.subscribers.values
            state.subscribers.removeAll()
        }
        after.run()
    }

    /// The channel is gone: its connections close once their calls ended, attempts stop.
    func release() {
        var after = AfterLock()
        state.withLock { state in
            state.released = true
            for attempt in state.attempts.values { attempt.cancel() }
            state.attempts.removeAll()
            after.drains += state.connections.values
            state.retryTimer?.cancel()
            state.idleTimer?.cancel()
            after.finished += state.subscribers.values
            state.subscribers.removeAll()
        }
        after.run()
    }

    // MARK: actions

    private func perform(_ actions: [Machine.Action], _ state: inout State, _ after: inout AfterLock) {
        for action in actions {
            switch action {
            case .stateChanged(let new):
                for subscriber in state.subscribers.values { subscriber.yield(new) }
                if new == .shutdown {
                    after.finished += state.subscribers.values
                    state.subscribers.removeAll()
                }
            case .connect(let attempt, let timeout):
                guard !state.released else { continue }
                var options = connectOptions
                options.timeout = min(options.timeout, timeout)
                let transport = transport
                let target = target
                state.attempts[attempt] = Task(executorPreference: clock.taskExecutor) { [weak self] in
                    do {
                        let connection = try await transport.connect(to: target, options: options)
                        if let self {
                            self.connected(attempt, connection)
                        } else {
                            connection.close()
                        }
                    } catch {
                        self?.connectFailed(attempt, error)
                    }
                }
            case .resume(let waiters, let id):
                let connection = state.connections[id]
                for waiter in waiters {
                    guard let continuation = state.waiting.removeValue(forKey: waiter) else { continue }
                    if let connection {
                        state.openCalls[id, default: 0] += 1
                        after.resumes.append((continuation, .success(Lease(connection: connection, id: id))))
                    } else {
                        after.resumes.append((continuation, .failure(TransportError.closedLocally("the channel's connection is gone"))))
                    }
                }
            case .fail(let waiters, let error):
                for waiter in waiters {
                    guard let continuation = state.waiting.removeValue(forKey: waiter) else { continue }
                    after.resumes.append((continuation, .failure(error)))
                }
            case .scheduleRetry(let instant):
                state.retryTimer?.cancel()
                state.retryTimer = timer(at: instant, retry: true)
            case .scheduleIdleTimer(let instant):
                state.idleTimer?.cancel()
                state.idleTimer = timer(at: instant, retry: false)
            case .drain(let id):
                if let connection = state.connections[id] { after.drains.append(connection) }
            case .close(let id, let error):
                if let connection = state.connections.removeValue(forKey: id) {
                    state.openCalls.removeValue(forKey: id)
                    after.closes.append((connection, error))
                } else if let attempt = state.attempts.removeValue(forKey: id) {
                    attempt.cancel()
                }
            }
        }
    }

    private func timer(at instant: ContinuousClock.Instant, retry: Bool) -> Task<Void, Never> {
        Task(executorPreference: clock.taskExecutor) { [weak self, clock] in
            do {
                try await clock.sleep(until: instant)
            } catch {
                return
            }
            self?.timerFired(retry: retry)
        }
    }
}

/// One call's wait for a connection, between the task's cancellation handler and the
/// slot: which waiter it is, whether it was cancelled, and its deadline's timer.
private final class WaitingRequest: Sendable {
    private enum Phase {
        case asking
        case waiting(ChannelConnectionStateMachine.Waiter, deadline: Task<Void, Never>?)
        case cancelled
        case done
    }
    private let phase = Mutex(Phase.asking)

    /// The call waits as `waiter`: arms its deadline. Returns the error to take it back
    /// with at once (cancelled already, or the deadline passed).
    func waits(as waiter: ChannelConnectionStateMachine.Waiter, deadline: CallDeadline?, slot: ChannelConnectionSlot) -> TransportError? {
        if let deadline, deadline.hasPassed { return deadline.error }
        return phase.withLock { phase in
            guard case .asking = phase else {
                return TransportError(code: .cancelled, reason: .taskCancelled, message: "the call's task was cancelled while it waited for a connection")
            }
            let timer = deadline.map { deadline in
                Task(executorPreference: deadline.clock.taskExecutor) { [weak slot] in
                    do {
                        try await deadline.clock.sleep(until: deadline.instant)
                    } catch {
                        return
                    }
                    slot?.cancelWaiting(waiter, with: deadline.error)
                }
            }
            phase = .waiting(waiter, deadline: timer)
            return nil
        }
    }

    /// The task was cancelled: the waiter to take back, if it waits.
    func cancel() -> ChannelConnectionStateMachine.Waiter? {
        phase.withLock { phase in
            switch phase {
            case .asking:
                phase = .cancelled
                return nil
            case .waiting(let waiter, let timer):
                timer?.cancel()
                phase = .cancelled
                return waiter
            case .cancelled, .done:
                return nil
            }
        }
    }

    /// The wait ended: the deadline's timer stops.
    func done() {
        phase.withLock { phase in
            if case .waiting(_, let timer) = phase { timer?.cancel() }
            phase = .done
        }
    }
}
