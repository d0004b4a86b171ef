import Switchyard
import SwitchyardCalls
import SwitchyardMemory
import Synchronization
import Testing

/// A ``CallChannel`` following a ``ManualConnectivityMonitor`` at a path change, over
/// the in-memory backend, whose connections take the address they were made to (so a
/// call to 10.1.0.5 is "from" 10.1.0.5, an address of the reported path).
/// No root needed: the namespace scenarios (38, 39) do the same with real links.
@Suite("A CallChannel at a path change, driven by a ManualConnectivityMonitor", .serialized, .timeLimit(.minutes(1)))
struct ChannelPathChangeTests {
    let wlan0 = ConnectivityPath(category: .wifi, interface: "wlan0", addresses: ["10.1.0.5"])
    let wlan1 = ConnectivityPath(category: .wifi, interface: "wlan1", addresses: ["10.2.0.7"])

    @Test("Calls on the old path end unavailable (path changed) within 100 ms of the report, a loopback call goes on, the next call works")
    func pathChange() async throws {
        let client = try MemoryTransport(configuration: .init(eventLoopCount: 2))
        let server = try MemoryTransport(configuration: .init(eventLoopCount: 2))
        let echo: @Sendable (Call) -> any CallHandler = { _ in EchoHandler() }
        let wifiServer = try await CallServer.start(transport: server, on: Endpoint(host: "10.1.0.5", port: 0), makeHandler: echo)
        let loopServer = try await CallServer.start(transport: server, on: Endpoint(host: "127.0.0.1", port: 0), makeHandler: echo)
        let monitor = ManualConnectivityMonitor(initial: wlan0)
        let channel = CallChannel(
            target: Endpoint(host: "10.1.0.5", port: wifiServer.localAddress.port), transport: client, monitor: monitor)
        let loopChannel = CallChannel(
            target: Endpoint(host: "127.0.0.1", port: loopServer.localAddress.port), transport: client, monitor: monitor)

        let onPath = try await Self.openCall(on: channel)
        let loopback = try await Self.openCall(on: loopChannel)
        #expect(onPath.call.connection.localAddress.host == "10.1.0.5")

        // A new address alone ends nothing.
        var more = wlan0
        more.addresses.insert("10.1.0.6")
        monitor.report(more)
        try await Task.sleep(for: .milliseconds(50))
        #expect(onPath.recorder.status == nil)
        #expect(channel.openCalls == 1)

        let reported = ContinuousClock.now
        monitor.report(wlan1)
        let status = try #require(await onPath.recorder.waitForStatus(seconds: 2))
        let elapsed = try #require(onPath.recorder.closedAt) - reported
        #expect(status.error?.code == .unavailable)
        #expect(status.error?.reason == .pathChanged, "\(status)")
        #expect(elapsed < .milliseconds(100), "the call ended \(elapsed) after the report")

        // The loopback call goes on and echoes.
        #expect(loopback.recorder.status == nil)
        let echoed = loopback.recorder.messageCount
        loopback.call.send([7])
        #expect(await loopback.recorder.waitForMessages(echoed + 1, seconds: 2))

        // The next call on the changed channel connects afresh and works.
        let next = try await Self.openCall(on: channel)
        #expect(next.recorder.status == nil)

        // A category change ends every call, the loopback one too.
        monitor.report(ConnectivityPath(category: .cellular, interface: "wwan0", addresses: ["100.64.0.9"]))
        for open in [next, loopback] {
            let ended = try #require(await open.recorder.waitForStatus(seconds: 2))
            #expect(ended.error?.reason == .connectivityChanged, "\(ended)")
        }

        channel.close()
        loopChannel.close()
        wifiServer.closeNow()
        loopServer.closeNow()
        await client.shutdownNow()
        await server.shutdownNow()
    }

    @Test("An address of the path gone ends only the calls from it")
    func addressGone() async throws {
        let client = try MemoryTransport(configuration: .init(eventLoopCount: 1))
        let server = try MemoryTransport(configuration: .init(eventLoopCount: 1))
        let echo: @Sendable (Call) -> any CallHandler = { _ in EchoHandler() }
        let first = try await CallServer.start(transport: server, on: Endpoint(host: "10.1.0.5", port: 0), makeHandler: echo)
        let second = try await CallServer.start(transport: server, on: Endpoint(host: "10.1.0.6", port: 0), makeHandler: echo)
        let both = ConnectivityPath(category: .wifi, interface: "wlan0", addresses: ["10.1.0.5", "10.1.0.6"])
        let monitor = ManualConnectivityMonitor(initial: both)
        let oldAddress = CallChannel(target: Endpoint(host: "10.1.0.5", port: first.localAddress.port), transport: client, monitor: monitor)
        let newAddress = CallChannel(target: Endpoint(host: "10.1.0.6", port: second.localAddress.port), transport: client, monitor: monitor)
        let gone = try await Self.openCall(on: oldAddress)
        let kept = try await Self.openCall(on: newAddress)

        monitor.report(ConnectivityPath(category: .wifi, interface: "wlan0", addresses: ["10.1.0.6"]))
        let status = try #require(await gone.recorder.waitForStatus(seconds: 2))
        #expect(status.error?.reason == .pathChanged, "\(status)")
        try await Task.sleep(for: .milliseconds(50))
        #expect(kept.recorder.status == nil)

        oldAddress.close()
        newAddress.close()
        first.closeNow()
        second.closeNow()
        await client.shutdownNow()
        await server.shutdownNow()
    }

    /// A call on `channel` with one echo done.
    private static func openCall(on channel: CallChannel) async throws -> (call: Call, recorder: StatusRecorder) {
        let recorder = StatusRecorder()
        let call = try await channel.startCall(handler: recorder)
        call.send([1, 2, 3])
        let echoed = await recorder.waitForMessages(1, seconds: 2)
        try #require(echoed, "the first echo arrived")
        return (call, recorder)
    }
}

/// Echoes every message (server side).
private final class EchoHandler: CallHandler {
    func call(_ call: Call, didReceive message: [UInt8]) { call.send(message) }
    func callDidReceiveEnd(_ call: Call) { call.finish() }
    func call(_ call: Call, didCloseWith status: CallStatus) {}
}

/// Counts a client call's messages and keeps its status and when it came.
private final class StatusRecorder: CallHandler {
    private struct State {
        var messages = 0
        var status: CallStatus?
        var closedAt: ContinuousClock.Instant?
    }
    private let state = Mutex(State())

    var messageCount: Int { state.withLock { $0.messages } }
    var status: CallStatus? { state.withLock { $0.status } }
    var closedAt: ContinuousClock.Instant? { state.withLock { $0.closedAt } }

    func call(_ call: Call, didReceive message: [UInt8]) { state.withLock { $0.messages += 1 } }
    func call(_ call: Call, didCloseWith status: CallStatus) {
        state.withLock { state in
            guard state.status == nil else { return }
            state.status = status
            state.closedAt = .now
        }
    }

    func waitForStatus(seconds: Int) async -> CallStatus? {
        let deadline = ContinuousClock.now + .seconds(seconds)
        while ContinuousClock.now < deadline {
            if let status { return status }
            try? await Task.sleep(for: .milliseconds(1))
        }
        return status
    }

    func waitForMessages(_ count: Int, seconds: Int) async -> Bool {
        let deadline = ContinuousClock.now + .seconds(seconds)
        while messageCount < count, ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(1))
        }
        return messageCount >= count
    }
}
