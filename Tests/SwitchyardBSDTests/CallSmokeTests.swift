import Switchyard
import SwitchyardBSD
import Synchronization
import Testing

@Suite("Calls on the BSD backend", .serialized)
struct CallSmokeTests {
    @Test("A framed echo call returns every message and an OK status", arguments: [false, true])
    func echo(flowControl: Bool) async throws {
        let transport = try BSDTransport(configuration: TransportConfiguration(eventLoopCount: 2))
        let options = CallOptions(enableFlowControl: flowControl)
        let server = try await CallServer.start(transport: transport, on: Endpoint(host: "127.0.0.1", port: 0), options: options) { call in
            for try await message in call.messages {
                // The async face runs on the call's loop: no hop to the global pool.
                precondition(call.call.eventLoop.inEventLoop, "the server's async face left the call's loop")
                try await call.write(message)
            }
            return .ok
        }
        let channel = Channel(target: server.localAddress, transport: transport)
        let sizes = [0, 1, 100, 65_536, 1_000_000]
        let (replies, status) = try await channel.withCall(options: options) { call in
            for size in sizes { try await call.write((0..<size).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ size) }) }
            try await call.finishSending()
            var replies: [[UInt8]] = []
            for try await message in call.messages {
                #expect(call.call.eventLoop.inEventLoop, "the client's async face left the call's loop")
                replies.append(message)
            }
            return (replies, await call.status())
        }
        #expect(status.isOK)
        #expect(replies.map(\.count) == sizes)
        for (size, reply) in zip(sizes, replies) {
            #expect(reply == (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ size) })
        }
        server.close()
        await transport.shutdownNow()
    }

    @Test("A handler echoing one message at a time with flow control on hears one didWriteData per message, never inside its own calls")
    func handlerEchoOneAtATime() async throws {
        let transport = try BSDTransport(configuration: TransportConfiguration(eventLoopCount: 1))
        let probe = OneAtATimeEcho.Probe()
        // The first message is asked for by the policy: the handler has no earlier event.
        let server = try await CallServer.start(
            transport: transport, on: Endpoint(host: "127.0.0.1", port: 0),
            options: CallOptions(enableFlowControl: true, flowController: FirstAskedFlowController())
        ) { _ in OneAtATimeEcho(probe: probe) }
        let channel = Channel(target: server.localAddress, transport: transport)
        let count = 300
        let messages = (0..<count).map { i in (0..<(i % 97)).map { UInt8(truncatingIfNeeded: $0 &+ i) } }
        let (replies, status) = try await channel.withCall(options: CallOptions()) { call in
            // All at once without waiting: many frames arrive in one read, so the server
            // handles several messages in one turn.
            for message in messages { call.call.send(message) }
            try await call.finishSending()
            var replies: [[UInt8]] = []
            for try await message in call.messages { replies.append(message) }
            return (replies, await call.status())
        }
        #expect(status.isOK)
        #expect(replies == messages)
        let seen = probe.state.withLock { $0 }
        #expect(seen.received == count)
        #expect(seen.writeReports == count)
        #expect(seen.reentered == [], "a callback ran inside a call the handler made")
        server.close()
        await transport.shutdownNow()
    }
}

/// Manual flow control with one message asked for from the start.
private struct FirstAskedFlowController: FlowController {
    private var manual = ManualFlowController()
    init() { manual.request(1) }
    var reportsWrites: Bool { manual.reportsWrites }
    var mayDeliver: Bool { manual.mayDeliver }
    mutating func didDeliver(bytes: Int) { manual.didDeliver(bytes: bytes) }
    mutating func request(_ count: Int) { manual.request(count) }
}

/// Echoes each message from `didReceive` and asks for the next from `didWriteData`,
/// noting any callback that runs while it is inside a call to the `Call`.
private final class OneAtATimeEcho: CallHandler {
    struct Seen: Sendable {
        var received = 0
        var writeReports = 0
        var reentered: [String] = []
    }
    final class Probe: Sendable {
        let state = Mutex(Seen())
    }
    let probe: Probe
    private let insideCall = Atomic<Bool>(false)

    init(probe: Probe) { self.probe = probe }

    private func enter(_ callback: String) {
        if insideCall.load(ordering: .relaxed) { probe.state.withLock { $0.reentered.append(callback) } }
    }

    private func calling(_ body: () -> Void) {
        insideCall.store(true, ordering: .relaxed)
        body()
        insideCall.store(false, ordering: .relaxed)
    }

    func call(_ call: Call, didReceive message: [UInt8]) {
        enter("didReceive")
        probe.state.withLock { $0.received += 1 }
        calling { call.send(message) }
    }

    func callDidWriteData(_ call: Call) {
        enter("didWriteData")
        probe.state.withLock { $0.writeReports += 1 }
        calling { call.receiveNextMessage() }
    }

    func callDidReceiveEnd(_ call: Call) {
        enter("didReceiveEnd")
        calling { call.finish(.ok) }
    }

    func call(_ call: Call, didCloseWith status: CallStatus) {
        enter("didClose")
    }
}
