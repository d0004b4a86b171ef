import Switchyard
import SwitchyardReachability
import SwitchyardMemory
import Synchronization
import Testing

/// SiteReachability over the in-memory backend: no root, no sockets, so its timing and
/// its requests can be checked on any machine. (The socket backends, against a real
/// HTTP server, are in SwitchyardBackendsTests/SiteReachabilityTests.)
@Suite("SiteReachability over the in-memory backend", .serialized, .timeLimit(.minutes(1)))
struct SiteReachabilityMemoryTests {
    /// Answers every request with `response` and records the requests' heads.
    final class CannedServer: Sendable {
        let listener: any Listener
        let requests = Mutex<[String]>([])
        private let task: Mutex<Task<Void, Never>?> = Mutex(nil)

        init(transport: any Transport, response: String) async throws {
            listener = try await transport.listen(on: Endpoint(host: "127.0.0.1", port: 0))
            let connections = listener.connections
            let bytes = Array(response.utf8)
            let accepting = Task { [self] in
                for await connection in connections {
                    Task { await self.serve(connection, bytes) }
                }
            }
            task.withLock { $0 = accepting }
        }

        private func serve(_ raw: any Connection, _ response: [UInt8]) async {
            let connection = AsyncConnection(raw)
            defer { connection.close() }
            var head: [UInt8] = []
            do {
                while !head.ends(with: Array("\r\n\r\n".utf8)), head.count < 4096, let chunk = try await connection.read() {
                    head += chunk
                }
                requests.withLock { $0.append(String(decoding: head, as: UTF8.self)) }
                try await connection.write(response)
            } catch {}
        }

        var port: Int { listener.localAddress.port }
        func close() { listener.close() }
    }

    static func make(_ transport: any Transport, url: String, backoff: SiteReachabilityConfiguration.Backoff = .init(initial: .seconds(60))) throws -> SiteReachability {
        try SiteReachability(
            configuration: SiteReachabilityConfiguration(url: url, timeout: .seconds(2), backoff: backoff),
            monitor: ManualConnectivityMonitor(initial: ConnectivityPath(category: .wifi)), transport: transport)
    }

    /// Every state reported, with its time.
    final class Log: Sendable {
        private let entries = Mutex<[(state: ReachabilityState, at: ContinuousClock.Instant)]>([])
        init(_ reachability: SiteReachability) {
            let updates = reachability.updates
            Task { [self] in
                for await state in updates { record(state) }
            }
        }
        private func record(_ state: ReachabilityState) { entries.withLock { $0.append((state, .now)) } }
        var all: [(state: ReachabilityState, at: ContinuousClock.Instant)] { entries.withLock { $0 } }

        /// Waits (at most 5 s) until `count` states arrived.
        func wait(count: Int) async throws {
            let deadline = ContinuousClock.now + .seconds(5)
            while all.count < count {
                if ContinuousClock.now >= deadline { throw Timeout(states: all.map(\.state.description)) }
                try await Task.sleep(for: .milliseconds(2))
            }
        }
        struct Timeout: Error { let states: [String] }
    }

    @Test("Reachable over the in-memory backend: one HEAD with Host, User-Agent and Connection: close; check() probes again")
    func reachable() async throws {
        let transport = try MemoryTransport(configuration: .init(eventLoopCount: 1))
        let server = try await CannedServer(transport: transport, response: "HTTP/1.1 204 No Content\r\n\r\n")
        let reachability = try Self.make(transport, url: "http://127.0.0.1:\(server.port)/generate_204")
        #expect(reachability.current == .checking)
        let log = Log(reachability)
        reachability.start()
        try await log.wait(count: 2)
        // A reachable answer schedules no retry.
        try await Task.sleep(for: .milliseconds(200))
        #expect(server.requests.withLock { $0 } == [
            "HEAD /generate_204 HTTP/1.1\r\nHost: 127.0.0.1:\(server.port)\r\nUser-Agent: Switchyard-SiteReachability/1\r\nAccept: */*\r\nConnection: close\r\n\r\n",
        ])
        reachability.check()
        try await log.wait(count: 4)
        await reachability.stop()
        let states = log.all.map(\.state)
        #expect(states.count == 4, "\(states)")
        #expect(states[0] == .checking && states[1].description.hasPrefix("reachable (") && states[2] == .checking && states[3].description.hasPrefix("reachable ("), "\(states)")
        #expect(server.requests.withLock { $0.count } == 2)
        server.close()
        await transport.shutdownNow()
    }

    @Test("While unreachable, probes are spaced by the backoff: initial, times the factor, at most the maximum")
    func backoff() async throws {
        let transport = try MemoryTransport(configuration: .init(eventLoopCount: 1))
        // Nothing listens on this port: every connect is refused at once.
        let reachability = try Self.make(
            transport, url: "http://127.0.0.1:9/",
            backoff: .init(initial: .milliseconds(100), factor: 2, maximum: .milliseconds(300)))
        let log = Log(reachability)
        reachability.start()
        // checking, unreachable, then (checking, unreachable) four more times.
        try await log.wait(count: 10)
        await reachability.stop()
        let all = log.all
        #expect(all.enumerated().allSatisfy { index, entry in index % 2 == 0 ? entry.state == .checking : entry.state.description == "unreachable (refused)" }, "\(all.map(\.state.description))")
        let unreachable = stride(from: 1, to: 9, by: 2).map { all[$0].at }
        let checking = stride(from: 2, to: 10, by: 2).map { all[$0].at }
        let gaps = zip(unreachable, checking).map { $1 - $0 }
        let expected: [Duration] = [.milliseconds(100), .milliseconds(200), .milliseconds(300), .milliseconds(300)]
        for (gap, wait) in zip(gaps, expected) {
            #expect(gap >= wait - .milliseconds(2) && gap < wait + .milliseconds(250), "gaps \(gaps), expected \(expected)")
        }
        await transport.shutdownNow()
    }

    @Test("A change the monitor reports probes at once and starts the backoff over")
    func changeResetsBackoff() async throws {
        let transport = try MemoryTransport(configuration: .init(eventLoopCount: 1))
        let monitor = ManualConnectivityMonitor(initial: ConnectivityPath(category: .wifi))
        let reachability = try SiteReachability(
            configuration: SiteReachabilityConfiguration(
                url: "http://127.0.0.1:9/", backoff: .init(initial: .milliseconds(100), factor: 10, maximum: .seconds(60))),
            monitor: monitor, transport: transport)
        let log = Log(reachability)
        reachability.start()
        // Two refusals: the next wait would be 1 s.
        try await log.wait(count: 4)
        let changed = ContinuousClock.now
        monitor.report(ConnectivityPath(category: .cellular))
        try await log.wait(count: 8)
        await reachability.stop()
        let all = log.all
        #expect(all.map(\.state.description) == [
            "checking", "unreachable (refused)", "checking", "unreachable (refused)",
            "checking", "unreachable (refused)", "checking", "unreachable (refused)",
        ])
        // The change probed at once, and the wait after it was the initial 100 ms again.
        #expect(all[4].at - changed < .milliseconds(100), "\(all[4].at - changed)")
        let wait = all[6].at - all[5].at
        #expect(wait >= .milliseconds(98) && wait < .milliseconds(400), "\(wait)")
        await transport.shutdownNow()
    }

    @Test("updates after stop() yields the last state and finishes; start() after stop() does nothing")
    func afterStop() async throws {
        let transport = try MemoryTransport(configuration: .init(eventLoopCount: 1))
        let reachability = try Self.make(transport, url: "http://127.0.0.1:9/")
        let log = Log(reachability)
        reachability.start()
        try await log.wait(count: 2)
        await reachability.stop()
        reachability.start()
        reachability.check()
        var late: [ReachabilityState] = []
        for await state in reachability.updates { late.append(state) }
        #expect(late.map(\.description) == ["unreachable (refused)"])
        #expect(log.all.count == 2)
        await transport.shutdownNow()
    }

    @Test("No connectivity: none at once, no probe; connectivityExists follows the monitor")
    func noConnectivity() async throws {
        let transport = try MemoryTransport(configuration: .init(eventLoopCount: 1))
        let monitor = ManualConnectivityMonitor(initial: .none)
        let reachability = try SiteReachability(
            configuration: SiteReachabilityConfiguration(url: "http://127.0.0.1:9/"), monitor: monitor, transport: transport)
        #expect(!reachability.connectivityExists)
        #expect(reachability.current == .none)
        let log = Log(reachability)
        reachability.start()
        reachability.check()
        try await Task.sleep(for: .milliseconds(100))
        #expect(log.all.map(\.state) == [.none])
        monitor.report(ConnectivityPath(category: .cellular))
        #expect(reachability.connectivityExists)
        try await log.wait(count: 3)
        await reachability.stop()
        #expect(log.all.map(\.state.description) == ["none", "checking", "unreachable (refused)"])
        await transport.shutdownNow()
    }
}

extension Array where Element == UInt8 {
    fileprivate func ends(with suffix: [UInt8]) -> Bool { count >= suffix.count && Array(self[(count - suffix.count)...]) == suffix }
}
