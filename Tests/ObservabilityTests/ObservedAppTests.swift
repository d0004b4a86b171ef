import Foundation
import Glibc
import Synchronization
import Testing

/// A new user's program that bootstraps swift-log and swift-metrics
/// (Tests/Fixtures/ObservedApp) sees log lines and counters for a connect, a reset, a
/// stall and a connectivity change. Bootstrapping is once per process, so the program is
/// a process of its own; it runs inside a network namespace this test makes (a veth named
/// like a Wi-Fi interface carries its default route) and removes, and injects every fault
/// for real: the server's abort (RST), nft dropping the port, the link going down.
@Suite("A program that bootstraps swift-log and swift-metrics", .serialized, .timeLimit(.minutes(2)))
struct ObservedAppTests {
    /// bsd with the kernel's stall detection and with its TCP_INFO monitor alone, libuv
    /// (the kernel's only).
    @Test(
        "sees log lines and counters for a connect, a reset, a stall and a connectivity change",
        arguments: [("bsd", "kernel"), ("bsd", "monitor"), ("libuv", "kernel")])
    func observedApp(backend: String, detection: String) async throws {
        guard getuid() == 0, access("/usr/sbin/ip", X_OK) == 0, access("/usr/sbin/nft", X_OK) == 0 else {
            print("ObservedAppTests: skipped: needs root, iproute2 and nft (network namespaces)")
            return
        }
        let app = try Self.appPath()
        let suffix = "\(backend == "bsd" ? "b" : "u")\(detection.prefix(1))\(getpid())"
        let namespace = "syobs-\(suffix)"
        let interface = "wlan0-\(suffix)"
        let peer = "p0-\(suffix)"
        defer { _ = Self.run("/usr/sbin/ip", ["netns", "del", namespace]) }
        for step in [
            ["netns", "add", namespace],
            ["-n", namespace, "link", "set", "lo", "up"],
            ["-n", namespace, "link", "add", interface, "type", "veth", "peer", "name", peer],
            ["-n", namespace, "addr", "add", "10.215.7.1/24", "dev", interface],
            ["-n", namespace, "addr", "add", "10.215.7.2/24", "dev", peer],
            ["-n", namespace, "link", "set", peer, "up"],
            ["-n", namespace, "link", "set", interface, "up"],
            ["-n", namespace, "route", "add", "default", "via", "10.215.7.2", "dev", interface],
        ] {
            try #require(Self.run("/usr/sbin/ip", step).status == 0, "ip \(step.joined(separator: " ")) failed")
        }

        let result = Self.run("/usr/sbin/ip", ["netns", "exec", namespace, app, backend, interface, "10.215.7.2", detection], timeout: .seconds(60))
        try #require(result.status == 0, "observed-app exited with \(result.status)\n\(result.stderr)\n\(result.stdout)")
        let lines = result.stdout.split(separator: "\n").compactMap { line in
            (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any]
        }
        let logs = lines.filter { $0["type"] as? String == "log" }
        let metrics = lines.filter { $0["type"] as? String == "metric" }
        let report = "\n\(result.stdout)\n\(result.stderr)"

        func log(_ message: String) -> [String: Any]? { logs.first { $0["message"] as? String == message } }
        func metadata(_ line: [String: Any]?) -> [String: String] { line?["metadata"] as? [String: String] ?? [:] }
        func counter(_ label: String, _ dimensions: [String: String]) -> Double? {
            metrics.first {
                $0["label"] as? String == label && $0["kind"] as? String == "counter"
                    && $0["dimensions"] as? [String: String] == dimensions
            }?["value"] as? Double
        }

        // The connect.
        let connected = try #require(log("connected"), "no 'connected' line\(report)")
        #expect(connected["level"] as? String == "debug")
        #expect(metadata(connected)["switchyard.backend"] == backend)
        #expect(metadata(connected)["switchyard.peer"]?.hasPrefix("127.0.0.1:") == true)
        #expect(metadata(connected)["switchyard.connection_id"] != nil)
        #expect(metadata(connected)["switchyard.connect_ms"] != nil)
        #expect(counter("switchyard_connections_opened_total", ["backend": backend, "direction": "outbound"]) == 2, "\(report)")
        #expect(counter("switchyard_connections_opened_total", ["backend": backend, "direction": "inbound"]) == 2, "\(report)")
        #expect(metrics.contains { $0["label"] as? String == "switchyard_connect_duration" && $0["count"] as? Int == 2 }, "\(report)")

        // The reset.
        let reset = try #require(log("connection reset by peer"), "no reset line\(report)")
        #expect(reset["level"] as? String == "warning")
        #expect(metadata(reset)["switchyard.reason"] == "reset")
        #expect(metadata(reset)["switchyard.backend"] == backend)
        #expect(metadata(reset)["switchyard.connection_id"] == metadata(connected)["switchyard.connection_id"])
        #expect(counter("switchyard_connections_closed_total", ["backend": backend, "reason": "reset"]) == 1, "\(report)")

        // The stall: the client's end at least (the server's idle end may stall too).
        let stalls = logs.filter { $0["message"] as? String == "connection stalled" }
        #expect(!stalls.isEmpty, "no stall line\(report)")
        for stall in stalls {
            #expect(stall["level"] as? String == "warning")
            #expect(metadata(stall)["switchyard.reason"] == "stalled")
            #expect(["tcp_info", "kernel"].contains(metadata(stall)["switchyard.detector"] ?? ""))
        }
        let stalledCount = counter("switchyard_connections_closed_total", ["backend": backend, "reason": "stalled"]) ?? 0
        #expect(stalledCount == Double(stalls.count) && stalledCount >= 1, "\(report)")
        let byDetector = ["tcp_info", "kernel"].map { counter("switchyard_stalls_total", ["backend": backend, "detector": $0]) ?? 0 }
        #expect(byDetector.reduce(0, +) == stalledCount, "\(report)")
        let detectionTimes = metrics.first {
            $0["label"] as? String == "switchyard_stall_detection_duration"
                && $0["dimensions"] as? [String: String] == ["backend": backend, "detector": "tcp_info"]
        }
        if detection == "monitor" {
            // Only the monitor can have found it, and it says how long it waited: at
            // least the stall timeout (2 s).
            #expect(stalls.allSatisfy { metadata($0)["switchyard.detector"] == "tcp_info" }, "\(report)")
            #expect(detectionTimes?["count"] as? Int == Int(byDetector[0]), "\(report)")
            #expect((detectionTimes?["value"] as? Double ?? 0) >= 2e9, "\(report)")
        }

        // The connectivity change: wifi to none, and back.
        let changes = logs.filter { $0["message"] as? String == "connectivity changed" }
        #expect(changes.map { metadata($0)["switchyard.connectivity.to"] ?? "" } == ["none", "wifi"], "\(report)")
        #expect(changes.allSatisfy { $0["level"] as? String == "notice" })
        #expect(metadata(changes.first)["switchyard.connectivity.from"] == "wifi")
        #expect(counter("switchyard_connectivity_changes_total", ["monitor": "netlink", "category": "none", "kind": "category"]) == 1, "\(report)")
        #expect(counter("switchyard_connectivity_changes_total", ["monitor": "netlink", "category": "wifi", "kind": "category"]) == 1, "\(report)")

        // Nothing else at warning or above.
        let loud = logs.filter { ["warning", "error", "critical"].contains($0["level"] as? String ?? "") }
        #expect(loud.count == 1 + stalls.count, "\(report)")
    }

    /// The fixture program, next to this test binary.
    static func appPath() throws -> String {
        var candidates: [String] = []
        if let exe = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
            var directory = (exe as NSString).deletingLastPathComponent
            for _ in 0..<4 {
                candidates.append(directory)
                directory = (directory as NSString).deletingLastPathComponent
            }
        }
        candidates.append(FileManager.default.currentDirectoryPath + "/.build/debug")
        guard let directory = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0 + "/observed-app") }) else {
            throw ObservabilityTestFailure("cannot find observed-app next to the tests (swift build --product observed-app)")
        }
        return directory + "/observed-app"
    }

    /// Runs a program to its end (killed after `timeout`); its status and outputs.
    static func run(_ path: String, _ arguments: [String], timeout: Duration = .seconds(10)) -> (status: Int32, stdout: String, stderr: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        process.standardInput = FileHandle.nullDevice
        do { try process.run() } catch { return (-1, "", "\(error)") }
        let collected = Mutex<(Data, Data)>((Data(), Data()))
        let readers = [
            Thread { let data = out.fileHandleForReading.readDataToEndOfFile(); collected.withLock { $0.0 = data } },
            Thread { let data = err.fileHandleForReading.readDataToEndOfFile(); collected.withLock { $0.1 = data } },
        ]
        for reader in readers { reader.start() }
        let deadline = ContinuousClock.now + timeout
        while process.isRunning {
            if ContinuousClock.now >= deadline { kill(process.processIdentifier, SIGKILL) }
            usleep(10_000)
        }
        process.waitUntilExit()
        // The pipes close with the child: wait for the readers (bounded).
        let drained = ContinuousClock.now + .seconds(5)
        while readers.contains(where: { !$0.isFinished }), ContinuousClock.now < drained { usleep(10_000) }
        let (stdout, stderr) = collected.withLock { $0 }
        return (process.terminationStatus, String(decoding: stdout, as: UTF8.self), String(decoding: stderr, as: UTF8.self))
    }
}
