import Switchyard
import SwitchyardCalls
import SwitchyardNetlink

// Connectivity changes on real links (DESIGN.md, behaviours 1 and 2): the rtnetlink
// monitor, made on a thread inside the client's namespace, watches a `wlan0-…` and a
// `wwan0-…` veth (`FaultNetwork.Layout.wifiAndCellular`), and a channel that follows it
// makes calls to a server behind both links. The changes are made with `ip` (a default
// route moved, links taken down and up, a link flapped in one `ip -batch`). Every socket
// pair runs them; they need root (and ip, nft), say so in one line and pass without it,
// and skip the in-memory backend, as the fault scenarios do.
//
// Each prints what it measured: the monitor's report after the `ip` command, and the
// calls' end after the report. The bounds: open calls end within 200 ms of the
// monitor's report; with no connectivity a new call fails at once (under 100 ms); a flap
// of 10 toggles in one batch is at most two reported changes.

/// How long after the monitor's report the open calls may take to end.
private let callEndBound: Duration = .milliseconds(200)
/// How long the monitor may take to report a change after the `ip` command: its debounce
/// (50 ms), a re-read of the tables, and a loaded machine.
private let reportBound: Duration = .seconds(2)

extension ConformanceScenario {
    /// 33. Wi-Fi to cellular: the monitor sees it, open calls end, the next call takes the new path.
    public static let networkSwitchEndsCalls = ConformanceScenario(
        "Moving the default route from a wlan0 link to a wwan0 link (the old link down): the netlink monitor reports wifi then cellular, the channel's open calls end with unavailable (connectivity changed) within 200 ms of the report, and a new call connects over the wwan0 link, from its address",
        checklist: ["J1", "J3"], timeLimit: .seconds(45), run: networkSwitch(.ipv4))

    /// 33 over `family`.
    static func networkSwitch(_ family: FaultNetwork.Family) -> @Sendable (ConformanceContext) async throws -> Void { { context in
        try await context.withMonitoredNetwork(family: family) { rig in
            let wifi = rig.wifi, cellular = rig.cellular
            let channel = rig.channel()
            defer { channel.close() }
            let active = try await rig.openCall(on: channel, seed: 33, over: wifi)
            let waiting = try await rig.openCall(on: channel, seed: 34, over: wifi)
            try await rig.base.hold(waiting)

            let command = KitClock.now
            try context.networkStep("moving the default route to \(cellular.link) and taking \(wifi.link) down") {
                try rig.network.routeDefault(via: cellular)
                try rig.network.setLink(wifi, up: false)
            }
            active.call.send(ConformancePattern.bytes(count: 1 << 20, seed: 33))
            let report = try await rig.report(after: 0, since: command, "the switch to \(cellular.link)") {
                $0 == cellular.monitoredPath(.cellular)
            }
            try context.expectEqual(
                rig.changes.all.map(\.path), [cellular.monitoredPath(.cellular)],
                "the monitor's changes after wifi (\(wifi.link))")
            try await rig.expectEnded(
                [("the call with data in flight", active), ("the call awaiting a reply", waiting)],
                reason: .connectivityChanged, report: report, command: command)
            try await rig.expectCallWorks(on: channel, over: cellular, "the first call after the switch")
        }
    } }

    /// 34. No link at all: none, a call fails at once; a link returns: calls work.
    public static let noConnectivityFailsCallsAtOnce = ConformanceScenario(
        "With every link down the netlink monitor reports none, the open call ends with unavailable (connectivity changed), a new call fails at once with unavailable (no connectivity), and when a link returns with a default route the monitor reports it and calls work again",
        checklist: ["J3", "J5"], timeLimit: .seconds(45)
    ) { context in
        try await context.withMonitoredNetwork { rig in
            let wifi = rig.wifi, cellular = rig.cellular
            let channel = rig.channel()
            defer { channel.close() }
            let open = try await rig.openCall(on: channel, seed: 35, over: wifi)

            let command = KitClock.now
            try context.networkStep("taking \(wifi.link) and \(cellular.link) down") {
                try rig.network.batch(["link set \(wifi.link) down", "link set \(cellular.link) down"])
            }
            let report = try await rig.report(after: 0, since: command, "every link down") { $0.category == .none }
            try await rig.expectEnded([("the open call", open)], reason: .connectivityChanged, report: report, command: command)

            let started = KitClock.now
            try await context.expectError(code: .unavailable, reason: .noConnectivity, "a new call with no connectivity", within: 2) {
                try await channel.startCall(handler: CallRecorder())
            }
            let failed = KitClock.now - started
            context.record("no connectivity", failed)
            context.log("with no connectivity a new call failed unavailable (no connectivity) in \(fineMilliseconds(failed))")
            try context.expect(failed < .milliseconds(100), "a new call with no connectivity took \(milliseconds(failed)) to fail; expected at once")

            let count = rig.changes.count
            let back = KitClock.now
            try context.networkStep("bringing \(cellular.link) up with a default route") {
                try rig.network.setLink(cellular, up: true)
                try rig.network.routeDefault(via: cellular)
            }
            _ = try await rig.report(after: count, since: back, "\(cellular.link) back with a default route") {
                $0 == cellular.monitoredPath(.cellular)
            }
            try await rig.expectCallWorks(on: channel, over: cellular, "the first call after the link returned")
        }
    }

    /// 35. A flapping link is one change (or two), and nothing breaks.
    public static let linkFlapIsOneChange = ConformanceScenario(
        "A link toggled ten times in one ip batch (within 50 ms) is at most two changes the netlink monitor reports, the channel stays usable, and closing the monitor leaves no descriptor open",
        checklist: ["J1", "G2"], timeLimit: .seconds(45)
    ) { context in
        try await context.withMonitoredNetwork { rig in
            let wifi = rig.wifi
            let channel = rig.channel()
            defer { channel.close() }
            let open = try await rig.openCall(on: channel, seed: 36, over: wifi)
            // Nothing pending before the flap: the monitor has reported nothing.
            try await KitClock.sleep(for: .milliseconds(100))
            try context.expectEqual(rig.changes.count, 0, "changes the monitor reported before the flap")

            let toggles = (0..<10).map { "link set \(wifi.link) \($0.isMultiple(of: 2) ? "down" : "up")" }
            let start = KitClock.now
            try context.networkStep("toggling \(wifi.link) ten times in one ip batch") { try rig.network.batch(toggles) }
            let flapTime = KitClock.now - start
            // The debounce reports a burst 50 ms after its last message, and holds a change
            // back at most 500 ms: a second is ample for everything the flap causes.
            try await KitClock.sleep(for: .seconds(1))
            let flap = rig.changes.all
            let list = flap.map { "\($0.path) at +\(milliseconds($0.at - start))" }.joined(separator: ", ")
            context.record("changes", count: flap.count)
            context.log("10 toggles of \(wifi.link) took \(milliseconds(flapTime)) (one ip -batch); the monitor reported \(flap.count) change(s): [\(list)]")
            try context.expect(flap.count <= 2, "a flap of 10 toggles was \(flap.count) reported changes; expected at most two: [\(list)]")
            // The link ends up, but its IPv4 default route went with its first down.
            try context.expectEqual(rig.monitor.current, .none, "the monitor's path after the flap (the link is up, its default route gone)")
            let status = try await context.status(of: open.recorder, "the open call after the flap", seconds: 2)
            context.record("open call", (open.recorder.closedAt ?? KitClock.now) - start)
            context.log("the open call: \(status.error.map(describe) ?? "OK") \(fineMilliseconds((open.recorder.closedAt ?? KitClock.now) - start)) after the batch began")
            try context.expectStatus(status, code: .unavailable, reason: .connectivityChanged, "the open call after the flap")
            try context.expectWellBehaved(open.recorder, "the open call after the flap")

            let routed = KitClock.now
            try context.networkStep("routing the default route over \(wifi.link) again") { try rig.network.routeDefault(via: wifi) }
            _ = try await rig.report(after: flap.count, since: routed, "the default route back on \(wifi.link)") {
                $0 == wifi.monitoredPath(.wifi)
            }
            try await rig.expectCallWorks(on: channel, over: wifi, "the first call after the flap")

            // Closing stops the monitor's thread and closes its socket and wake-up
            // descriptor before it returns (the runner checks that none is left open);
            // the last path stays.
            rig.closeMonitor()
            try context.expectEqual(rig.monitor.current, wifi.monitoredPath(.wifi), "the monitor's path after close")
        }
    }
}

/// A change the monitor reported, and when.
struct PathReport: Sendable {
    let at: ContinuousClock.Instant
    let path: ConnectivityPath
}

/// A fault network of the ``FaultNetwork/Layout/wifiAndCellular`` layout, with a netlink
/// monitor made inside the client's namespace and every change it reports.
struct MonitoredRig: Sendable {
    let base: FaultRig
    let monitor: any ConnectivityMonitor
    /// Closes the monitor (a netlink monitor's thread and socket).
    let closeMonitor: @Sendable () -> Void
    /// The changes the monitor reported since it was made.
    let changes: Collected<PathReport>

    var context: ConformanceContext { base.context }
    var network: any SwitchablePaths { base.switchable }
    var wifi: FaultNetwork.Path { network.paths[0] }
    var cellular: FaultNetwork.Path { network.paths[1] }

    /// A channel to the server that follows the monitor.
    func channel() -> CallChannel {
        CallChannel(target: base.target, transport: base.client, monitor: monitor)
    }

    /// A call on `channel`, one echo done, whose connection comes from `path`'s address.
    func openCall(
        on channel: CallChannel, seed: UInt64, over path: FaultNetwork.Path, file: String = #fileID, line: Int = #line
    ) async throws -> FaultRig.OpenCall {
        let open = try await base.openCall(on: channel, seed: seed)
        try context.expectEqual(
            open.call.connection.localAddress.host, path.clientAddress, "the source address of a call over \(path.link)",
            file: file, line: line)
        return open
    }

    /// Waits for a change after the first `index` ones that `matches`; logs how long
    /// after `command` it came. Fails after ``reportBound``.
    func report(
        after index: Int, since command: ContinuousClock.Instant, _ what: String,
        file: String = #fileID, line: Int = #line, _ matches: (ConnectivityPath) -> Bool
    ) async throws -> ContinuousClock.Instant {
        let deadline = command + reportBound
        while true {
            if let hit = changes.all.dropFirst(index).first(where: { matches($0.path) }) {
                context.record("monitor", hit.at - command)
                context.log("the monitor reported \(hit.path) \(milliseconds(hit.at - command)) after the ip command (\(what))")
                return hit.at
            }
            if KitClock.now >= deadline {
                let seen = changes.all.map(\.path.description).joined(separator: ", ")
                throw context.failure("the monitor did not report \(what) within \(reportBound) of the ip command; it reported [\(seen)], current \(monitor.current)", file: file, line: line)
            }
            try await KitClock.sleep(for: .milliseconds(1))
        }
    }

    /// Fails unless every call ended with `unavailable` (`reason`) within `bound` (by
    /// default ``callEndBound``) of the monitor's `report`; logs and records each time
    /// from the report and from the command, unless `logsEach` is false (for many calls,
    /// whose caller sums the times up).
    func expectEnded(
        _ calls: [(String, FaultRig.OpenCall)], reason: TransportError.Reason,
        report: ContinuousClock.Instant, command: ContinuousClock.Instant,
        bound: Duration = callEndBound, logsEach: Bool = true,
        file: String = #fileID, line: Int = #line
    ) async throws {
        for (name, open) in calls {
            let status = try await context.status(of: open.recorder, name, seconds: 2, file: file, line: line)
            let closed = open.recorder.closedAt ?? KitClock.now
            // The channel and this log observe the same report; the channel may be first.
            let afterReport = max(closed - report, .zero)
            if logsEach {
                context.record(measurementName(for: name), closed - command)
                context.log("\(name): \(status.error.map(describe) ?? "OK") \(fineMilliseconds(afterReport)) after the monitor's report, \(fineMilliseconds(closed - command)) after the ip command")
            }
            try context.expectStatus(status, code: .unavailable, reason: reason, name, file: file, line: line)
            try context.expect(
                afterReport <= bound,
                "\(name) ended \(milliseconds(afterReport)) after the monitor's report; the bound is \(milliseconds(bound))",
                file: file, line: line)
            try context.expectWellBehaved(open.recorder, name, file: file, line: line)
        }
    }

    /// Fails unless a new call on `channel` connects from `path`'s address and echoes.
    func expectCallWorks(
        on channel: CallChannel, over path: FaultNetwork.Path, _ what: String, file: String = #fileID, line: Int = #line
    ) async throws {
        let recorder = CallRecorder()
        let started = KitClock.now
        let call = try await context.startCall(on: channel, handler: recorder, file: file, line: line)
        let source = call.connection.localAddress.host
        call.send([3, 4, 5])
        call.finishSending()
        let status = try await context.status(of: recorder, what, seconds: 5, file: file, line: line)
        context.log("\(what): connected from \(source) and echoed in \(milliseconds(KitClock.now - started))")
        try context.expectEqual(source, path.clientAddress, "\(what): the source address (\(path.link)'s)", file: file, line: line)
        try context.expectOK(status, what, file: file, line: line)
        try context.expectEqual(recorder.snapshot.messages, [[3, 4, 5]], "\(what): the echo", file: file, line: line)
    }
}

extension ConformanceContext {
    /// Runs `body` with a ``MonitoredRig``: a fault network of the Wi-Fi and cellular
    /// layout, transports of this pair on both sides of it, and a netlink monitor made on
    /// a thread inside the client's namespace, whose path must start as wifi over the
    /// `wlan0-…` link. Skips as ``withFaultNetwork(_:_:)`` does. The monitor is closed
    /// afterwards, also when `body` fails. (With the ``FaultNetwork/Layout/twoWifi``
    /// layout, the rig's `cellular` path is the `wlan1-…` link.)
    func withMonitoredNetwork(
        _ layout: FaultNetwork.Layout = .wifiAndCellular, family: FaultNetwork.Family = .ipv4,
        _ body: @escaping @Sendable (MonitoredRig) async throws -> Void
    ) async throws {
        try await withFaultNetwork(layout, family: family) { rig in
            let network = rig.switchable
            let monitor: any ConnectivityMonitor, closeMonitor: @Sendable () -> Void
            do {
                (monitor, closeMonitor) = try await network.makeMonitor()
            } catch {
                try fail("could not start a connectivity monitor on the client's side: \(error)")
            }
            defer { closeMonitor() }
            let changes = Collected<PathReport>()
            let observation = monitor.observe { changes.append(PathReport(at: KitClock.now, path: $0)) }
            defer { observation.cancel() }
            let wifi = network.paths[0].monitoredPath(.wifi)
            try expectEqual(monitor.current, wifi, "the monitor's path at start")
            try await body(MonitoredRig(base: rig, monitor: monitor, closeMonitor: closeMonitor, changes: changes))
        }
    }
}

/// A duration in milliseconds with one decimal (sub-millisecond times), for the logs.
func fineMilliseconds(_ duration: Duration) -> String {
    let (seconds, attoseconds) = duration.components
    let tenths = seconds * 10_000 + attoseconds / 100_000_000_000_000
    return "\(tenths / 10).\(tenths % 10) ms"
}
