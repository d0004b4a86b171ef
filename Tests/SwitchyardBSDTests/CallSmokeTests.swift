import Switchyard
import SwitchyardBSD
import Testing

@Suite("Calls on the BSD backend", .serialized)
struct CallSmokeTests {
    @Test("A framed echo call returns every message and an OK status", arguments: [false, true])
    func echo(flowControl: Bool) async throws {
        let transport = try BSDTransport(configuration: TransportConfiguration(eventLoopCount: 2))
        let options = CallConfiguration(enableFlowControl: flowControl)
        let server = try await CallServer.start(transport: transport, on: Endpoint(host: "127.0.0.1", port: 0), options: options) { call in
            for try await message in call.messages {
                // The async face runs on the call's loop: no hop to the global pool.
                precondition(call.call.eventLoop.inEventLoop, "the server's async face left the call's loop")
                try await call.write(message)
            }
            return .ok
        }
        let channel = CallChannel(target: server.localAddress, transport: transport)
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
}
