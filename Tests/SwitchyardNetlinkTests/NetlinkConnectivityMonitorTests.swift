import Foundation
import Synchronization
import Switchyard
import SwitchyardNetlink
import Testing

/// The monitor against the real kernel, inside network namespaces the tests make (root
/// and iproute2 needed; elsewhere each test says so in one line and passes).
@Suite("NetlinkConnectivityMonitor in network namespaces", .serialized, .timeLimit(.minutes(2)))
struct NetlinkConnectivityMonitorTests {
    private static func skipUnlessRoot(_ test: String) -> Bool {
        if TestNamespaces.available { return false }
        print("skipping '\(test)': needs root and /usr/sbin/ip to make network namespaces")
        return true
    }

    private static func milliseconds(_ duration: Duration) -> String {
        let (seconds, attoseconds) = duration.components
        let value = Double(seconds) * 1000 + Double(attoseconds) / 1e15
        return String(format: "%.1f ms", value)
    }

    @Test("wlan0 → wwan0 → none, and a 10-toggle flap, as a monitor inside the namespace sees them")
    func switchingNetworks() async throws {
        if Self.skipUnlessRoot("switchingNetworks") { return }
        let namespaces = try #require(TestNamespaces.make(tag: "a"), "could not make the namespaces")
        defer { namespaces.remove() }
        let pid = getpid()
        let wlan = "wlan0-\(pid)"
        let wwan = "wwan0-\(pid)"
        try #require(namespaces.addVeth(wlan, peer: "nlw-\(pid)", subnet: 1))
        try #require(namespaces.ip("route add default via 10.214.1.2 dev \(wlan)"))

        let before = socketDescriptors()
        do {
            let monitor = try await namespaces.inClient { try NetlinkConnectivityMonitor() }
            defer { monitor.close() }
            #expect(monitor.current == ConnectivityPath(category: .wifi, interface: wlan, addresses: ["10.214.1.1"]))
            let log = ChangeLog()
            let observation = monitor.observe { log.record($0) }
            defer { observation.cancel() }

            // A new link and its address are no change of path.
            try #require(namespaces.addVeth(wwan, peer: "nlc-\(pid)", subnet: 2))
            try await Task.sleep(for: .milliseconds(200))
            #expect(log.count == 0, "changes: \(log.all.map(\.path))")

            // Move the default route to wwan0 and take wlan0 down.
            var start = ContinuousClock.now
            try #require(namespaces.ip("route replace default via 10.214.2.2 dev \(wwan)"))
            try #require(namespaces.ip("link set \(wlan) down"))
            let cellular = ConnectivityPath(category: .cellular, interface: wwan).description
            let switched = try #require(await log.wait(after: 0, timeout: .seconds(1)) { $0 == cellular }, "\(log.all.map(\.path))")
            print("netlink monitor: wifi → cellular reported \(Self.milliseconds(switched.at - start)) after the route moved")
            #expect(log.all.map(\.path) == [cellular])
            #expect(monitor.current.description == cellular)

            // Delete the default route: none.
            start = ContinuousClock.now
            try #require(namespaces.ip("route del default"))
            let gone = try #require(await log.wait(after: 1, timeout: .seconds(1)) { $0 == "none" }, "\(log.all.map(\.path))")
            print("netlink monitor: cellular → none reported \(Self.milliseconds(gone.at - start)) after the route was deleted")

            // An IPv6 default route on wlan0 (up again): wifi.
            try #require(namespaces.ip("link set \(wlan) up"))
            try #require(namespaces.ip("-6 addr add fd14:1::1/64 dev \(wlan) nodad"))
            start = ContinuousClock.now
            try #require(namespaces.ip("-6 route add default via fd14:1::2 dev \(wlan)"))
            let wifi = ConnectivityPath(category: .wifi, interface: wlan).description
            let ipv6 = try #require(await log.wait(after: 2, timeout: .seconds(1)) { $0 == wifi }, "\(log.all.map(\.path))")
            print("netlink monitor: none → wifi (IPv6 default route) reported \(Self.milliseconds(ipv6.at - start))")
            try #require(namespaces.ip("-6 route del default"))
            _ = try #require(await log.wait(after: 3, timeout: .seconds(1)) { $0 == "none" }, "\(log.all.map(\.path))")

            // Default route on wwan0 again, then 10 toggles of wwan0 in one batch.
            try #require(namespaces.ip("route add default via 10.214.2.2 dev \(wwan)"))
            _ = try #require(await log.wait(after: 4, timeout: .seconds(1)) { $0 == cellular }, "\(log.all.map(\.path))")
            try await Task.sleep(for: .milliseconds(100))
            let beforeFlap = log.count
            let toggles = (0..<10).map { "link set \(wwan) \($0.isMultiple(of: 2) ? "down" : "up")" }
            start = ContinuousClock.now
            try #require(namespaces.ipBatch(toggles))
            let flapTime = ContinuousClock.now - start
            try await Task.sleep(for: .seconds(1))
            let flapChanges = Array(log.all.dropFirst(beforeFlap))
            print("netlink monitor: 10 toggles took \(Self.milliseconds(flapTime)); changes reported: \(flapChanges.map { "\($0.path) at +\(Self.milliseconds($0.at - start))" })")
            #expect(flapTime < .milliseconds(500), "the batch should be quick")
            #expect(flapChanges.count <= 2)
            // The link ends up; the kernel flushed its IPv4 default route when it went down.
            let routes = namespaces.defaultRoutes()
            let expected = routes.contains(wwan) ? cellular : "none"
            #expect(monitor.current.description == expected, "routes now: \(routes)")

            monitor.close()
            #expect(monitor.current.description == expected, "close keeps the last path")
            let countAtClose = log.count
            try #require(namespaces.ip("route add default via 10.214.2.2 dev \(wwan)"))
            try await Task.sleep(for: .milliseconds(200))
            #expect(log.count == countAtClose, "no change is reported after close")
        }
        #expect(socketDescriptors() == before, "the monitor's descriptors are closed")
    }

    @Test("Monitors made and dropped in a namespace leak no descriptor; dropping one in its own observer is safe")
    func noLeaks() async throws {
        if Self.skipUnlessRoot("noLeaks") { return }
        let namespaces = try #require(TestNamespaces.make(tag: "b"), "could not make the namespaces")
        defer { namespaces.remove() }
        let pid = getpid()
        try #require(namespaces.addVeth("eth0-\(pid)", peer: "nle-\(pid)", subnet: 3))
        try #require(namespaces.ip("route add default via 10.214.3.2 dev eth0-\(pid)"))
        let before = socketDescriptors()

        // close() ends the thread and closes the descriptors before it returns.
        for _ in 0..<10 {
            let monitor = try await namespaces.inClient { try NetlinkConnectivityMonitor() }
            #expect(monitor.current == ConnectivityPath(category: .wired, interface: "eth0-\(pid)", addresses: ["10.214.3.1"]))
            monitor.close()
            #expect(socketDescriptors() == before)
        }
        // Dropped without close: deinit does it (on whichever thread lets go last; the
        // thread that made the monitor may still hold it for a moment, so wait).
        for _ in 0..<10 {
            let monitor = try await namespaces.inClient { try NetlinkConnectivityMonitor() }
            #expect(monitor.current.category == .wired)
        }
        try await Self.waitFor(descriptors: before)
        #expect(socketDescriptors() == before)

        // The observer drops the last reference to its own monitor, so deinit runs on the
        // monitor's thread (which cannot join itself).
        let holder = MonitorHolder()
        let log = ChangeLog()
        let observation: ConnectivityObservation
        do {
            let monitor = try await namespaces.inClient { try NetlinkConnectivityMonitor(debounce: .milliseconds(10)) }
            observation = monitor.observe { path in
                log.record(path)
                holder.drop()
            }
            holder.keep(monitor)
        }
        try #require(namespaces.ip("route del default"))
        _ = await log.wait(after: 0, timeout: .seconds(1)) { $0 == "none" }
        #expect(log.all.map(\.path) == ["none"])
        #expect(!holder.holds)
        observation.cancel()
        // The detached thread closes its descriptors once the observer returned.
        try await Self.waitFor(descriptors: before)
        #expect(socketDescriptors() == before)
    }

    private static func waitFor(descriptors: Set<Int32>) async throws {
        let deadline = ContinuousClock.now + .seconds(2)
        while socketDescriptors() != descriptors, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(5))
        }
    }

    @Test("connectivity-monitor prints the path and a change, run with ip netns exec")
    func example() async throws {
        if Self.skipUnlessRoot("example") { return }
        guard let tool = Self.product("connectivity-monitor") else {
            print("skipping 'example': the connectivity-monitor product is not built next to the tests")
            return
        }
        let namespaces = try #require(TestNamespaces.make(tag: "c"), "could not make the namespaces")
        defer { namespaces.remove() }
        let pid = getpid()
        let wlan = "wlan0-\(pid)"
        let wwan = "wwan0-\(pid)"
        try #require(namespaces.addVeth(wlan, peer: "nlw-\(pid)", subnet: 4))
        try #require(namespaces.addVeth(wwan, peer: "nlc-\(pid)", subnet: 5))
        try #require(namespaces.ip("route add default via 10.214.4.2 dev \(wlan)"))

        // Runs until one change (or 10 s), output to a file we can watch.
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("synl-example-\(pid).txt")
        defer { try? FileManager.default.removeItem(at: output) }
        _ = FileManager.default.createFile(atPath: output.path, contents: nil)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/sbin/ip")
        process.arguments = ["netns", "exec", namespaces.client, tool, "--count", "1", "--duration", "10", "--debounce-ms", "20"]
        process.standardOutput = try FileHandle(forWritingTo: output)
        try process.run()
        defer { if process.isRunning { process.terminate() } }

        func text() -> String { (try? String(contentsOf: output, encoding: .utf8)) ?? "" }
        let deadline = ContinuousClock.now + .seconds(5)
        while !text().contains("current"), ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
        #expect(text().hasPrefix("connectivity-monitor: current wifi (\(wlan)) [10.214.4.1]\n"), "\(text())")

        try #require(namespaces.ip("route replace default via 10.214.5.2 dev \(wwan)"))
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        let lines = text().split(separator: "\n").map(String.init)
        #expect(lines.count == 3, "\(lines)")
        if lines.count == 3 {
            // "2025-06-01T12:00:03.512Z cellular (wwan0-PID) [10.214.5.1]"
            #expect(lines[1].hasSuffix("Z cellular (\(wwan)) [10.214.5.1]"), "\(lines[1])")
            #expect(lines[1].count == "2025-06-01T12:00:03.512Z cellular (\(wwan)) [10.214.5.1]".count, "\(lines[1])")
            #expect(lines[2] == "connectivity-monitor: stopped (1 change)")
        }

        // SIGTERM stops it cleanly.
        try "".write(to: output, atomically: false, encoding: .utf8)
        let second = Process()
        second.executableURL = URL(fileURLWithPath: "/usr/sbin/ip")
        second.arguments = ["netns", "exec", namespaces.client, tool]
        second.standardOutput = try FileHandle(forWritingTo: output)
        try second.run()
        let deadline2 = ContinuousClock.now + .seconds(5)
        while !text().contains("current"), ContinuousClock.now < deadline2 { try await Task.sleep(for: .milliseconds(10)) }
        #expect(text().contains("current cellular (\(wwan))"), "\(text())")
        second.terminate()
        second.waitUntilExit()
        #expect(second.terminationStatus == 0)
        #expect(text().hasSuffix("connectivity-monitor: stopped (SIGTERM)\n"), "\(text())")
    }

    /// An executable product built next to the test binary, if there is one.
    private static func product(_ name: String) -> String? {
        guard var directory = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") else { return nil }
        for _ in 0..<4 {
            directory = (directory as NSString).deletingLastPathComponent
            let candidate = directory + "/" + name
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        return nil
    }
}

/// Holds a monitor that its own observer drops.
private final class MonitorHolder: Sendable {
    private let monitor = Mutex<NetlinkConnectivityMonitor?>(nil)
    func keep(_ monitor: NetlinkConnectivityMonitor) { self.monitor.withLock { $0 = monitor } }
    func drop() {
        // Released after the lock is let go, since deinit stops the monitor.
        let last = monitor.withLock { monitor in
            defer { monitor = nil }
            return monitor
        }
        _ = last
    }
    var holds: Bool { monitor.withLock { $0 != nil } }
}
