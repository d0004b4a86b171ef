import Switchyard
import SwitchyardBackends
import SwitchyardCalls
import Testing

/// The Swift blocks of the core's articles on calls (`Calls*.md` in
/// Sources/Switchyard/Switchyard.docc), compiled and run: the code between each pair of
/// doc-block markers is a block of an article (``DocumentationBlockTests`` holds them to
/// each other), with what the block leaves implicit set up before it and what it promises
/// checked after it.
@Suite("The calls articles' examples", .serialized)
struct CallsArticleExampleTests {
    @Test("Calls, messages and channels: a call server echoes a message over a channel and the call ends OK", .timeLimit(.minutes(1)))
    func callExample() async throws {
        let transport = try Backends.makeTransport(named: "bsd")
        // doc-block begin
        let server = try await CallServer.start(transport: transport, on: Endpoint(host: "127.0.0.1", port: 0),
                                                options: CallConfiguration(enableFlowControl: true)) { call in
            for try await message in call.messages { try await call.write(message) }  // echo
            return .ok
        }
        let channel = CallChannel(target: server.localAddress, transport: transport)
        let status = try await channel.withCall(options: CallConfiguration(enableFlowControl: true)) { call in
            try await call.write(Array("ping".utf8))     // returns once the message is in the kernel
            try await call.finishSending()
            for try await reply in call.messages { print(reply) }
            return await call.status()                   // .ok, or the error that ended the call
        }
        // doc-block end
        #expect(status == .ok)
        channel.close()
        server.close()
        await transport.shutdown(gracePeriod: .seconds(1))
    }

    @Test("Flow control for calls: a sender paced by a slow reader delivers all 4 MiB", .timeLimit(.minutes(1)))
    func flowControl() async throws {
        let transport = try Backends.makeTransport(named: "bsd")
        // doc-block begin
        let options = CallConfiguration(enableFlowControl: true)
        let server = try await CallServer.start(transport: transport, on: Endpoint(host: "127.0.0.1", port: 0), options: options) { call in
            var received = 0
            for try await message in call.messages {          // each step asks for one message
                received += message.count
                try await Task.sleep(for: .milliseconds(1))    // a slow consumer
            }
            try await call.write(Array("\(received)".utf8))
            return .ok
        }
        let channel = CallChannel(target: server.localAddress, transport: transport)
        let reply = try await channel.withCall(options: options) { call in
            for _ in 0..<64 { try await call.write([UInt8](repeating: 7, count: 64 * 1024)) }   // 4 MiB in all
            try await call.finishSending()
            var reply: [UInt8] = []
            for try await message in call.messages { reply += message }
            return String(decoding: reply, as: UTF8.self)      // "4194304"
        }
        // doc-block end
        #expect(reply == "4194304")
        channel.close()
        server.close()
        await transport.shutdown(gracePeriod: .seconds(1))
    }
}
