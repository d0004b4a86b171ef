import Switchyard
import Synchronization
import Testing

@testable import SwitchyardCalls

private typealias Machine = ChannelConnectionStateMachine
private typealias Action = ChannelConnectionStateMachine.Action
private typealias ConnectionID = ChannelConnectionStateMachine.ConnectionID
private typealias Waiter = ChannelConnectionStateMachine.Waiter

@Suite struct ChannelConnectionStateMachineTests {
    let start = ContinuousClock.now
    let refused = TransportError(code: .unavailable, reason: .refused, message: "connection refused")
    let broken = TransportError(code: .unavailable, reason: .reset, message: "connection reset")
    let pathChanged = TransportError(code: .unavailable, reason: .pathChanged, message: "the path changed")

    /// A backoff whose jitter always draws `share`.
    func backoff(share: Double = 0.1) -> ConnectionBackoff { ConnectionBackoff(jitterSource: { _ in share }) }

    @Test("gRPC's sequence: idle, connecting on a call, ready, idle when the connection breaks, connecting on the next call")
    func lifecycle() throws {
        let machine = Harness(backoff: backoff())
        #expect(machine.connectivityState == .idle)

        let first = machine.callRequested(now: start, waitForReady: false)
        let waiter = try #require(waiterOf(first))
        let attempt = try #require(connectOf(first.actions))
        #expect(first.actions == [.stateChanged(.connecting), .connect(attempt: attempt, timeout: .seconds(20))])

        let another = machine.callRequested(now: start, waitForReady: false)
        #expect(another.actions == [], "a second call waits, no second connect")
        let up = machine.connectSucceeded(attempt: attempt, now: start + .seconds(1))
        #expect(up == [.stateChanged(.ready), .resume([waiter, try #require(waiterOf(another))], on: attempt)])
        #expect(machine.connectivityState == .ready)
        #expect(machine.waiters.isEmpty)

        #expect(machine.callRequested(now: start + .seconds(2), waitForReady: false).answer == .use(attempt))

        #expect(machine.connectionClosed(id: attempt, now: start + .seconds(3)) == [.stateChanged(.idle)])
        #expect(machine.connectivityState == .idle, "a broken connection goes idle, not transient failure")

        let next = machine.callRequested(now: start + .seconds(4), waitForReady: false)
        let second = try #require(connectOf(next.actions))
        #expect(second != attempt)
        #expect(next.actions == [.stateChanged(.connecting), .connect(attempt: second, timeout: .seconds(20))], "connects at once, no backoff")
    }

    @Test("failed attempts: transient failure, then connecting again after 1 s, 1.6 s × jitter, 2.56 s × jitter from each attempt's start")
    func backoffSequence() throws {
        let machine = Harness(backoff: backoff(share: 0.1))
        let decision = machine.callRequested(now: start, waitForReady: true)
        var attempt = try #require(connectOf(decision.actions))
        var attemptStart = start
        var states: [ChannelConnectivityState] = [.idle] + decision.actions.compactMap(stateOf)
        var retries: [Double] = []
        for _ in 0..<4 {
            let failedAt = attemptStart + .milliseconds(300)
            let failure = machine.connectFailed(attempt: attempt, error: refused, now: failedAt)
            states += failure.compactMap(stateOf)
            let retryAt = try #require(failure.compactMap(retryOf).first)
            retries.append((retryAt - attemptStart).seconds)
            #expect(machine.retryTimerFired(now: retryAt - .milliseconds(1)) == [], "a retry timer that fires early does nothing")
            let again = machine.retryTimerFired(now: retryAt)
            states += again.compactMap(stateOf)
            attempt = try #require(connectOf(again))
            attemptStart = retryAt
        }
        let expected = [1, 1.6 * 1.1, 2.56 * 1.1, 4.096 * 1.1]
        for (retry, want) in zip(retries, expected) { #expect(abs(retry - want) < 1e-6, "retry after \(retry) s, expected \(want) s") }
        #expect(states == [.idle, .connecting] + Array(repeating: [.transientFailure, .connecting], count: 4).flatMap { $0 })
        #expect(machine.waiters.count == 1, "the wait-for-ready call waited through every failure")

        let up = machine.connectSucceeded(attempt: attempt, now: attemptStart + .seconds(1))
        #expect(up == [.stateChanged(.ready), .resume([try #require(waiterOf(decision))], on: attempt)])
        // The backoff starts over once a connection came up.
        _ = machine.connectionClosed(id: attempt, now: attemptStart + .seconds(5))
        let after = machine.callRequested(now: attemptStart + .seconds(6), waitForReady: true)
        let fresh = try #require(connectOf(after.actions))
        let failure = machine.connectFailed(attempt: fresh, error: refused, now: attemptStart + .seconds(7))
        #expect(failure.compactMap(retryOf) == [attemptStart + .seconds(7)], "a fresh run's first backoff is 1 s")
    }

    @Test("an attempt slower than its backoff is retried at once: the retry instant has passed")
    func slowAttempt() throws {
        let machine = Harness(backoff: backoff())
        let attempt = try #require(connectOf(machine.callRequested(now: start, waitForReady: true).actions))
        let failure = machine.connectFailed(attempt: attempt, error: TransportError(code: .unavailable, reason: .connectTimeout, message: "timeout"), now: start + .seconds(20))
        #expect(failure.compactMap(retryOf) == [start + .seconds(1)])
        let again = machine.retryTimerFired(now: start + .seconds(20))
        let next = try #require(connectOf(again))
        #expect(again == [.stateChanged(.connecting), .connect(attempt: next, timeout: .seconds(20))])
    }

    @Test("in transient failure a fail-fast call fails at once with the last error; a wait-for-ready call waits for the next attempt")
    func failFastAndWaitForReady() throws {
        let machine = Harness(backoff: backoff())
        let fast = machine.callRequested(now: start, waitForReady: false)
        let attempt = try #require(connectOf(fast.actions))
        let patientWaiter = try #require(waiterOf(machine.callRequested(now: start, waitForReady: true)))
        let fastWaiter = try #require(waiterOf(fast))

        let failure = machine.connectFailed(attempt: attempt, error: refused, now: start + .milliseconds(10))
        #expect(failure == [.stateChanged(.transientFailure), .fail([fastWaiter], refused), .scheduleRetry(at: start + .seconds(1))])
        #expect(machine.waiters == [patientWaiter])

        #expect(machine.callRequested(now: start + .milliseconds(20), waitForReady: false) == .init(answer: .fail(refused), actions: []))
        let later = try #require(waiterOf(machine.callRequested(now: start + .milliseconds(30), waitForReady: true)))
        #expect(machine.waiters == [patientWaiter, later])

        let again = machine.retryTimerFired(now: start + .seconds(1))
        let next = try #require(connectOf(again))
        // A fail-fast call in connecting waits (gRPC fails it only in transient failure).
        let fastInConnecting = try #require(waiterOf(machine.callRequested(now: start + .seconds(1), waitForReady: false)))
        let up = machine.connectSucceeded(attempt: next, now: start + .seconds(2))
        #expect(up == [.stateChanged(.ready), .resume([patientWaiter, later, fastInConnecting], on: next)])
    }

    @Test("a name that does not resolve fails every waiting call at once, wait-for-ready included, and every call until the next attempt")
    func nameResolutionFailsEveryone() throws {
        let machine = Harness(backoff: backoff())
        let first = machine.callRequested(now: start, waitForReady: true)
        let attempt = try #require(connectOf(first.actions))
        let a = try #require(waiterOf(first))
        let b = try #require(waiterOf(machine.callRequested(now: start, waitForReady: false)))
        let unresolved = TransportError.nameResolution("example.invalid", detail: "no such host")
        let failure = machine.connectFailed(attempt: attempt, error: unresolved, now: start + .milliseconds(5))
        #expect(failure == [.stateChanged(.transientFailure), .fail([a, b], unresolved), .scheduleRetry(at: start + .seconds(1))])
        #expect(machine.waiters.isEmpty)
        #expect(machine.callRequested(now: start + .milliseconds(6), waitForReady: true).answer == .fail(unresolved))
    }

    @Test("the retry timer with no call waiting goes idle; the next call continues the backoff")
    func retryWithNobodyWaitingGoesIdle() throws {
        let machine = Harness(backoff: backoff(share: 0))
        let first = machine.callRequested(now: start, waitForReady: false)
        let attempt = try #require(connectOf(first.actions))
        _ = machine.connectFailed(attempt: attempt, error: refused, now: start)
        #expect(machine.waiters.isEmpty)
        #expect(machine.retryTimerFired(now: start + .seconds(1)) == [.stateChanged(.idle)])
        #expect(machine.retryTimerFired(now: start + .seconds(2)) == [], "a second firing changes nothing")

        let later = start + .seconds(60)
        let next = try #require(connectOf(machine.callRequested(now: later, waitForReady: false).actions))
        let failure = machine.connectFailed(attempt: next, error: refused, now: later)
        let retryAt = try #require(failure.compactMap(retryOf).first)
        #expect(abs((retryAt - later).seconds - 1.6) < 1e-6, "the second attempt of the run: 1.6 s, not \(retryAt - later)")
    }

    @Test("GOAWAY: the connection drains, the channel goes idle, and the next call makes a new connection while the old one drains")
    func goAway() throws {
        let machine = Harness(backoff: backoff())
        let old = try ready(machine)
        _ = machine.callsChanged(openCalls: 2, now: start)
        #expect(machine.goAwayReceived(id: old) == [.drain(old), .stateChanged(.idle)])
        #expect(machine.drainingConnections == [old])
        #expect(machine.goAwayReceived(id: old) == [], "a second GOAWAY changes nothing")

        let call = machine.callRequested(now: start + .seconds(1), waitForReady: false)
        let fresh = try #require(connectOf(call.actions))
        #expect(fresh != old)
        #expect(machine.connectionClosed(id: old, now: start + .seconds(2)) == [], "the drained connection closing does not touch the new one")
        #expect(machine.drainingConnections.isEmpty)
        #expect(machine.connectivityState == .connecting)
        let waiter = try #require(waiterOf(call))
        #expect(machine.connectSucceeded(attempt: fresh, now: start + .seconds(3)) == [.stateChanged(.ready), .resume([waiter], on: fresh)])
    }

    @Test("a network change closes the connection and the draining ones; the next call connects afresh")
    func networkChangeWhenReady() throws {
        let machine = Harness(backoff: backoff())
        let old = try ready(machine)
        _ = machine.goAwayReceived(id: old)
        let current = try ready(machine)
        #expect(machine.networkChanged(error: pathChanged, now: start) == [.close(old, pathChanged), .close(current, pathChanged), .stateChanged(.idle)])
        #expect(machine.drainingConnections.isEmpty)
        let next = machine.callRequested(now: start, waitForReady: false)
        #expect(connectOf(next.actions).map { $0 > current } == true)
    }

    @Test("a network change while connecting abandons the attempt and starts a new one at once with a fresh backoff; the old attempt's late success is closed")
    func networkChangeWhileConnecting() throws {
        let machine = Harness(backoff: backoff(share: 0))
        let first = machine.callRequested(now: start, waitForReady: true)
        let a1 = try #require(connectOf(first.actions))
        _ = machine.connectFailed(attempt: a1, error: refused, now: start)
        let a2 = try #require(connectOf(machine.retryTimerFired(now: start + .seconds(1))))
        let change = machine.networkChanged(error: pathChanged, now: start + .seconds(1.5))
        let a3 = try #require(connectOf(change))
        #expect(change == [.close(a2, pathChanged), .connect(attempt: a3, timeout: .seconds(20))], "still connecting: no state change")
        #expect(machine.waiters == [try #require(waiterOf(first))])
        #expect(machine.connectSucceeded(attempt: a2, now: start + .seconds(2)) == [.close(a2, Machine.staleError)])
        #expect(machine.connectFailed(attempt: a2, error: refused, now: start + .seconds(2)) == [], "a stale failure is ignored")
        let failure = machine.connectFailed(attempt: a3, error: refused, now: start + .seconds(2))
        #expect(failure.compactMap(retryOf) == [start + .seconds(2.5)], "the backoff started over: 1 s from the new attempt's start")
    }

    @Test("a network change in transient failure retries at once when calls wait, else goes idle")
    func networkChangeInTransientFailure() throws {
        let waiting = Harness(backoff: backoff())
        let attempt = try #require(connectOf(waiting.callRequested(now: start, waitForReady: true).actions))
        _ = waiting.connectFailed(attempt: attempt, error: refused, now: start)
        let change = waiting.networkChanged(error: pathChanged, now: start + .milliseconds(100))
        let next = try #require(connectOf(change))
        #expect(change == [.stateChanged(.connecting), .connect(attempt: next, timeout: .seconds(20))])
        #expect(waiting.retryTimerFired(now: start + .seconds(1)) == [], "the old retry timer is stale")

        let empty = Harness(backoff: backoff())
        let other = try #require(connectOf(empty.callRequested(now: start, waitForReady: false).actions))
        _ = empty.connectFailed(attempt: other, error: refused, now: start)
        #expect(empty.networkChanged(error: pathChanged, now: start) == [.stateChanged(.idle)])
    }

    @Test("the idle timer: armed when the last call ends, disarmed by a call, fires into a graceful close and idle")
    func idleTimeout() throws {
        let machine = Harness(backoff: backoff(), idleTimeout: .seconds(60))
        let attempt = try #require(connectOf(machine.callRequested(now: start, waitForReady: false).actions))
        let up = machine.connectSucceeded(attempt: attempt, now: start)
        #expect(!up.contains { if case .scheduleIdleTimer = $0 { true } else { false } }, "a resumed call is about to open: no timer")

        _ = machine.callsChanged(openCalls: 1, now: start)
        #expect(machine.callsChanged(openCalls: 0, now: start + .seconds(10)) == [.scheduleIdleTimer(at: start + .seconds(70))])
        #expect(machine.callRequested(now: start + .seconds(20), waitForReady: false).answer == .use(attempt))
        #expect(machine.idleTimerFired(now: start + .seconds(70)) == [], "a call started: the timer was disarmed")

        #expect(machine.callsChanged(openCalls: 0, now: start + .seconds(30)) == [.scheduleIdleTimer(at: start + .seconds(90))])
        #expect(machine.idleTimerFired(now: start + .seconds(70)) == [], "the earlier timer is stale")
        #expect(machine.idleTimerFired(now: start + .seconds(90)) == [.drain(attempt), .stateChanged(.idle)])
        #expect(machine.connectivityState == .idle)

        let fresh = Harness(backoff: backoff())
        let id = try #require(connectOf(fresh.callRequested(now: start, waitForReady: false).actions))
        _ = fresh.cancelWaiting(Waiter(1))
        #expect(fresh.connectSucceeded(attempt: id, now: start) == [.stateChanged(.ready), .scheduleIdleTimer(at: start + .seconds(1800))], "no call waits: 30 minutes, gRPC's default")

        let never = Harness(backoff: backoff(), idleTimeout: nil)
        let neverID = try #require(connectOf(never.callRequested(now: start, waitForReady: false).actions))
        _ = never.cancelWaiting(Waiter(1))
        #expect(never.connectSucceeded(attempt: neverID, now: start) == [.stateChanged(.ready)])
        #expect(never.callsChanged(openCalls: 0, now: start) == [])
    }

    @Test("shutdown fails every waiting call cancelled/shutdown, closes the connections, and refuses later calls")
    func shutdown() throws {
        let machine = Harness(backoff: backoff())
        let old = try ready(machine)
        _ = machine.goAwayReceived(id: old)
        let first = machine.callRequested(now: start, waitForReady: true)
        let attempt = try #require(connectOf(first.actions))
        let second = machine.callRequested(now: start, waitForReady: false)
        let waiters = [try #require(waiterOf(first)), try #require(waiterOf(second))]
        let error = Machine.shutdownError
        #expect(error.code == .cancelled && error.reason == .shutdown)
        #expect(machine.shutdown() == [.fail(waiters, error), .close(attempt, error), .close(old, error), .stateChanged(.shutdown)])
        #expect(machine.shutdown() == [])
        #expect(machine.callRequested(now: start, waitForReady: true) == .init(answer: .fail(error), actions: []))
        #expect(machine.connectSucceeded(attempt: attempt, now: start) == [.close(attempt, Machine.staleError)], "a connection made after all is closed")
        #expect(machine.networkChanged(error: pathChanged, now: start) == [])
        #expect(machine.retryTimerFired(now: start + .seconds(100)) == [])
        #expect(machine.connectivityState == .shutdown)
    }

    @Test("inputs about older connections are ignored")
    func staleIDs() throws {
        let machine = Harness(backoff: backoff())
        let old = try ready(machine)
        _ = machine.connectionClosed(id: old, now: start)
        let current = try ready(machine)
        #expect(machine.connectionClosed(id: old, now: start) == [])
        #expect(machine.goAwayReceived(id: old) == [])
        #expect(machine.connectFailed(attempt: old, error: refused, now: start) == [])
        #expect(machine.readyConnection == current)
        #expect(machine.connectionClosed(id: ConnectionID(999), now: start) == [])
        #expect(machine.connectivityState == .ready)
    }

    @Test("a cancelled waiter is taken back once and never resumed")
    func cancelWaiting() throws {
        let machine = Harness(backoff: backoff())
        let first = machine.callRequested(now: start, waitForReady: false)
        let attempt = try #require(connectOf(first.actions))
        let a = try #require(waiterOf(first))
        let b = try #require(waiterOf(machine.callRequested(now: start, waitForReady: false)))
        #expect(machine.cancelWaiting(a))
        #expect(!machine.cancelWaiting(a))
        #expect(machine.connectSucceeded(attempt: attempt, now: start) == [.stateChanged(.ready), .resume([b], on: attempt)])
        #expect(!machine.cancelWaiting(b), "resumed already")
    }

    @Test("random sequences: every waiter ends exactly once, the machine forgets none, and states are reported only on change", arguments: [1, 2, 3, 42, 2026] as [UInt64])
    func randomSequences(seed: UInt64) throws {
        var random = SplitMix(seed: seed)
        let jitter = Mutex(SplitMix(seed: seed ^ 0xabcd))
        let machine = Harness(
            backoff: ConnectionBackoff(jitterSource: { range in jitter.withLock { Double.random(in: range, using: &$0) } }),
            idleTimeout: .seconds(5))
        var now = start
        var pending: [Waiter: Bool] = [:]  // waiter → wait-for-ready
        var ended: [Waiter: Int] = [:]
        var attempts: [ConnectionID] = []
        var retryAt: ContinuousClock.Instant?
        var idleAt: ContinuousClock.Instant?
        var reported = ChannelConnectivityState.idle
        var visited: Set<ChannelConnectivityState> = [.idle]
        var resumed = 0
        var failed = 0
        let errors = [refused, broken, TransportError.nameResolution("x.invalid", detail: "no such host")]

        func end(_ waiters: [Waiter]) {
            for waiter in waiters {
                ended[waiter, default: 0] += 1
                #expect(pending.removeValue(forKey: waiter) != nil, "\(waiter) ended but was not waiting")
            }
        }
        func apply(_ actions: [Action]) {
            let before = reported
            for action in actions {
                switch action {
                case .stateChanged(let state):
                    #expect(state != reported, "a state reported without a change")
                    reported = state
                    visited.insert(state)
                case .connect(let attempt, _): attempts.append(attempt)
                case .resume(let waiters, on: let id):
                    #expect(machine.readyConnection == id)
                    resumed += waiters.count
                    end(waiters)
                case .fail(let waiters, _):
                    failed += waiters.count
                    end(waiters)
                case .scheduleRetry(let at): retryAt = at
                case .scheduleIdleTimer(let at): idleAt = at
                case .drain, .close: break
                }
            }
            #expect(reported == machine.connectivityState, "after \(actions), from \(before)")
        }

        for _ in 0..<400 {
            now += .milliseconds(Int64(random.next() % 3000))
            switch random.next() % 12 {
            case 0, 1:
                let waitForReady = random.next() % 2 == 0
                let decision = machine.callRequested(now: now, waitForReady: waitForReady)
                if case .wait(let waiter) = decision.answer {
                    #expect(pending[waiter] == nil && ended[waiter] == nil)
                    pending[waiter] = waitForReady
                }
                apply(decision.actions)
            case 2:
                if let waiter = pending.keys.sorted(by: { $0.rawValue < $1.rawValue }).first {
                    #expect(machine.cancelWaiting(waiter))
                    end([waiter])
                }
                if let waiter = ended.keys.first { #expect(!machine.cancelWaiting(waiter)) }
            case 3, 4:
                if let id = attempts.randomElement(using: &random) { apply(machine.connectSucceeded(attempt: id, now: now)) }
            case 5, 6:
                if let id = attempts.randomElement(using: &random) {
                    apply(machine.connectFailed(attempt: id, error: errors.randomElement(using: &random) ?? refused, now: now))
                }
            case 7:
                if let at = retryAt { now = max(now, at) }
                apply(machine.retryTimerFired(now: now))
            case 8:
                if let id = attempts.randomElement(using: &random) {
                    apply(random.next() % 2 == 0 ? machine.connectionClosed(id: id, now: now) : machine.goAwayReceived(id: id))
                }
            case 9:
                if random.next() % 4 == 0 { apply(machine.networkChanged(error: pathChanged, now: now)) }
            case 10:
                apply(machine.callsChanged(openCalls: Int(random.next() % 3), now: now))
            default:
                if let at = idleAt { now = max(now, at) }
                apply(machine.idleTimerFired(now: now))
            }
            // The machine holds exactly the calls that wait, and only where they may wait.
            #expect(Set(machine.waiters) == Set(pending.keys))
            switch machine.connectivityState {
            case .connecting: break
            case .transientFailure: #expect(pending.values.allSatisfy { $0 }, "only wait-for-ready calls wait in transient failure")
            default: #expect(pending.isEmpty, "calls wait in \(machine.connectivityState)")
            }
        }
        apply(machine.shutdown())
        #expect(pending.isEmpty)
        #expect(ended.values.allSatisfy { $0 == 1 })
        // The sequence went everywhere: every state, calls resumed and calls failed.
        #expect(visited == [.idle, .connecting, .ready, .transientFailure, .shutdown])
        #expect(resumed > 0 && failed > 0)
    }

    /// Brings `machine` from idle to ready with no call open; returns the connection.
    private func ready(_ machine: Harness) throws -> ConnectionID {
        let decision = machine.callRequested(now: start, waitForReady: false)
        let attempt = try #require(connectOf(decision.actions))
        if let waiter = waiterOf(decision) { _ = machine.cancelWaiting(waiter) }
        _ = machine.connectSucceeded(attempt: attempt, now: start)
        try #require(machine.readyConnection == attempt)
        return attempt
    }
}

private func waiterOf(_ decision: Machine.CallDecision) -> Waiter? {
    if case .wait(let waiter) = decision.answer { waiter } else { nil }
}

private func connectOf(_ actions: [Action]) -> ConnectionID? {
    actions.lazy.compactMap { if case .connect(let attempt, _) = $0 { attempt } else { nil } }.first
}

private func stateOf(_ action: Action) -> ChannelConnectivityState? {
    if case .stateChanged(let state) = action { state } else { nil }
}

private func retryOf(_ action: Action) -> ContinuousClock.Instant? {
    if case .scheduleRetry(let at) = action { at } else { nil }
}

/// The machine in a reference, so that `#expect` can take an input's answer directly.
private final class Harness {
    var machine: Machine
    init(backoff: ConnectionBackoff, idleTimeout: Duration? = .seconds(30 * 60)) { machine = Machine(backoff: backoff, idleTimeout: idleTimeout) }

    var connectivityState: ChannelConnectivityState { machine.connectivityState }
    var waiters: [Waiter] { machine.waiters }
    var readyConnection: ConnectionID? { machine.readyConnection }
    var drainingConnections: Set<ConnectionID> { machine.drainingConnections }

    func callRequested(now: ContinuousClock.Instant, waitForReady: Bool) -> Machine.CallDecision { machine.callRequested(now: now, waitForReady: waitForReady) }
    func cancelWaiting(_ waiter: Waiter) -> Bool { machine.cancelWaiting(waiter) }
    func connectSucceeded(attempt: ConnectionID, now: ContinuousClock.Instant) -> [Action] { machine.connectSucceeded(attempt: attempt, now: now) }
    func connectFailed(attempt: ConnectionID, error: TransportError, now: ContinuousClock.Instant) -> [Action] { machine.connectFailed(attempt: attempt, error: error, now: now) }
    func retryTimerFired(now: ContinuousClock.Instant) -> [Action] { machine.retryTimerFired(now: now) }
    func connectionClosed(id: ConnectionID, now: ContinuousClock.Instant) -> [Action] { machine.connectionClosed(id: id, now: now) }
    func goAwayReceived(id: ConnectionID) -> [Action] { machine.goAwayReceived(id: id) }
    func networkChanged(error: TransportError, now: ContinuousClock.Instant) -> [Action] { machine.networkChanged(error: error, now: now) }
    func callsChanged(openCalls: Int, now: ContinuousClock.Instant) -> [Action] { machine.callsChanged(openCalls: openCalls, now: now) }
    func idleTimerFired(now: ContinuousClock.Instant) -> [Action] { machine.idleTimerFired(now: now) }
    func shutdown() -> [Action] { machine.shutdown() }
}
