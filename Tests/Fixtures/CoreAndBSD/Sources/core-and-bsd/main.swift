// The README's first example, as written (the code between the doc-block markers is the
// README's block; DocumentationTests holds the two to each other), then a check of what it
// promises. scripts/test builds and runs it with Switchyard's traits off, where neither
// libuv1-dev nor libssl-dev is there.

import Switchyard
import SwitchyardBackends

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
guard reply == Array("hello".utf8) else { fatalError("echoed \(String(describing: reply))") }
print("core-and-bsd: echoed \"hello\" over \(transport.name); registered: \(Backends.registry.names.joined(separator: ", "))")
