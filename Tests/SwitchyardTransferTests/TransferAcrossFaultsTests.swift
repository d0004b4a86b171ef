import Foundation
import Glibc
import Switchyard
import SwitchyardCalls
import SwitchyardBSD
import SwitchyardNetlink
import SwitchyardTransfer
import SwitchyardUV
import Synchronization
import Testing

/// 256 MiB from a file across every kind of break at once,
/// in network namespaces (as the kit's Wi-Fi and cellular layout): the receiver's call
/// reset twice, the sender's default route moved from `wlan0-…` to `wwan0-…` once (a real
/// `NetlinkConnectivityMonitor` in the client's namespace reports it, the channel ends the
/// call `connectivity changed`), and the sender's lifecycle suspended and resumed once.
@Suite("A 256 MiB transfer across resets, a network switch and a suspension", .serialized, .timeLimit(.minutes(1)))
struct TransferAcrossFaultsTests {
    static let size = 256 << 20
    /// 1 MiB chunks (the receiver's largest) and an 8 MiB window: fewer messages, so a
    /// debug build moves 256 MiB in seconds; the resend bound is per window, so it scales.
    static let options = TransferOptions(chunkSize: 1 << 20, window: 8 << 20, retryDelay: .milliseconds(10), maximumRetryDelay: .milliseconds(100))
    /// The faults, in order, each when the acknowledged bytes first pass its fraction.
    static let faults: [(Double, Fault)] = [(0.15, .reset), (0.35, .reset), (0.55, .switchToCellular), (0.75, .suspend)]

    enum Fault: Sendable { case reset, switchToCellular, suspend }

    static var available: Bool { getuid() == 0 && access("/usr/sbin/ip", X_OK) == 0 }

    @Test("SHA-256 matches, the stored file is identical, a resume per break, at most a window resent per break",
          .enabled(if: available, "needs root and iproute2 (/usr/sbin/ip) to make network namespaces"),
          arguments: ["bsd", "libuv"])
    func acrossFaults(backend: String) async throws {
        let layout = try #require(SwitchLayout.make(), "could not make the test's network namespaces")
        defer { layout.remove() }
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let sourcePath = directory + "-source.bin"
        defer { try? FileManager.default.removeItem(atPath: sourcePath) }
        let sha = try Self.writePatternFile(sourcePath, size: Self.size)

        let configuration = TransportConfiguration(eventLoopCount: 2)
        let make: @Sendable () throws -> any Transport = {
            backend == "bsd" ? try BSDTransport(configuration: configuration) : try UVTransport(configuration: configuration)
        }
        let serverTransport = try await layout.network.inNamespace(layout.network.server, make)
        let clientTransport = try await layout.network.inNamespace(layout.network.client, make)
        let monitor = try await layout.network.inNamespace(layout.network.client) { try NetlinkConnectivityMonitor() }
        defer { monitor.close() }
        #expect(monitor.current.category == .wifi && monitor.current.interface == layout.wifi)

        // Paced at 80 MiB/s (about 3 s for the file): the faults come from progress reports,
        // and an unpaced transfer can end before the last one lands.
        let storage = try DirectoryTransferStorage(directory: directory)
        let paced = PacedStorage(storage, bytesPerSecond: 80 * 1_048_576)
        let server = try await TransferServer.start(transport: serverTransport, on: Endpoint(host: SwitchLayout.serverAddress, port: 0), storage: paced)
        let lifecycle = Lifecycle(gracePeriod: .milliseconds(10))
        let channel = CallChannel(target: Endpoint(host: SwitchLayout.serverAddress, port: server.localAddress.port), transport: clientTransport, monitor: monitor)
        let registration = lifecycle.register(channel)
        defer { registration.cancel() }
        let transfer = Transfer(channel: channel, options: Self.options)

        /// The acknowledged offset at the switch and the cellular link's sent bytes then.
        let atSwitch = Mutex<(offset: UInt64, sent: UInt64?)?>(nil)
        // The faults, driven by the progress reports; each one's outcome is logged.
        let driver = Task {
            var pending = Self.faults
            var log: [String] = []
            var resentByResumes: [Int: UInt64] = [:]
            var connections = ""
            for await report in transfer.progress {
                resentByResumes[report.resumes] = max(resentByResumes[report.resumes] ?? 0, report.bytesResent)
                guard let (fraction, fault) = pending.first, report.fractionCompleted >= fraction else { continue }
                pending.removeFirst()
                switch fault {
                case .reset:
                    server.resetOpenTransfers()
                    log.append("reset at \(report.bytesAcknowledged)")
                case .switchToCellular:
                    let sent = layout.transmitted(on: layout.cellular)
                    let moved = TestNetwork.run("ip -n \(layout.network.client) route replace default via \(SwitchLayout.cellularGateway) dev \(layout.cellular)")
                    // Read after the move: the sender may have gone on since the report.
                    let acknowledged = transfer.resumeState?.acknowledgedOffset ?? report.bytesAcknowledged
                    atSwitch.withLock { $0 = (max(acknowledged, report.bytesAcknowledged), sent) }
                    log.append("route to \(layout.cellular) at \(report.bytesAcknowledged): \(moved ? "moved" : "FAILED")")
                case .suspend:
                    // After the switch: the transfer's connection is the cellular link's.
                    connections = layout.output(of: "ip netns exec \(layout.network.client) ss -Htn state established dst \(SwitchLayout.serverAddress)")
                    await lifecycle.suspend()
                    try? await Task.sleep(for: .milliseconds(200))
                    let resumed = (try? await lifecycle.resume()) != nil
                    log.append("suspended at \(report.bytesAcknowledged), \(resumed ? "resumed" : "resume FAILED")")
                }
            }
            return (log, pending.count, resentByResumes, connections)
        }
        let clock = ContinuousClock()
        let started = clock.now
        let result: TransferResult
        do {
            result = try await transfer.send(file: sourcePath)
        } catch {
            driver.cancel()
            server.close()
            await clientTransport.shutdownNow()
            await serverTransport.shutdownNow()
            throw error
        }
        let elapsed = clock.now - started
        let (log, left, resentByResumes, connections) = await driver.value
        print("transfer across faults (\(backend)): 256 MiB in \(elapsed), resumes \(result.resumes), resent \(result.bytesResent) bytes, window \(Self.options.window); \(log.joined(separator: "; "))")

        // What was left at the switch went over the cellular link (its bytes counted on
        // the client's end of it): everything past the offset acknowledged just after the
        // route moved, less what the old call had sent before it (at most a window).
        if let (offset, sent) = atSwitch.withLock({ $0 }), let before = sent, let after = layout.transmitted(on: layout.cellular) {
            let overCellular = after - min(before, after)
            let remaining = UInt64(Self.size) - offset
            print("transfer across faults (\(backend)): \(overCellular) bytes sent over \(layout.cellular) after the switch, \(remaining) bytes were left past the offset acknowledged then")
            #expect(overCellular + UInt64(Self.options.window) >= remaining)
        } else {
            Issue.record("no count of the bytes sent over \(layout.cellular) around the switch")
        }
        #expect(left == 0, "every fault fired: \(log)")
        #expect(!log.contains { $0.contains("FAILED") }, "\(log)")
        #expect(monitor.current.category == .cellular && monitor.current.interface == layout.cellular)
        #expect(result.sha256 == sha)
        #expect(result.size == UInt64(Self.size))
        #expect(result.resumes >= Self.faults.count)
        #expect(result.bytesResent <= UInt64(Self.faults.count * Self.options.window))
        // Per break: what was resent after the k-th resume (the last report with k resumes,
        // or the result for the last one) less what was resent before it.
        var perBreak: [UInt64] = []
        for resumes in 1...max(1, result.resumes) {
            let through = resumes == result.resumes ? result.bytesResent : (resentByResumes[resumes] ?? 0)
            let before = resentByResumes[resumes - 1] ?? 0
            perBreak.append(through - min(through, before))
        }
        print("transfer across faults (\(backend)): resent per break \(perBreak); connections after the switch: \(connections.split(separator: "\n").map { $0.split(separator: " ", omittingEmptySubsequences: true).suffix(2).joined(separator: " -> ") })")
        #expect(perBreak.allSatisfy { $0 <= UInt64(Self.options.window) })
        #expect(perBreak.reduce(0, +) == result.bytesResent)
        #expect(connections.contains("10.215.2.1:"), "the transfer's connection comes from wwan0's address: \(connections)")
        #expect(result.bytesSent == UInt64(Self.size) + result.bytesResent)

        server.close()
        await clientTransport.shutdownNow()
        await serverTransport.shutdownNow()
        #expect(try Self.sameContents(directory + "/" + result.id, sourcePath), "the stored file equals the source")
    }

    /// Whether two files hold the same bytes (read 4 MiB at a time).
    static func sameContents(_ first: String, _ second: String) throws -> Bool {
        let a = try FileHandle(forReadingFrom: URL(fileURLWithPath: first))
        let b = try FileHandle(forReadingFrom: URL(fileURLWithPath: second))
        defer { try? a.close(); try? b.close() }
        while true {
            let left = try a.read(upToCount: 4 << 20) ?? Data()
            let right = try b.read(upToCount: 4 << 20) ?? Data()
            guard left == right else { return false }
            if left.isEmpty { return true }
        }
    }

    /// Writes `size` bytes: 1 MiB of pseudo-random bytes repeated, each copy stamped with
    /// its index in its first eight bytes (quick in a debug build; a misplaced chunk still
    /// changes the digest). Returns its transfer digest.
    static func writePatternFile(_ path: String, size: Int) throws -> [UInt8] {
        let block = 1 << 20
        var bytes = [UInt8](repeating: 0, count: size)
        let pattern = testBytes(block, seed: 256)
        bytes.withUnsafeMutableBytes { buffer in
            for index in 0..<(size / block) {
                let base = index * block
                pattern.withUnsafeBytes { buffer.baseAddress!.advanced(by: base).copyMemory(from: $0.baseAddress!, byteCount: block) }
                withUnsafeBytes(of: UInt64(index).littleEndian) { buffer.baseAddress!.advanced(by: base).copyMemory(from: $0.baseAddress!, byteCount: 8) }
            }
        }
        #expect(FileManager.default.createFile(atPath: path, contents: Data(bytes)))
        return TransferChunkDigest.root(of: bytes)
    }
}

/// The kit's Wi-Fi and cellular layout, made from a test: a client namespace with a
/// `wlan0-<PID>` and a `wwan0-<PID>` veth to the server's namespace (10.215.1.0/24 and
/// 10.215.2.0/24), the server's address 10.215.0.1 on its loopback behind both, the
/// client's default route on the Wi-Fi link. Namespaces and commands are ``TestNetwork``'s.
struct SwitchLayout: Sendable {
    static let serverAddress = "10.215.0.1"
    static let wifiGateway = "10.215.1.2"
    static let cellularGateway = "10.215.2.2"
    let network: TestNetwork
    let wifi: String
    let cellular: String

    static func make() -> SwitchLayout? {
        let pid = getpid()
        let layout = SwitchLayout(network: TestNetwork(client: "sytr-c-\(pid)", server: "sytr-s-\(pid)"), wifi: "wlan0-\(pid)", cellular: "wwan0-\(pid)")
        layout.remove() // leftovers of a run that was killed
        let c = layout.network.client, s = layout.network.server
        let steps = [
            "ip netns add \(c)", "ip netns add \(s)",
            "ip -n \(c) link set lo up", "ip -n \(s) link set lo up",
            "ip -n \(c) link add \(layout.wifi) type veth peer name trw-\(pid) netns \(s)",
            "ip -n \(c) addr add 10.215.1.1/24 dev \(layout.wifi)",
            "ip -n \(s) addr add \(wifiGateway)/24 dev trw-\(pid)",
            "ip -n \(s) link set trw-\(pid) up", "ip -n \(c) link set \(layout.wifi) up",
            "ip -n \(c) link add \(layout.cellular) type veth peer name trc-\(pid) netns \(s)",
            "ip -n \(c) addr add 10.215.2.1/24 dev \(layout.cellular)",
            "ip -n \(s) addr add \(cellularGateway)/24 dev trc-\(pid)",
            "ip -n \(s) link set trc-\(pid) up", "ip -n \(c) link set \(layout.cellular) up",
            "ip -n \(s) addr add \(serverAddress)/32 dev lo",
            "ip -n \(c) route add default via \(wifiGateway) dev \(layout.wifi)",
        ]
        for step in steps where !TestNetwork.run(step) {
            layout.remove()
            return nil
        }
        return layout
    }

    /// The bytes the client's end of `link` has sent (`ip -s`), or nil if unreadable.
    func transmitted(on link: String) -> UInt64? {
        let output = Data(output(of: "ip -n \(network.client) -s -j link show dev \(link)").utf8)
        guard let links = try? JSONSerialization.jsonObject(with: output) as? [[String: Any]],
              let stats = links.first?["stats64"] as? [String: Any], let tx = stats["tx"] as? [String: Any],
              let bytes = tx["bytes"] as? NSNumber
        else { return nil }
        return bytes.uint64Value
    }

    /// What `command` prints on its standard output ("" if it cannot run).
    func output(of command: String) -> String {
        guard let pipe = popen(command + " 2>/dev/null", "r") else { return "" }
        var output: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = fread(&buffer, 1, buffer.count, pipe)
            if count <= 0 { break }
            output += buffer[0..<count]
        }
        pclose(pipe)
        return String(decoding: output, as: UTF8.self)
    }

    /// Removes both namespaces (the veth pairs go with them).
    func remove() { network.remove() }
}
