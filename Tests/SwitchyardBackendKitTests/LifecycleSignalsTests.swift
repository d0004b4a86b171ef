import Glibc
import Switchyard
import SwitchyardBackendKit
import Synchronization
import Testing
import SwitchyardPosix

/// The toolkit's signal pipe and the lifecycle's signal driver, with real signals sent to
/// this test process. Serialized: signal actions are process-wide. Before any `SIGTSTP`
/// is sent, the test checks that a handler (not the default action, which would stop the
/// whole test process) is installed.
@Suite("Lifecycle signals", .serialized)
struct LifecycleSignalsTests {
    @Test("Observers hear each signal; the previous action is put back when the last observer is cancelled")
    func observersAndRestore() async throws {
        let previous = signal(SIGUSR1, SIG_IGN)
        defer { signal(SIGUSR1, previous) }
        let first = Seen()
        let second = Seen()
        let one = try ProcessSignals.observe([SIGUSR1]) { first.add($0) }
        let two = try ProcessSignals.observe([SIGUSR1, SIGUSR2]) { second.add($0) }
        #expect(!isIgnored(SIGUSR1), "no handler was installed for SIGUSR1")
        kill(getpid(), SIGUSR1)
        try await waitUntil("both observers heard SIGUSR1") { first.all == [SIGUSR1] && second.all == [SIGUSR1] }
        one.cancel()
        kill(getpid(), SIGUSR1)
        try await waitUntil("the remaining observer heard the second SIGUSR1") { second.all == [SIGUSR1, SIGUSR1] }
        #expect(first.all == [SIGUSR1], "a cancelled observer was called")
        two.cancel()
        #expect(isIgnored(SIGUSR1), "cancelling the last observer did not put SIG_IGN back")
    }

    @Test("SIGTSTP suspends the lifecycle and SIGCONT resumes it, after a suspend still under way")
    func tstpAndCont() async throws {
        let lifecycle = Lifecycle(gracePeriod: .seconds(1))
        let seen = Recorded()
        let observation = lifecycle.observe { seen.add($0) }
        defer { observation.cancel() }
        let driver = try LifecycleSignals(driving: lifecycle)
        defer { driver.cancel() }
        try #require(!isDefault(SIGTSTP), "no handler for SIGTSTP: sending it would stop the test process")

        kill(getpid(), SIGTSTP)
        try await waitUntil("SIGTSTP suspended the lifecycle") { lifecycle.current == .suspended }
        kill(getpid(), SIGCONT)
        try await waitUntil("SIGCONT resumed the lifecycle") { lifecycle.current == .active }

        // A SIGCONT during a suspend (held by background work) resumes after it. (Not
        // sent back to back: the kernel discards a stop signal still pending when a
        // SIGCONT is generated.)
        let work = lifecycle.beginBackgroundWork()
        kill(getpid(), SIGTSTP)
        try await waitUntil("the suspend began") { lifecycle.current == .suspending }
        kill(getpid(), SIGCONT)
        try await Task.sleep(for: .milliseconds(50))
        #expect(lifecycle.current == .suspending, "the SIGCONT did not wait for the suspend under way")
        work.end()
        try await waitUntil("the back-to-back signals left the lifecycle active") { seen.all.count == 8 }
        #expect(seen.all == Array(repeating: [LifecycleState.suspending, .suspended, .resuming, .active], count: 2).flatMap { $0 })
        #expect(lifecycle.current == .active)

        driver.cancel()
        #expect(isDefault(SIGTSTP), "cancelling the driver did not put SIGTSTP's default action back")
    }
}

/// Whether `signal`'s action is the default one.
private func isDefault(_ signal: CInt) -> Bool {
    var action = sigaction()
    sigaction(signal, nil, &action)
    return action.__sigaction_handler.sa_handler == nil
}

/// Whether `signal` is ignored.
private func isIgnored(_ signal: CInt) -> Bool {
    var action = sigaction()
    sigaction(signal, nil, &action)
    guard let handler = action.__sigaction_handler.sa_handler else { return false }
    return unsafeBitCast(handler, to: Int.self) == 1
}

private func waitUntil(_ what: String, _ condition: () -> Bool) async throws {
    let deadline = ContinuousClock.now + .seconds(5)
    while !condition() {
        if ContinuousClock.now >= deadline {
            Issue.record("timed out waiting until \(what)")
            return
        }
        try await Task.sleep(for: .milliseconds(2))
    }
}

private final class Seen: Sendable {
    private let values = Mutex<[CInt]>([])
    func add(_ value: CInt) { values.withLock { $0.append(value) } }
    var all: [CInt] { values.withLock { $0 } }
}

private final class Recorded: Sendable {
    private let values = Mutex<[LifecycleState]>([])
    func add(_ value: LifecycleState) { values.withLock { $0.append(value) } }
    var all: [LifecycleState] { values.withLock { $0 } }
}
