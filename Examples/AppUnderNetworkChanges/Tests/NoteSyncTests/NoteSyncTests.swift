import NoteSync
import Switchyard
import SwitchyardCalls
import SwitchyardSimulation
import Testing

/// `NoteSync` on a simulated network, in virtual time: a phone sends 12 notes, 150 ms
/// apart, while its path moves from Wi-Fi to cellular (at 600 ms), its connection then
/// stalls without a word (at 1.2 s: a middlebox on the path lost its state), and the app
/// goes to the background for 30 s after the 8th note. Every note must be acknowledged,
/// by its own text; the stalled one after keepalive found the stall and `NoteSync` sent
/// it again on a fresh connection; a note tried while suspended fails at once.
@Suite(.timeLimit(.minutes(2)))
struct NoteSyncTests {
    @Test("every note of the day is acknowledged across the switch, the stall and the suspension; the same seed replays the same event log")
    func dayReplays() async throws {
        // doc-block begin
        let first = try SimulatedNetwork(seed: 42, link: link)
        let monday = try await day(on: first)
        let again = try SimulatedNetwork(seed: 42, link: link)
        #expect(try await day(on: again) == monday)
        #expect(again.eventLog == first.eventLog)            // line for line
        // doc-block end
        #expect(monday.whileSuspended?.code == .unavailable)
    }

    @Test("a thousand seeds of the day: every note acknowledged in each")
    func thousandSeeds() async throws {
        let started = ContinuousClock.now
        // doc-block begin
        let failure = try await SimulatedNetwork.sweep(seeds: 1...1_000, link: link) { network in
            _ = try await day(on: network)
        }
        #expect(failure == nil, "\(String(describing: failure))")   // names the seed to replay
        // doc-block end
        print("NoteSync: 1,000 seeds of a day across a switch and a stall in \(ContinuousClock.now - started) of wall-clock time")
    }
}

/// The links between the hosts: 30 ms one way, plus up to 20 ms of jitter from the seed.
let link = SimulatedLink(latency: .milliseconds(30), jitter: .milliseconds(20))

/// What one day did: each note's acknowledgement and calls, and when the day ended.
struct Day: Equatable {
    var acknowledgements: [String] = []
    var calls: [Int] = []
    /// How a note tried while the app was suspended failed.
    var whileSuspended: TransportError?
    var endedAt: Duration = .zero
}

/// Runs the day on `network`; throws at the first broken promise (a sweep sees it).
func day(on network: SimulatedNetwork) async throws -> Day {
    // doc-block begin
    let wifi = ConnectivityPath(category: .wifi, interface: "wlan0", addresses: ["10.0.1.2"])
    let cellular = ConnectivityPath(category: .cellular, interface: "wwan0", addresses: ["10.0.2.2"])
    let monitor = SimulatedConnectivityMonitor(network: network, path: wifi)
    let phone = try SimulationTransport(network: network, following: monitor)
    let cloud = try SimulationTransport(network: network, host: "10.0.100.1")

    let day = try await network.run {          // on the network's clock: seconds take milliseconds
        let pings = KeepaliveEnforcement(minimumPingInterval: .milliseconds(500), permitWithoutCalls: true)
        let notes = try await CallServer.start(
            transport: cloud, on: Endpoint(host: "10.0.100.1", port: 443),
            configuration: CallServerConfiguration(keepaliveEnforcement: pings)
        ) { call in
            for try await note in call.messages { try await call.write(note) }   // acknowledges
            return .ok
        }
        let keepalive = Keepalive(time: .seconds(1), timeout: .seconds(1), permitWithoutCalls: true)
        let channel = CallChannel(
            target: notes.localAddress, transport: phone, monitor: monitor,
            configuration: ChannelConfiguration(keepalive: keepalive))
        let sync = NoteSync(channel: channel)
        let app = Lifecycle(clock: phone.clock)      // the app's suspend and resume
        let registration = app.register(channel)

        monitor.schedule(cellular, at: .milliseconds(600))                        // Wi-Fi to cellular
        network.schedule(.stallConnections(host: "10.0.100.1"), at: .seconds(1.2)) // a silent stall

        var day = Day()
        for number in 0..<12 {
            let (acknowledgement, calls) = try await sync.send("note \(number)")
            day.acknowledgements.append(acknowledgement)
            day.calls.append(calls)
            try await phone.clock.sleep(until: phone.clock.now + .milliseconds(150))
            if number == 7 {                         // to the background for 30 s
                await app.suspend()
                do {
                    _ = try await sync.send("while suspended")
                } catch let error as TransportError {
                    day.whileSuspended = error
                }
                try await phone.clock.sleep(until: phone.clock.now + .seconds(30))
                try await app.resume()
            }
        }
        day.endedAt = network.now
        registration.cancel()
        channel.close()
        notes.closeNow()
        await phone.shutdownNow()
        await cloud.shutdownNow()
        return day
    }
    // doc-block end
    try #require(day.acknowledgements == (0..<12).map { "note \($0)" }, "\(day.acknowledgements), \(network)")
    try #require(day.calls.contains(2), "no note needed a second call: the stall was not found (\(day.calls)), \(network)")
    try #require(day.calls.allSatisfy { $0 <= 2 }, "\(day.calls), \(network)")
    try #require(day.whileSuspended?.reason == .suspended, "while suspended: \(String(describing: day.whileSuspended)), \(network)")
    // 30 s in the background and a few seconds of notes: a day much longer waited on
    // something that never came (the channel's 30-minute idle timer, say).
    try #require(day.endedAt > .seconds(30) && day.endedAt < .seconds(40), "the day took \(day.endedAt) of virtual time, \(network)")
    let log = network.eventLog
    try #require(log.contains { $0.hasSuffix("path wifi (wlan0) > cellular (wwan0)") }, "\(network)")
    try #require(log.contains { $0.contains("connect 10.0.2.2:") }, "no connection over cellular, \(network)")
    return day
}
