package import Switchyard

/// The connection lifecycle of a channel, without I/O or clocks: gRPC's connectivity
/// semantics (grpc/grpc doc/connectivity-semantics-and-api.md) and its connection
/// backoff (doc/connection-backoff.md) as a pure value.
///
/// The channel that drives it owns the connections, the timers and the calls; it tells
/// the machine what happened (an input, with the time it happened) and does what the
/// returned actions say, in their order. The machine holds at most one connection at a
/// time (the current one) plus connections that drain after a GOAWAY; it knows each only
/// by the ``ConnectionID`` it gave out with ``Action/connect(attempt:timeout:)``.
///
/// States and their transitions (every change is reported once, as
/// ``Action/stateChanged(_:)``, and only when the state really changes):
/// - `idle` → `connecting`: a call was requested.
/// - `connecting` → `ready`: the attempt succeeded; `→ transientFailure`: it failed;
///   `→ idle`: the network changed under it with no call waiting (with calls waiting, a
///   new attempt starts at once and the state stays `connecting`).
/// - `ready` → `idle`: the connection broke, received GOAWAY, was closed for a network
///   change, or stayed without calls for ``idleTimeout``. gRPC goes to `idle`, not
///   `transientFailure`, here: the next call reconnects without waiting.
/// - `transientFailure` → `connecting`: the retry timer fired with calls waiting;
///   `→ idle`: it fired with none waiting, or the network changed with none waiting.
/// - any → `shutdown`: ``shutdown()``; nothing leaves it.
///
/// Calls that cannot use a connection at once wait as a ``Waiter`` token. Every token
/// handed out ends exactly once: in a ``Action/resume(_:on:)`` or a
/// ``Action/fail(_:_:)`` action, or when the channel takes it back with
/// ``cancelWaiting(_:)``. Tokens wait only in `connecting` and `transientFailure`; any
/// input that leaves those states ends them.
///
/// Timers are fire-and-check: the channel arms one where an action says, never needs to
/// disarm one, and reports each firing; a firing that no longer matches (the timer was
/// re-armed, disarmed or the state moved on) is ignored.
package struct ChannelConnectionStateMachine: Sendable {
    /// A connection, or an attempt to make one, as the machine numbers them (the attempt
    /// that succeeds keeps its number as the connection's).
    package struct ConnectionID: Sendable, Hashable, Comparable, CustomStringConvertible {
        package let rawValue: UInt64
        package init(_ rawValue: UInt64) { self.rawValue = rawValue }
        package static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }
        package var description: String { "connection \(rawValue)" }
    }

    /// A call waiting for a connection.
    package struct Waiter: Sendable, Hashable, CustomStringConvertible {
        package let rawValue: UInt64
        package init(_ rawValue: UInt64) { self.rawValue = rawValue }
        package var description: String { "waiter \(rawValue)" }
    }

    /// What the channel does, in the order given.
    package enum Action: Sendable, Hashable {
        /// The channel's state changed to this one (publish it).
        case stateChanged(ChannelConnectivityState)
        /// Start connecting, giving up after `timeout`; report the outcome with
        /// ``connectSucceeded(attempt:now:)`` or ``connectFailed(attempt:error:now:)``
        /// (a connect timeout is a failure with reason `connect timeout`).
        case connect(attempt: ConnectionID, timeout: Duration)
        /// These waiting calls go ahead on this connection.
        case resume([Waiter], on: ConnectionID)
        /// These waiting calls end with this error.
        case fail([Waiter], TransportError)
        /// Arm the retry timer; when it fires call ``retryTimerFired(now:)``. The instant
        /// may have passed already (the attempt took longer than its backoff): fire at once.
        case scheduleRetry(at: ContinuousClock.Instant)
        /// Arm the idle timer; when it fires call ``idleTimerFired(now:)``.
        case scheduleIdleTimer(at: ContinuousClock.Instant)
        /// Take no new calls on this connection; let its open calls finish, then close it
        /// (sending GOAWAY if it has not been sent).
        case drain(ConnectionID)
        /// Close this connection (or abandon this attempt) now; its open calls end with
        /// this error. Closing one already closed does nothing.
        case close(ConnectionID, TransportError)
    }

    /// The answer to ``callRequested(now:waitForReady:)``.
    package struct CallDecision: Sendable, Hashable {
        package enum Answer: Sendable, Hashable {
            /// Open the call on this connection now.
            case use(ConnectionID)
            /// The call waits; it will be named in a later `resume` or `fail` action.
            case wait(Waiter)
            /// The call ends at once with this error.
            case fail(TransportError)
        }
        package var answer: Answer
        /// What the channel does besides (connect, publish the state).
        package var actions: [Action]
    }

    /// The backoff between attempts.
    package let backoff: ConnectionBackoff
    /// How long a ready connection may go without calls before it is closed; nil: never.
    package let idleTimeout: Duration?

    private enum State: Sendable {
        /// No connection, none being made.
        case idle
        /// `attempt` is being made; it started at `startedAt`, and if it fails the next
        /// one starts no sooner than `startedAt + nextAttemptAfter`.
        case connecting(attempt: ConnectionID, startedAt: ContinuousClock.Instant, nextAttemptAfter: Duration)
        /// `connection` carries calls; `idleDeadline` is the armed idle timer (nil: none
        /// armed, because calls are open or may be about to open).
        case ready(connection: ConnectionID, idleDeadline: ContinuousClock.Instant?)
        /// The last attempt failed with `error`; the next may start at `retryAt`.
        case transientFailure(error: TransportError, retryAt: ContinuousClock.Instant)
        case shutdown
    }

    private var state: State = .idle
    /// The run of attempts in progress; a new run starts when a connection comes up or
    /// the network changes.
    private var attempts: ConnectionBackoff.Attempts
    /// Calls waiting for a connection, first come first. Non-empty only in `connecting`
    /// and `transientFailure`.
    private var waiting: [(waiter: Waiter, waitForReady: Bool)] = []
    /// Connections that drain after a GOAWAY or an idle timeout.
    private var draining: Set<ConnectionID> = []
    private var nextConnectionID: UInt64 = 1
    private var nextWaiterID: UInt64 = 1

    /// - Parameters:
    ///   - backoff: the spacing of attempts after failures (validate it first).
    ///   - idleTimeout: how long a ready connection may stay without calls before it is
    ///     closed; nil: never. Default 30 minutes, gRPC's.
    package init(backoff: ConnectionBackoff = ConnectionBackoff(), idleTimeout: Duration? = .seconds(30 * 60)) {
        self.backoff = backoff
        self.idleTimeout = idleTimeout
        self.attempts = backoff.attempts()
    }

    /// The channel's state now.
    package var connectivityState: ChannelConnectivityState {
        switch state {
        case .idle: .idle
        case .connecting: .connecting
        case .ready: .ready
        case .transientFailure: .transientFailure
        case .shutdown: .shutdown
        }
    }

    /// The calls waiting now, first come first.
    package var waiters: [Waiter] { waiting.map(\.waiter) }

    /// The current connection when ready.
    package var readyConnection: ConnectionID? {
        if case .ready(let connection, _) = state { connection } else { nil }
    }

    /// Connections draining (after GOAWAY or the idle timeout) that the machine has not
    /// yet been told are closed.
    package var drainingConnections: Set<ConnectionID> { draining }

    // MARK: - Inputs

    /// A call wants a connection.
    ///
    /// `idle`: a connection is started and the call waits. `connecting`: it waits.
    /// `ready`: it uses the connection (and the idle timer is disarmed until
    /// ``callsChanged(openCalls:now:)`` says the calls are gone). `transientFailure`: a
    /// wait-for-ready call waits for the next attempt; any other fails at once with the
    /// last attempt's error, as does every call after a name-resolution failure (it never
    /// waits, DESIGN behaviour 4). `shutdown`: it fails `cancelled`, reason `shutdown`.
    package mutating func callRequested(now: ContinuousClock.Instant, waitForReady: Bool) -> CallDecision {
        switch state {
        case .idle:
            var actions: [Action] = []
            startAttempt(now: now, into: &actions)
            return CallDecision(answer: .wait(enqueue(waitForReady: waitForReady)), actions: actions)
        case .connecting:
            return CallDecision(answer: .wait(enqueue(waitForReady: waitForReady)), actions: [])
        case .ready(let connection, _):
            state = .ready(connection: connection, idleDeadline: nil)
            return CallDecision(answer: .use(connection), actions: [])
        case .transientFailure(let error, _):
            guard waitForReady, error.reason != .nameResolution else {
                return CallDecision(answer: .fail(error), actions: [])
            }
            return CallDecision(answer: .wait(enqueue(waitForReady: true)), actions: [])
        case .shutdown:
            return CallDecision(answer: .fail(Self.shutdownError), actions: [])
        }
    }

    /// The channel takes a waiting call back (its deadline passed or it was cancelled)
    /// and ends it itself. Returns false if the call was not waiting (it was resumed or
    /// failed already, or never waited): then it must not be ended a second time.
    package mutating func cancelWaiting(_ waiter: Waiter) -> Bool {
        guard let index = waiting.firstIndex(where: { $0.waiter == waiter }) else { return false }
        waiting.remove(at: index)
        return true
    }

    /// The attempt `attempt` made its connection (TCP, TLS and the HTTP/2 preface).
    ///
    /// The current attempt: `ready`, the waiting calls resume on it, the backoff starts
    /// over, and the idle timer is armed if no call waited. A stale attempt (abandoned by
    /// a network change or ``shutdown()``): the connection is closed at once.
    package mutating func connectSucceeded(attempt: ConnectionID, now: ContinuousClock.Instant) -> [Action] {
        guard case .connecting(let current, _, _) = state, current == attempt else {
            return [.close(attempt, Self.staleError)]
        }
        attempts = backoff.attempts()
        var actions: [Action] = [.stateChanged(.ready)]
        let resumed = waiters
        waiting.removeAll()
        if resumed.isEmpty {
            let deadline = idleTimeout.map { now + $0 }
            state = .ready(connection: attempt, idleDeadline: deadline)
            if let deadline { actions.append(.scheduleIdleTimer(at: deadline)) }
        } else {
            state = .ready(connection: attempt, idleDeadline: nil)
            actions.append(.resume(resumed, on: attempt))
        }
        return actions
    }

    /// The attempt `attempt` failed with `error`.
    ///
    /// The current attempt: `transientFailure`; the retry is scheduled at the attempt's
    /// start plus its backoff (gRPC's ConnectWithBackoff); waiting calls that are not
    /// wait-for-ready fail with `error`, and with a name-resolution failure every waiting
    /// call fails. A stale attempt is ignored.
    package mutating func connectFailed(attempt: ConnectionID, error: TransportError, now: ContinuousClock.Instant) -> [Action] {
        guard case .connecting(let current, let startedAt, let nextAttemptAfter) = state, current == attempt else { return [] }
        let retryAt = startedAt + nextAttemptAfter
        state = .transientFailure(error: error, retryAt: retryAt)
        var actions: [Action] = [.stateChanged(.transientFailure)]
        let failAll = error.reason == .nameResolution
        let failed = waiting.filter { failAll || !$0.waitForReady }.map(\.waiter)
        if !failed.isEmpty {
            waiting.removeAll { failAll || !$0.waitForReady }
            actions.append(.fail(failed, error))
        }
        actions.append(.scheduleRetry(at: retryAt))
        return actions
    }

    /// The retry timer fired.
    ///
    /// In `transientFailure` once the retry time has come: with calls waiting, the next
    /// attempt starts (`connecting`); with none, the channel goes `idle` and the next
    /// call starts the attempt. grpc-core's subchannels do the same (they leave transient
    /// failure for idle when the backoff ends; grpc-swift-nio-transport's reconnect at
    /// once instead): no connection is made that no call asked for (on a phone, no
    /// radio wake-ups for nothing), and the backoff still holds, since the run of
    /// attempts continues from where it stopped until one succeeds. The price: a
    /// fail-fast call that comes later waits for an attempt instead of failing with the
    /// old error. Otherwise ignored.
    package mutating func retryTimerFired(now: ContinuousClock.Instant) -> [Action] {
        guard case .transientFailure(_, let retryAt) = state, now >= retryAt else { return [] }
        var actions: [Action] = []
        connectIfWaiting(now: now, into: &actions)
        return actions
    }

    /// The connection `id` closed or broke (or finished draining).
    ///
    /// The current connection: `idle` (not `transientFailure`: the next call connects at
    /// once, over whatever path is current then). Its calls end with the channel's error;
    /// the machine has none waiting in `ready`. A draining connection is forgotten; any
    /// other id is stale and ignored. (An attempt that fails is reported with
    /// ``connectFailed(attempt:error:now:)``, not here.)
    package mutating func connectionClosed(id: ConnectionID, now: ContinuousClock.Instant) -> [Action] {
        if draining.remove(id) != nil { return [] }
        guard case .ready(let current, _) = state, current == id else { return [] }
        state = .idle
        return [.stateChanged(.idle)]
    }

    /// The connection `id` received GOAWAY: its open calls finish on it, new calls go to
    /// a new connection. The current connection drains and the channel goes `idle`; the
    /// next call connects while the old one drains. Any other id is ignored.
    package mutating func goAwayReceived(id: ConnectionID) -> [Action] {
        guard case .ready(let current, _) = state, current == id else { return [] }
        draining.insert(id)
        state = .idle
        return [.drain(id), .stateChanged(.idle)]
    }

    /// The network under the connections changed (a category or path change, or a
    /// suspend): every connection is on a path that may be gone, so each is closed with
    /// `error` (its calls end with it: `unavailable`, reason `connectivity changed`,
    /// `path changed` or `suspended`), draining ones too.
    ///
    /// `ready`: `idle`. `connecting` or `transientFailure`: the backoff starts over
    /// (the failures were on the old path); with calls waiting a new attempt starts at
    /// once (`connecting`), else `idle`. `idle` and `shutdown`: only draining
    /// connections are closed.
    package mutating func networkChanged(error: TransportError, now: ContinuousClock.Instant) -> [Action] {
        var actions: [Action] = draining.sorted().map { .close($0, error) }
        draining.removeAll()
        switch state {
        case .idle, .shutdown:
            break
        case .ready(let connection, _):
            actions.append(.close(connection, error))
            state = .idle
            actions.append(.stateChanged(.idle))
        case .connecting(let attempt, _, _):
            actions.append(.close(attempt, error))
            attempts = backoff.attempts()
            connectIfWaiting(now: now, into: &actions)
        case .transientFailure:
            attempts = backoff.attempts()
            connectIfWaiting(now: now, into: &actions)
        }
        return actions
    }

    /// The number of calls open on the current connection changed to `openCalls`. The
    /// channel reports every change, including a call it was given the connection for
    /// (`use`, `resume`) that ends before it opens: until the count is reported as zero
    /// the idle timer stays disarmed.
    ///
    /// In `ready`: at zero the idle timer is armed for `now + idleTimeout`; above zero
    /// it is disarmed. Ignored in other states (calls on draining connections do not
    /// count).
    package mutating func callsChanged(openCalls: Int, now: ContinuousClock.Instant) -> [Action] {
        guard case .ready(let connection, let armed) = state else { return [] }
        if openCalls > 0 {
            state = .ready(connection: connection, idleDeadline: nil)
            return []
        }
        guard armed == nil, let idleTimeout else { return [] }
        let deadline = now + idleTimeout
        state = .ready(connection: connection, idleDeadline: deadline)
        return [.scheduleIdleTimer(at: deadline)]
    }

    /// The idle timer fired. In `ready` with the timer armed and its deadline come (no
    /// call opened since), the connection drains (it has no calls: it closes at once,
    /// gracefully) and the channel goes `idle`. Otherwise ignored.
    package mutating func idleTimerFired(now: ContinuousClock.Instant) -> [Action] {
        guard case .ready(let connection, let deadline?) = state, now >= deadline else { return [] }
        draining.insert(connection)
        state = .idle
        return [.drain(connection), .stateChanged(.idle)]
    }

    /// The channel closes: `shutdown`. Waiting calls fail `cancelled`, reason
    /// `shutdown`; the current connection or attempt and draining connections are
    /// closed with that error. Later inputs are ignored, except that a connection
    /// made after all is closed.
    package mutating func shutdown() -> [Action] {
        if case .shutdown = state { return [] }
        var actions: [Action] = []
        let failed = waiters
        waiting.removeAll()
        if !failed.isEmpty { actions.append(.fail(failed, Self.shutdownError)) }
        switch state {
        case .ready(let connection, _): actions.append(.close(connection, Self.shutdownError))
        case .connecting(let attempt, _, _): actions.append(.close(attempt, Self.shutdownError))
        case .idle, .transientFailure, .shutdown: break
        }
        actions += draining.sorted().map { .close($0, Self.shutdownError) }
        draining.removeAll()
        state = .shutdown
        actions.append(.stateChanged(.shutdown))
        return actions
    }

    // MARK: - Internals

    /// The error of calls refused or ended because the channel shut down.
    package static let shutdownError = TransportError(code: .cancelled, reason: .shutdown, message: "the channel was shut down")
    /// The error a connection made for an abandoned attempt is closed with.
    static let staleError = TransportError.closedLocally("the attempt was abandoned before it connected")

    /// Calls wait: a new attempt now. None: `idle`, until a call asks.
    private mutating func connectIfWaiting(now: ContinuousClock.Instant, into actions: inout [Action]) {
        if waiting.isEmpty {
            state = .idle
            actions.append(.stateChanged(.idle))
        } else {
            startAttempt(now: now, into: &actions)
        }
    }

    private mutating func startAttempt(now: ContinuousClock.Instant, into actions: inout [Action]) {
        let id = ConnectionID(nextConnectionID)
        nextConnectionID += 1
        let attempt = attempts.next()
        let wasConnecting = if case .connecting = state { true } else { false }
        state = .connecting(attempt: id, startedAt: now, nextAttemptAfter: attempt.nextAttemptAfter)
        if !wasConnecting { actions.append(.stateChanged(.connecting)) }
        actions.append(.connect(attempt: id, timeout: attempt.connectTimeout))
    }

    private mutating func enqueue(waitForReady: Bool) -> Waiter {
        let waiter = Waiter(nextWaiterID)
        nextWaiterID += 1
        waiting.append((waiter, waitForReady))
        return waiter
    }
}
