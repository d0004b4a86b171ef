import ServiceLifecycle
import ServiceLifecycleTestKit
import Switchyard
import SwitchyardReachability
import SwitchyardMemory
import SwitchyardServiceLifecycle
import SwitchyardTestSupport
import Testing

/// ``SiteReachability`` as a `Service`: `run()` starts it, and a graceful shutdown stops
/// it (its `updates` sequences end) before `run()` returns.
@Suite("SiteReachability as a Service", .timeLimit(.minutes(1)))
struct SiteReachabilityServiceTests {
    @Test("run() starts the checker; a graceful shutdown stops it and ends its updates before run() returns")
    func runStartsAndGracefulShutdownStops() async throws {
        let transport = try MemoryTransport(configuration: .init(eventLoopCount: 1))
        // Nothing listens on the URL's port: the probe answers unreachable (refused) at once.
        let reachability = try SiteReachability(
            configuration: SiteReachabilityConfiguration(url: "http://127.0.0.1:9/", timeout: .seconds(2)),
            monitor: ManualConnectivityMonitor(initial: ConnectivityPath(category: .wifi)), transport: transport)
        let events = EventLog()
        let updates = reachability.updates
        let reader = Task {
            for await state in updates { events.add("\(state)".split(separator: " ").first.map(String.init) ?? "") }
            events.add("updates ended")
        }
        try await testGracefulShutdown { trigger in
            let run = Task {
                try await reachability.run()
                events.add("run returned")
            }
            try await events.wait(for: "unreachable")
            trigger.triggerGracefulShutdown()
            try await run.value
        }
        await reader.value
        let all = events.all
        #expect(all.firstIndex(of: "updates ended")! < all.firstIndex(of: "run returned")!, "\(all)")
        await transport.shutdownNow()
    }
}
