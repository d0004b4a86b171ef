import Switchyard
import SwitchyardBackends
import Testing

/// The README's Swift block, compiled and run as written: the code between the doc-block
/// markers is the block of README.md (``DocumentationBlockTests`` holds them to each
/// other; the core's Getting started article shows it too), with what the block promises
/// checked after it.
@Suite("The README's example", .serialized)
struct ReadmeExampleTests {
    @Test("Use it: the first example runs as written and gets its echo", .timeLimit(.minutes(1)))
    func firstExample() async throws {
        // doc-block begin
        let transport = try Backends.makeTransport(named: "bsd")  // nil: SWITCHYARD_BACKEND, else "bsd"
        let listener = try await transport.listen(on: Endpoint(host: "127.0.0.1", port: 0))
        listener.acceptConnections { connection in    // the server: echo what each peer sends
            Task {
                let peer = AsyncConnection(connection)
                while let bytes = try await peer.read() { try await peer.write(bytes) }
                peer.close()
            }
        }

        let client = AsyncConnection(try await transport.connect(to: listener.localAddress))
        try await client.write(Array("hello".utf8))   // returns once the bytes are in the kernel
        let reply = try await client.read()            // "hello" (nil at end of stream)
        client.close()

        await transport.shutdown(gracePeriod: .seconds(1))
        // doc-block end
        #expect(reply == Array("hello".utf8))
    }
}
