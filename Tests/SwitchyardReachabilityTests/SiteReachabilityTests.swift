import Foundation
import Switchyard
import SwitchyardReachability
import SwitchyardBackends
import Synchronization
import Testing

/// Every state a reachability reported, with when it arrived.
final class StateLog: Sendable {
    private let entries = Mutex<[(state: ReachabilityState, at: ContinuousClock.Instant)]>([])
    private let task: Mutex<Task<Void, Never>?> = Mutex(nil)

    init(_ reachability: SiteReachability) {
        let updates = reachability.updates
        let reader = Task { [self] in
            for await state in updates { append(state) }
        }
        task.withLock { $0 = reader }
    }

    private func append(_ state: ReachabilityState) {
        entries.withLock { $0.append((state, .now)) }
    }

    var states: [ReachabilityState] { entries.withLock { $0.map(\.state) } }
    var all: [(state: ReachabilityState, at: ContinuousClock.Instant)] { entries.withLock { $0 } }

    /// Waits until a state after index `after` matches; returns it and its index.
    @discardableResult
    func wait(after: Int = -1, timeout: Duration = .seconds(10), _ matches: (ReachabilityState) -> Bool) async throws -> (state: ReachabilityState, at: ContinuousClock.Instant, index: Int) {
        let deadline = ContinuousClock.now + timeout
        while true {
            let all = self.all
            if let index = all.indices.first(where: { $0 > after && matches(all[$0].state) }) {
                return (all[index].state, all[index].at, index)
            }
            if ContinuousClock.now >= deadline {
                throw NetworkFailure("no matching state within \(timeout); states: \(all.map(\.state.description))")
            }
            try await Task.sleep(for: .milliseconds(5))
        }
    }
}

extension ReachabilityState {
    var isReachable: Bool { if case .reachable = self { true } else { false } }
    var failure: ReachabilityFailure? { if case .unreachable(let failure) = self { failure } else { nil } }
    func isUnreachable(_ reason: ReachabilityFailure.Reason) -> Bool { failure?.reason == reason }
}

/// SiteReachability against a real HTTP server (Python's http.server, and raw sockets
/// for broken answers) in network namespaces the test makes, on both socket backends.
@Suite("SiteReachability against a real HTTP server", .serialized, .timeLimit(.minutes(5)))
struct SiteReachabilityTests {
    static let backends = ["bsd", "libuv"]

    /// A network, a transport of `backend` in its client namespace, a monitor on Wi-Fi.
    struct Fixture {
        let network: ReachabilityNetwork
        let transport: any Transport
        let monitor: ManualConnectivityMonitor
        func url(_ port: Int, _ path: String = "/") -> String { "http://\(network.serverAddress):\(port)\(path)" }
    }

    /// Runs `body` with a fresh fixture, or skips (one line) when namespaces are not available.
    static func withFixture(_ backend: String, _ name: String, _ body: (Fixture) async throws -> Void) async throws {
        if let reason = ReachabilityNetwork.unavailableReason {
            print("skipping '\(name)': \(reason)")
            return
        }
        let network = try ReachabilityNetwork.make()
        defer { network.remove() }
        let socketsBefore = Self.sockets()
        let transport = try await network.makeTransport(backend)
        let fixture = Fixture(network: network, transport: transport, monitor: ManualConnectivityMonitor(initial: ConnectivityPath(category: .wifi, interface: "wlan0")))
        do {
            try await body(fixture)
        } catch {
            await transport.shutdownNow()
            throw error
        }
        await transport.shutdownNow()
        // Every probe's connection is closed: no socket is left once the transport stopped.
        // (One from before may have closed meanwhile: Foundation's Process keeps one for a
        // moment after a child ends.)
        let deadline = ContinuousClock.now + .seconds(2)
        while !Self.sockets().isSubset(of: socketsBefore), ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(Self.sockets().isSubset(of: socketsBefore), "sockets left open: \(Self.sockets().subtracting(socketsBefore))")
    }

    /// This process's socket descriptors.
    static func sockets() -> Set<String> {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        return Set(entries.compactMap { entry in
            guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(entry)"),
                  target.hasPrefix("socket:") else { return nil }
            return "\(entry) \(target)"
        })
    }

    static func reachability(_ fixture: Fixture, url: String, timeout: Duration = .seconds(2), backoff: SiteReachabilityConfiguration.Backoff = .init(initial: .seconds(60))) throws -> SiteReachability {
        try SiteReachability(
            configuration: SiteReachabilityConfiguration(url: url, timeout: timeout, backoff: backoff),
            monitor: fixture.monitor, transport: fixture.transport)
    }

    @Test("A server that answers 204 is reachable, with a latency; the request is one HEAD", arguments: backends)
    func reachable(backend: String) async throws {
        try await Self.withFixture(backend, "reachable") { fixture in
            let server = try await fixture.network.startServer(port: 8080, mode: "http")
            defer { server.stop() }
            let reachability = try Self.reachability(fixture, url: fixture.url(8080, "/generate_204"))
            #expect(reachability.connectivityExists)
            let log = StateLog(reachability)
            reachability.start()
            let (state, _, _) = try await log.wait { $0.isReachable }
            await reachability.stop()
            guard case .reachable(let latency) = state else { return }
            #expect(latency > .zero && latency < .seconds(2), "\(latency)")
            #expect(log.states == [.checking, state], "\(log.states)")
            #expect(reachability.current == state)
            #expect(await server.lines(atLeast: 1, where: { $0.hasPrefix("HEAD") }) == ["HEAD /generate_204 ua=Switchyard-SiteReachability/1 host=\(fixture.network.serverAddress):8080"], "\(server.lines)")
        }
    }

    @Test("A black-holed server is unreachable (timeout) after the timeout, not before, not much later", arguments: backends)
    func blackHole(backend: String) async throws {
        try await Self.withFixture(backend, "blackHole") { fixture in
            let server = try await fixture.network.startServer(port: 8080, mode: "http")
            defer { server.stop() }
            try fixture.network.blackHole(port: 8080)
            let timeout = Duration.milliseconds(1500)
            let reachability = try Self.reachability(fixture, url: fixture.url(8080), timeout: timeout)
            let log = StateLog(reachability)
            reachability.start()
            let checking = try await log.wait { $0 == .checking }
            let unreachable = try await log.wait(after: checking.index) { $0.failure != nil }
            await reachability.stop()
            #expect(unreachable.state.isUnreachable(.timeout), "\(unreachable.state)")
            let elapsed = unreachable.at - checking.at
            #expect(elapsed >= timeout - .milliseconds(20) && elapsed < timeout + .milliseconds(500), "after \(elapsed)")
        }
    }

    @Test("A name that does not resolve is unreachable (name resolution) at once", arguments: backends)
    func nameResolution(backend: String) async throws {
        try await Self.withFixture(backend, "nameResolution") { fixture in
            // RFC 6761: names under .invalid never resolve; the toolkit's resolver fails
            // them at once without a query.
            let reachability = try Self.reachability(fixture, url: "http://reachability-probe.invalid/generate_204", timeout: .seconds(5))
            let log = StateLog(reachability)
            reachability.start()
            let checking = try await log.wait { $0 == .checking }
            let unreachable = try await log.wait(after: checking.index) { $0.failure != nil }
            await reachability.stop()
            #expect(unreachable.state.isUnreachable(.nameResolution), "\(unreachable.state)")
            #expect(unreachable.at - checking.at < .milliseconds(200), "after \(unreachable.at - checking.at)")
        }
    }

    @Test("A category change probes again; none stops probing; its end probes again", arguments: backends)
    func categoryChange(backend: String) async throws {
        try await Self.withFixture(backend, "categoryChange") { fixture in
            let server = try await fixture.network.startServer(port: 8080, mode: "http")
            defer { server.stop() }
            let reachability = try Self.reachability(fixture, url: fixture.url(8080))
            let log = StateLog(reachability)
            reachability.start()
            let first = try await log.wait { $0.isReachable }
            fixture.monitor.report(ConnectivityPath(category: .cellular, interface: "wwan0"))
            let checking = try await log.wait(after: first.index) { $0 == .checking }
            let second = try await log.wait(after: checking.index) { $0.isReachable }
            #expect(await server.lines(atLeast: 2, where: { $0.hasPrefix("HEAD") }).count == 2, "\(server.lines)")

            fixture.monitor.report(.none)
            let none = try await log.wait(after: second.index) { $0 == .none }
            #expect(!reachability.connectivityExists)
            fixture.monitor.report(ConnectivityPath(category: .wifi, interface: "wlan0"))
            let third = try await log.wait(after: none.index) { $0.isReachable }
            await reachability.stop()
            #expect(log.states.count == third.index + 1, "\(log.states)")
            #expect(log.states.map { $0.isReachable ? "reachable" : $0.description } == [
                "checking", "reachable", "checking", "reachable", "none", "checking", "reachable",
            ])
            #expect(await server.lines(atLeast: 3, where: { $0.hasPrefix("HEAD") }).count == 3, "\(server.lines)")
        }
    }

    @Test("A redirect is a portal, with its Location; a 503 is unreachable (unexpected status)", arguments: backends)
    func portal(backend: String) async throws {
        try await Self.withFixture(backend, "portal") { fixture in
            let server = try await fixture.network.startServer(port: 8080, mode: "http")
            defer { server.stop() }
            let redirected = try Self.reachability(fixture, url: fixture.url(8080, "/redirect"))
            let log = StateLog(redirected)
            redirected.start()
            let portal = try await log.wait { $0 != .checking }
            await redirected.stop()
            #expect(portal.state == .portal(status: 302, location: "http://portal.test/login"))

            let failing = try Self.reachability(fixture, url: fixture.url(8080, "/unavailable"))
            let failingLog = StateLog(failing)
            failing.start()
            let unexpected = try await failingLog.wait { $0 != .checking }
            await failing.stop()
            #expect(unexpected.state.failure?.reason == .unexpectedStatus && unexpected.state.failure?.status == 503, "\(unexpected.state)")
            #expect(unexpected.state.description == "unreachable (unexpected status 503)")
        }
    }

    @Test("Unreachable, then the server comes back: reachable again through the backoff", arguments: backends)
    func comesBack(backend: String) async throws {
        try await Self.withFixture(backend, "comesBack") { fixture in
            let reachability = try Self.reachability(
                fixture, url: fixture.url(8081),
                backoff: .init(initial: .milliseconds(100), factor: 2, maximum: .milliseconds(400)))
            let log = StateLog(reachability)
            reachability.start()
            let refused = try await log.wait { $0.failure != nil }
            #expect(refused.state.isUnreachable(.refused), "\(refused.state)")
            // The backoff probes again: a second refusal after a wait.
            let retry = try await log.wait(after: refused.index) { $0 == .checking }
            #expect(retry.at - refused.at >= .milliseconds(90), "retried after \(retry.at - refused.at)")
            let server = try await fixture.network.startServer(port: 8081, mode: "http")
            defer { server.stop() }
            let back = try await log.wait(after: retry.index, timeout: .seconds(5)) { $0.isReachable }
            await reachability.stop()
            // Every probe before it was refused, each preceded by checking.
            let before = log.states[..<back.index]
            #expect(before.allSatisfy { $0 == .checking || $0.isUnreachable(.refused) }, "\(log.states)")
            #expect(before.filter { $0 == .checking }.count >= 2)
        }
    }

    static let brokenAnswers: [(String, String)] = backends.flatMap { backend in
        ["garbage", "endless", "slow", "silent"].map { (backend, $0) }
    }

    @Test("A malformed, endless, slow or silent answer is unreachable within the timeout", arguments: brokenAnswers)
    func brokenAnswer(backend: String, mode: String) async throws {
        try await Self.withFixture(backend, "brokenAnswer") { fixture in
            let server = try await fixture.network.startServer(port: 8082, mode: mode)
            defer { server.stop() }
            let timeout = Duration.milliseconds(1500)
            let reachability = try Self.reachability(fixture, url: fixture.url(8082), timeout: timeout)
            let log = StateLog(reachability)
            reachability.start()
            let checking = try await log.wait { $0 == .checking }
            if mode == "slow" || mode == "silent" {
                // Asked for again while it runs: coalesced, not a second probe.
                try await server.waitForLine("accepted")
                reachability.check()
                reachability.check()
            }
            let unreachable = try await log.wait(after: checking.index) { $0.failure != nil }
            let elapsed = unreachable.at - checking.at
            #expect(elapsed < timeout + .milliseconds(500), "after \(elapsed)")
            switch mode {
            case "garbage", "endless":
                #expect(unreachable.state.isUnreachable(.malformedResponse), "\(unreachable.state)")
                if mode == "garbage" { #expect(elapsed < .milliseconds(500), "after \(elapsed)") }
            default:
                #expect(unreachable.state.isUnreachable(.timeout), "\(unreachable.state)")
                #expect(elapsed >= timeout - .milliseconds(20), "after \(elapsed)")
            }
            try await Task.sleep(for: .milliseconds(100))
            await reachability.stop()
            #expect(log.states.count == 2, "\(log.states)")
            #expect(await server.lines(atLeast: 1, where: { $0 == "accepted" }).count == 1, "\(server.lines)")
        }
    }

    @Test("A category change during a probe restarts it; the old probe's answer is never reported", arguments: backends)
    func restartDuringProbe(backend: String) async throws {
        try await Self.withFixture(backend, "restartDuringProbe") { fixture in
            let server = try await fixture.network.startServer(port: 8082, mode: "silent")
            defer { server.stop() }
            let timeout = Duration.milliseconds(1500)
            let reachability = try Self.reachability(fixture, url: fixture.url(8082), timeout: timeout)
            let log = StateLog(reachability)
            reachability.start()
            try await server.waitForLine("accepted")
            try await Task.sleep(for: .milliseconds(500))
            let changed = ContinuousClock.now
            fixture.monitor.report(ConnectivityPath(category: .cellular, interface: "wwan0"))
            let unreachable = try await log.wait { $0.failure != nil }
            await reachability.stop()
            #expect(unreachable.state.isUnreachable(.timeout), "\(unreachable.state)")
            // The answer is the new probe's: a whole timeout after the change.
            let elapsed = unreachable.at - changed
            #expect(elapsed >= timeout - .milliseconds(20) && elapsed < timeout + .milliseconds(500), "after \(elapsed)")
            #expect(log.states.count == 2, "\(log.states)")
            #expect(await server.lines(atLeast: 2, where: { $0 == "accepted" }).count == 2, "\(server.lines)")
        }
    }

    @Test("stop() during a probe returns at once and finishes the updates", arguments: backends)
    func stopDuringProbe(backend: String) async throws {
        try await Self.withFixture(backend, "stopDuringProbe") { fixture in
            let server = try await fixture.network.startServer(port: 8082, mode: "silent")
            defer { server.stop() }
            let reachability = try Self.reachability(fixture, url: fixture.url(8082), timeout: .seconds(10))
            let updates = reachability.updates
            reachability.start()
            try await server.waitForLine("accepted")
            let started = ContinuousClock.now
            await reachability.stop()
            #expect(ContinuousClock.now - started < .milliseconds(500))
            var states: [ReachabilityState] = []
            for await state in updates { states.append(state) }
            #expect(states == [.checking], "\(states)")
            await reachability.stop()  // idempotent
        }
    }
}
