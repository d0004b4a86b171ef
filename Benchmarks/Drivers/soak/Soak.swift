// soak: mixed load with a fault every few seconds, across the bsd and libuv backends, each
// as client and as server, for a set time; then a report. Run by `Benchmarks/soak/soak`
// (root, network namespaces; see Benchmarks/soak/README.md).
//
//     soak [--seconds 600] [--fault-interval 3] [--stall-timeout 3] [--seed N] [--tag TAG] [--verbose]
//          [--faults reset,blackhole,switch,reclaim,suspend]
//
// TAG (default: the process id) ends the names of its namespaces and links; --verbose
// lists every fault in the report; --faults limits the kinds injected (default: all).
//
// Layout: one process. A server transport per backend in the server's namespace, each
// with a CallServer under its own Lifecycle (suspend policy close); a client transport per
// backend in the client's namespace (stall timeout set) and one netlink connectivity
// monitor there; a CallChannel per (client backend, server backend) pair, following the
// monitor. Per pair, two workers make calls one after another: a chatty one (messages of
// 8 to 264 bytes, up to 8 unacknowledged) and a bulk one (4 to 64 KiB, up to 4). Each
// message carries its call's number and its sequence number; the server records it
// before it acknowledges it (Ledger), so at the end every acknowledged message must have
// been delivered, once and in order. A failed call is noted by its reason and followed
// by a new one.
//
// Faults, one at a time, in shuffled rounds of all five kinds, one every
// `--fault-interval` seconds:
// - reset: `ss -K` of every established socket of one server's port (server side);
// - black hole: nft drops one server's port both ways for 2 x the stall timeout;
// - network switch: the client's default route moves to the other link and the old link
//   goes down (up again 1 s later);
// - reclaimed descriptor: `dup2` of a fresh socket or /dev/null over a random client
//   connection's descriptor;
// - suspend/resume: one server's Lifecycle suspends (listener closed, calls ended) and
//   resumes 1.5 s later.
//
// Checked: no crash (the process finishes), no hang (every worker makes progress, an
// acknowledgement or a call's end, at least every 30 s, and stops within 30 s of the
// end), no leak (descriptors at start and end, both with no call open, and RSS), and the
// ledger. Exits 1 when a check fails.

import Glibc
import Switchyard
import SwitchyardBackends
import SwitchyardNetlink
import Synchronization

struct Settings {
    var seconds = 600
    var faultInterval = 3.0
    var stallTimeout = 3.0
    var seed: UInt64 = 13
    var tag = "\(getpid())"
    var verbose = false
    var faults = FaultKind.allCases

    static func parse(_ arguments: [String]) -> Settings {
        var settings = Settings()
        var index = 0
        func value(_ name: String) -> String {
            index += 1
            guard index < arguments.count else { fail("\(name) needs a value") }
            return arguments[index]
        }
        func number(_ name: String, _ range: ClosedRange<Double>) -> Double {
            let text = value(name)
            guard let number = Double(text), range.contains(number) else {
                fail("\(name) \(text) is not a number in \(range.lowerBound)...\(range.upperBound)")
            }
            return number
        }
        while index < arguments.count {
            switch arguments[index] {
            case "--seconds": settings.seconds = Int(number("--seconds", 5...86_400))
            case "--fault-interval": settings.faultInterval = number("--fault-interval", 0.5...600)
            case "--stall-timeout": settings.stallTimeout = number("--stall-timeout", 1...60)
            case "--seed": settings.seed = UInt64(number("--seed", 0...1e15))
            case "--verbose": settings.verbose = true
            case "--faults":
                let names = value("--faults").split(separator: ",").map(String.init)
                settings.faults = names.map { name in
                    guard let kind = FaultKind.allCases.first(where: { $0.name == name }) else {
                        fail("--faults: no fault '\(name)' (use \(FaultKind.allCases.map(\.name).joined(separator: ", ")))")
                    }
                    return kind
                }
            case "--tag":
                settings.tag = value("--tag")
                guard (1...9).contains(settings.tag.utf8.count), settings.tag.utf8.allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x7a).contains($0) }) else {
                    fail("--tag '\(settings.tag)' must be 1 to 9 digits or lower-case letters (it ends interface names)")
                }
            case "-h", "--help":
                print("usage: soak [--seconds 600] [--fault-interval 3] [--stall-timeout 3] [--seed N] [--tag TAG] [--verbose] [--faults reset,blackhole,switch,reclaim,suspend]")
                exit(0)
            default:
                fail("unknown argument '\(arguments[index])' (see --help)")
            }
            index += 1
        }
        return settings
    }
}

let backends = ["bsd", "libuv"]
/// The server port of each backend.
let ports = ["bsd": 7301, "libuv": 7302]
let hangLimit: Duration = .seconds(30)

enum FaultKind: String, CaseIterable, Sendable {
    case reset = "reset (ss -K)"
    case blackHole = "black hole (nft drop)"
    case networkSwitch = "network switch (route moved, old link down)"
    case reclaimed = "reclaimed descriptor (dup2)"
    case suspend = "suspend/resume (server Lifecycle)"

    /// The name `--faults` takes.
    var name: String {
        switch self {
        case .reset: "reset"
        case .blackHole: "blackhole"
        case .networkSwitch: "switch"
        case .reclaimed: "reclaim"
        case .suspend: "suspend"
        }
    }
}

/// One fault injected: its kind, when, and the calls that ended after it (before the next).
final class FaultLog: Sendable {
    struct Entry {
        var kind: FaultKind
        var at: ContinuousClock.Instant
        var detail: String
        var endings = 0
        var latest: Duration = .zero
        /// The endings by code and reason.
        var reasons: [String: Int] = [:]
    }

    private let entries = Mutex<[Entry]>([])

    func add(_ kind: FaultKind, at: ContinuousClock.Instant, _ detail: String) {
        entries.withLock { $0.append(Entry(kind: kind, at: at, detail: detail)) }
    }

    /// The faults that can end a call with `error`: a reset comes from `ss -K` or from a
    /// suspend (its connections are reset), a stall or connect timeout from a black hole,
    /// and so on; nil for the rest (any fault).
    static func causes(of error: TransportError) -> Set<FaultKind>? {
        switch error.reason {
        case .reset: [.reset, .suspend]
        case .stalled, .connectTimeout: [.blackHole]
        case .connectivityChanged: [.networkSwitch]
        case .reclaimed: [.reclaimed]
        case .refused, .suspended: [.suspend]
        default: nil
        }
    }

    /// A call ended with `error` at `at`: counted against the latest fault before it
    /// that can cause it (any fault when no kind is known to).
    func callFailed(at: ContinuousClock.Instant, error: TransportError) {
        let reason = "\(error.code) (\(error.reason))"
        let causes = Self.causes(of: error)
        entries.withLock { entries in
            guard let index = entries.lastIndex(where: { $0.at <= at && causes?.contains($0.kind) ?? true })
                ?? entries.lastIndex(where: { $0.at <= at })
            else { return }
            entries[index].endings += 1
            entries[index].reasons[reason, default: 0] += 1
            entries[index].latest = max(entries[index].latest, at - entries[index].at)
        }
    }

    var all: [Entry] { entries.withLock { $0 } }
}

/// Progress of one worker, for the hang check.
final class Progress: Sendable {
    let name: String
    private let state = Mutex<(at: ContinuousClock.Instant, stage: String)>((.now, "starting"))
    init(name: String) { self.name = name }
    func touch(_ stage: String) { state.withLock { $0 = (.now, stage) } }
    var last: (at: ContinuousClock.Instant, stage: String) { state.withLock { $0 } }
}

/// A flag set once, from any thread.
final class Flag: Sendable {
    private let value = Atomic<Bool>(false)
    var isSet: Bool { value.load(ordering: .relaxed) }
    func set() { value.store(true, ordering: .relaxed) }
}

/// Counters of the whole run.
final class Counters: Sendable {
    final class Count: Sendable {
        private let count = Atomic<Int>(0)
        var value: Int { count.load(ordering: .relaxed) }
        func add() { count.add(1, ordering: .relaxed) }
    }

    let sent = Atomic<Int>(0)
    let acknowledged = Atomic<Int>(0)
    let callsStarted = Atomic<Int>(0)
    let callsOK = Atomic<Int>(0)
    /// Client calls (and connects) that ended with an error, by code and reason.
    let clientEndings = Tally()
    /// Server calls by how they ended.
    let serverEndings = Tally()
    /// Acknowledgements per pair.
    let perPair = Tally()
    /// Hangs seen (a worker without progress for hangLimit), and other failures.
    let problems = Mutex<[String]>([])

    func problem(_ text: String) {
        problems.withLock { if $0.count < 50 { $0.append(text) } }
    }
}

/// The servers' side: records each message in the ledger, then acknowledges it; ends the
/// call with OK when the client finishes. Stateless but for shared, locked objects.
final class SoakServerHandler: CallHandler {
    let ledger: Ledger
    let counters: Counters

    init(ledger: Ledger, counters: Counters) {
        self.ledger = ledger
        self.counters = counters
    }

    func call(_ call: Call, didReceive message: [UInt8]) {
        guard let parsed = Message.parse(message) else {
            counters.problem("a server received a message of \(message.count) bytes, too short")
            return
        }
        ledger.received(call: parsed.call, sequence: parsed.sequence, intact: parsed.intact)
        call.send(Message.acknowledgement(call: parsed.call, sequence: parsed.sequence))
    }

    func callDidReceiveEnd(_ call: Call) {
        call.finish(.ok)
    }

    func call(_ call: Call, didCloseWith status: CallStatus) {
        counters.serverEndings.add(status.error.map { "\($0.code) (\($0.reason))" } ?? "ok")
    }
}

struct Worker: Sendable {
    let pair: String
    let bulk: Bool
    let channel: CallChannel
    let progress: Progress

    var sizes: ClosedRange<Int> { bulk ? 4096...65536 : 0...256 }
    var window: Int { bulk ? 4 : 8 }
}

@main
struct Soak {
    static func main() async {
        let settings = Settings.parse(Array(CommandLine.arguments.dropFirst()))
        if getuid() != 0 { fail("needs root (network namespaces)") }
        for tool in ["ip", "nft", "ss"] where Tool.path(tool) == nil { fail("needs \(tool)") }
        // A write to a reclaimed descriptor must not kill the process (the backends send
        // with MSG_NOSIGNAL or block SIGPIPE on their threads; this covers the rest).
        signal(SIGPIPE, SIG_IGN)

        let network = SoakNetwork(tag: settings.tag)
        do {
            try network.make()
        } catch {
            fail("cannot make the network: \(error)")
        }
        let ok = await run(settings, network)
        network.remove()
        exit(ok ? 0 : 1)
    }

    static func run(_ settings: Settings, _ network: SoakNetwork) async -> Bool {
        let clock = ContinuousClock()
        let stall = Duration.milliseconds(Int64(settings.stallTimeout * 1000))
        let configuration = TransportConfiguration(eventLoopCount: 1, stallTimeout: stall)
        let ledger = Ledger(capacity: 1 << 20)
        let counters = Counters()
        let faults = FaultLog()

        var servers: [String: (transport: any Transport, lifecycle: Lifecycle, server: CallServer)] = [:]
        var clients: [String: any Transport] = [:]
        let monitor: NetlinkConnectivityMonitor
        do {
            for backend in backends {
                let transport = try await network.run(in: network.serverNamespace) {
                    try Backends.makeTransport(named: backend, configuration: configuration)
                }
                let lifecycle = Lifecycle(gracePeriod: .milliseconds(200))
                let server = try await CallServer.start(
                    transport: transport, on: Endpoint(host: network.serverAddress, port: ports[backend]!),
                    options: CallConfiguration(maximumMessageSize: 1 << 20), lifecycle: lifecycle, policy: .close
                ) { _ in SoakServerHandler(ledger: ledger, counters: counters) }
                servers[backend] = (transport, lifecycle, server)
                clients[backend] = try await network.run(in: network.clientNamespace) {
                    try Backends.makeTransport(named: backend, configuration: configuration)
                }
            }
            monitor = try await network.run(in: network.clientNamespace) { try NetlinkConnectivityMonitor() }
        } catch {
            writeStandardError("soak: setting up: \(error)\n")
            return false
        }
        print("soak: network \(monitor.current); server \(network.serverAddress), ports \(backends.map { "\($0) \(ports[$0]!)" }.joined(separator: ", "))")

        var made: [Worker] = []
        for clientBackend in backends {
            for serverBackend in backends {
                let pair = "\(clientBackend) -> \(serverBackend)"
                let channel = CallChannel(
                    target: Endpoint(host: network.serverAddress, port: ports[serverBackend]!),
                    transport: clients[clientBackend]!, connectOptions: ConnectOptions(timeout: stall), monitor: monitor)
                for bulk in [false, true] {
                    made.append(Worker(pair: pair, bulk: bulk, channel: channel, progress: Progress(name: "\(pair) \(bulk ? "bulk" : "chatty")")))
                }
            }
        }

        let workers = made

        // Warm-up: one short call per worker, then the start figures, with no call open.
        let stopping = Flag()
        for worker in workers {
            var random = SystemRandomNumberGenerator()
            if await !oneCall(worker, messages: 20, ledger: ledger, counters: counters, faults: faults, stopping: stopping, random: &random) {
                writeStandardError("soak: the warm-up call of \(worker.progress.name) failed\n")
                return false
            }
        }
        try? await Task.sleep(for: .milliseconds(200))
        let startDescriptors = ProcessState.descriptors()
        let startMemory = ProcessState.memory()
        let start = clock.now
        print("soak: start: \(startDescriptors.count) descriptors, RSS \(startMemory.rss) KiB (anon \(startMemory.anon) KiB); \(settings.seconds) s, a fault every \(settings.faultInterval) s, stall timeout \(settings.stallTimeout) s, seed \(settings.seed)")
        fflush(nil)

        let deadline = start + .seconds(settings.seconds)
        let running = servers
        let finished = Counters.Count()
        let workersDone = await withTaskGroup(of: Void.self, returning: Bool.self) { group in
            for (index, worker) in workers.enumerated() {
                group.addTask {
                    var random = Xorshift(seed: settings.seed &+ UInt64(index) &* 7919)
                    while !stopping.isSet {
                        let count = worker.bulk ? Int.random(in: 20...200, using: &random) : Int.random(in: 100...2000, using: &random)
                        if await !oneCall(worker, messages: count, ledger: ledger, counters: counters, faults: faults, stopping: stopping, random: &random) {
                            worker.progress.touch("pausing after a failed call")
                            try? await Task.sleep(for: .milliseconds(50))
                        }
                    }
                    worker.progress.touch("stopped")
                    finished.add()
                }
            }
            // Faults.
            group.addTask {
                var random = Xorshift(seed: settings.seed)
                var round: [FaultKind] = []
                var active = 0
                while clock.now + .milliseconds(Int64(settings.faultInterval * 1000)) < deadline {
                    try? await Task.sleep(for: .milliseconds(Int64(settings.faultInterval * 1000)))
                    if round.isEmpty { round = settings.faults.shuffled(using: &random) }
                    let kind = round.removeLast()
                    await inject(kind, network: network, servers: running, stall: stall, active: &active, faults: faults, counters: counters, random: &random)
                }
            }
            // Reports and the hang check, once a second.
            group.addTask {
                var lastReport = clock.now
                var reported = Set<String>()
                var closedForHang = false
                while finished.value < workers.count {
                    try? await Task.sleep(for: .seconds(1))
                    let now = clock.now
                    if now >= deadline { stopping.set() }
                    for worker in workers {
                        let last = worker.progress.last
                        if now - last.at > hangLimit, !reported.contains(worker.progress.name) {
                            reported.insert(worker.progress.name)
                            counters.problem("hang: \(worker.progress.name) made no progress for \(now - last.at) (stage: \(last.stage))")
                        }
                    }
                    if now - lastReport >= .seconds(60) || (stopping.isSet && now - lastReport >= .seconds(5)) {
                        lastReport = now
                        let memory = ProcessState.memory()
                        print("soak: \(Int((now - start).seconds)) s: \(counters.acknowledged.load(ordering: .relaxed)) acknowledged, \(counters.callsStarted.load(ordering: .relaxed)) calls, \(faults.all.count) faults, \(ProcessState.descriptors().count) descriptors, RSS \(memory.rss) KiB (anon \(memory.anon))")
                        fflush(nil)
                    }
                    if stopping.isSet, now - deadline > hangLimit, !closedForHang {
                        closedForHang = true
                        counters.problem("hang: \(workers.count - finished.value) workers had not stopped \(hangLimit) after the end")
                        for worker in workers { worker.channel.close() }
                    }
                }
            }
            await group.waitForAll()
            return finished.value == workers.count
        }
        let end = clock.now

        // End figures, with no call open: wait for the servers' calls to end.
        for _ in 0..<100 {
            let open = servers.values.reduce(0) { $0 + $1.server.openCalls } + workers.reduce(0) { $0 + $1.channel.openCalls }
            if open == 0 { break }
            try? await Task.sleep(for: .milliseconds(100))
        }
        try? await Task.sleep(for: .milliseconds(200))
        let endDescriptors = ProcessState.descriptors()
        let endMemory = ProcessState.memory()
        let startKinds = ProcessState.kinds(startDescriptors), endKinds = ProcessState.kinds(endDescriptors)
        let opened = endKinds.filter { $0.value > startKinds[$0.key] ?? 0 }
            .map { "\($0.value - (startKinds[$0.key] ?? 0)) more \($0.key)" }.sorted()

        for worker in workers { worker.channel.close() }
        monitor.close()
        for (_, entry) in servers { entry.server.close() }
        for transport in clients.values { await transport.shutdown(gracePeriod: .seconds(1)) }
        for entry in servers.values { await entry.transport.shutdown(gracePeriod: .seconds(1)) }

        // The report.
        let summary = ledger.summary()
        let faultLog = faults.all
        let problems = counters.problems.withLock { $0 }
        var passed = workersDone && problems.isEmpty
        print("")
        print("## Soak report")
        print("")
        print("- run: \((end - start).seconds.rounded()) s of load (\(settings.seconds) s asked), pairs (client -> server): \(backends.flatMap { c in backends.map { "\(c) -> \($0)" } }.joined(separator: ", ")), \(workers.count) workers; a fault every \(settings.faultInterval) s; stall timeout \(settings.stallTimeout) s; seed \(settings.seed)")
        print("- messages: \(counters.sent.load(ordering: .relaxed)) sent, \(summary.acknowledged) acknowledged (client count \(counters.acknowledged.load(ordering: .relaxed))), \(summary.delivered) delivered in order to the servers")
        print("- acknowledged but not delivered: \(summary.missing) (in \(summary.shortCalls) calls); delivered twice: \(summary.duplicates); out of order (gaps): \(summary.gaps); corrupt payloads: \(summary.corrupt); unknown calls: \(summary.unknownCalls)")
        print("- acknowledged per pair: \(counters.perPair.all.map { "\($0.0) \($0.1)" }.joined(separator: ", "))")
        print("- calls: \(counters.callsStarted.load(ordering: .relaxed)) started (\(summary.calls) numbered), \(counters.callsOK.load(ordering: .relaxed)) ended OK")
        print("- client calls and connects ended by reason: \(counters.clientEndings.all.map { "\($0.0) \($0.1)" }.joined(separator: "; "))")
        print("- server calls ended by reason: \(counters.serverEndings.all.map { "\($0.0) \($0.1)" }.joined(separator: "; "))")
        print("- faults injected: \(faultLog.count):")
        for kind in settings.faults {
            let ofKind = faultLog.filter { $0.kind == kind }
            let followed = ofKind.filter { $0.endings > 0 }
            let latest = followed.map(\.latest).max() ?? .zero
            let endings = ofKind.reduce(0) { $0 + $1.endings }
            var reasons: [String: Int] = [:]
            for entry in ofKind { reasons.merge(entry.reasons, uniquingKeysWith: +) }
            let byReason = reasons.sorted { $0.value != $1.value ? $0.value > $1.value : $0.key < $1.key }.map { "\($0.key) \($0.value)" }
            print("  - \(kind.rawValue): \(ofKind.count), \(endings) client call endings attributed to them (\(byReason.joined(separator: ", "))); \(ofKind.count - followed.count) followed by none; the longest from a fault to an ending attributed to it: \(milliseconds(latest)) ms")
        }
        let failedFaults = problems.filter { $0.hasPrefix("fault") }.count
        print("- descriptors: \(startDescriptors.count) at start, \(endDescriptors.count) at end\(opened.isEmpty ? " (the same kinds, as many of each)" : "; at end: \(opened.joined(separator: ", "))")")
        print("- RSS: \(startMemory.rss) KiB at start, \(endMemory.rss) KiB at end; anonymous \(startMemory.anon) KiB, \(endMemory.anon) KiB")
        if failedFaults > 0 { print("- faults that could not be injected: \(failedFaults)") }
        if settings.verbose {
            print("- every fault (seconds from the start, kind, detail, client call endings after it):")
            for entry in faultLog {
                print("  - \(format((entry.at - start).seconds)) s: \(entry.kind.rawValue), \(entry.detail): \(entry.reasons.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "))")
            }
        }
        if !summary.violations.isEmpty {
            passed = false
            print("- ledger violations (first \(summary.violations.count)):")
            for violation in summary.violations { print("  - \(violation)") }
        }
        let nonFaultProblems = problems.filter { !$0.hasPrefix("fault") }
        if !nonFaultProblems.isEmpty {
            print("- problems:")
            for problem in problems { print("  - \(problem)") }
        }
        if summary.missing > 0 || summary.duplicates > 0 || summary.gaps > 0 || summary.corrupt > 0 || summary.unknownCalls > 0 { passed = false }
        if !opened.isEmpty || endDescriptors.count > startDescriptors.count { passed = false }
        passed = passed && nonFaultProblems.isEmpty
        print("- verdict: \(passed ? "PASS" : "FAIL"): \(workersDone ? "no hang" : "HANG"), descriptors \(opened.isEmpty ? "back to the start" : "LEAKED"), ledger \(summary.missing + summary.duplicates + summary.gaps + summary.corrupt == 0 ? "every acknowledged message delivered once, in order" : "VIOLATED")")
        fflush(nil)
        return passed
    }

    /// One call of `messages` messages; whether it ended OK.
    static func oneCall(
        _ worker: Worker, messages: Int, ledger: Ledger, counters: Counters, faults: FaultLog, stopping: Flag,
        random: inout some RandomNumberGenerator
    ) async -> Bool {
        guard let number = ledger.newCall() else {
            counters.problem("the ledger is full")
            stopping.set()
            return false
        }
        counters.callsStarted.add(1, ordering: .relaxed)
        worker.progress.touch("connecting")
        // The sizes are drawn up front: the call's body runs on its loop, not here.
        let sizes = (0..<messages).map { _ in Int.random(in: worker.sizes, using: &random) }
        let acknowledged = Mutex<UInt32>(0)
        let window = worker.window
        do {
            try await worker.channel.withCall(options: CallConfiguration(maximumMessageSize: 1 << 20)) { call in
                worker.progress.touch("in a call")
                var sent = 0
                var acked = 0
                while acked < messages {
                    while sent < messages, sent - acked < window, !stopping.isSet {
                        call.call.send(Message.make(call: number, sequence: UInt32(sent), size: sizes[sent]))
                        counters.sent.add(1, ordering: .relaxed)
                        sent += 1
                    }
                    if sent == acked { break }  // stopping: nothing in flight
                    guard let reply = try await call.next() else {
                        throw SoakError("call \(number): the server ended the call after \(acked) of \(messages) acknowledgements")
                    }
                    guard let header = Message.header(reply), header.call == number, header.sequence == UInt32(acked) else {
                        throw SoakError("call \(number): acknowledgement \(reply) where \(acked) was expected")
                    }
                    acked += 1
                    acknowledged.withLock { $0 = UInt32(acked) }
                    counters.acknowledged.add(1, ordering: .relaxed)
                    counters.perPair.add(worker.pair)
                    worker.progress.touch("in a call")
                    // Paced: the machine is shared.
                    if acked % window == 0 { try await Task.sleep(for: .milliseconds(worker.bulk ? 4 : 2)) }
                }
                worker.progress.touch("finishing")
                try await call.finishSending()
                if let extra = try await call.next() {
                    throw SoakError("call \(number): \(extra.count) bytes after the last acknowledgement")
                }
                let status = await call.status()
                if let error = status.error { throw error }
            }
            ledger.ended(call: number, acknowledged: acknowledged.withLock { $0 })
            counters.callsOK.add(1, ordering: .relaxed)
            worker.progress.touch("call ended")
            return true
        } catch {
            ledger.ended(call: number, acknowledged: acknowledged.withLock { $0 })
            let now = ContinuousClock.now
            if let error = error as? TransportError {
                counters.clientEndings.add("\(error.code) (\(error.reason))")
                faults.callFailed(at: now, error: error)
            } else {
                counters.clientEndings.add("\(error)")
                counters.problem("\(worker.progress.name): \(error)")
            }
            worker.progress.touch("call failed")
            return false
        }
    }

    static func inject(
        _ kind: FaultKind, network: SoakNetwork,
        servers: [String: (transport: any Transport, lifecycle: Lifecycle, server: CallServer)],
        stall: Duration, active: inout Int, faults: FaultLog, counters: Counters, random: inout Xorshift
    ) async {
        let backend = backends.randomElement(using: &random)!
        let port = ports[backend]!
        let at = ContinuousClock.now
        do {
            switch kind {
            case .reset:
                faults.add(kind, at: at, "server \(backend)")
                try network.destroySockets(port: port)
            case .blackHole:
                faults.add(kind, at: at, "server \(backend)")
                try network.blackHole(port: port)
                try? await Task.sleep(for: stall * 2)
                try network.clearBlackHoles()
            case .networkSwitch:
                let from = network.paths[active], to = network.paths[1 - active]
                faults.add(kind, at: at, "\(from.link) -> \(to.link)")
                try network.switchNetwork(from: from, to: to)
                active = 1 - active
                try? await Task.sleep(for: .seconds(1))
                try network.bringUp(from)
            case .reclaimed:
                let replacement = Bool.random(using: &random) ? "a fresh socket" : "/dev/null"
                guard let fd = ProcessState.clientConnection(to: network.serverAddress, ports: Set(ports.values), using: &random) else {
                    counters.problem("fault \(kind.rawValue): no client connection found")
                    return
                }
                faults.add(kind, at: at, "descriptor \(fd), \(replacement)")
                let new = replacement == "/dev/null"
                    ? open("/dev/null", O_RDWR | O_CLOEXEC)
                    : socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
                guard new >= 0 else { throw SoakError("opening \(replacement) failed") }
                defer { close(new) }
                guard dup2(new, fd) == fd else { throw SoakError("dup2 over \(fd) failed") }
            case .suspend:
                let lifecycle = servers[backend]!.lifecycle
                faults.add(kind, at: at, "server \(backend)")
                await lifecycle.suspend()
                try? await Task.sleep(for: .milliseconds(1500))
                var resumed = false
                for _ in 0..<20 where !resumed {
                    do {
                        try await lifecycle.resume()
                        resumed = true
                    } catch {
                        try? await Task.sleep(for: .milliseconds(100))
                    }
                }
                if !resumed { throw SoakError("server \(backend) could not resume") }
            }
        } catch {
            counters.problem("fault \(kind.rawValue): \(error)")
        }
    }
}

/// A small seeded generator, so that a run's sizes and faults can be repeated.
struct Xorshift: RandomNumberGenerator, Sendable {
    private var state: UInt64
    init(seed: UInt64) { state = seed == 0 ? 0x9E37_79B9_7F4A_7C15 : seed }
    mutating func next() -> UInt64 {
        state ^= state << 13
        state ^= state >> 7
        state ^= state << 17
        return state
    }
}

func format(_ seconds: Double) -> String {
    let tenths = Int((seconds * 10).rounded())
    return "\(tenths / 10).\(tenths % 10)"
}

func milliseconds(_ duration: Duration) -> Int {
    Int((duration.seconds * 1000).rounded())
}

extension Duration {
    var seconds: Double {
        let (s, attoseconds) = components
        return Double(s) + Double(attoseconds) / 1e18
    }
}

func fail(_ message: String) -> Never {
    writeStandardError("soak: error: \(message)\n")
    exit(2)
}

/// Writes straight to descriptor 2 (the C `stderr` global is not concurrency-safe).
func writeStandardError(_ text: String) {
    var text = text
    text.withUTF8 { bytes in
        var offset = 0
        while offset < bytes.count {
            let n = write(2, bytes.baseAddress! + offset, bytes.count - offset)
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return }
            offset += n
        }
    }
}
