import Foundation
import Switchyard
import SwitchyardBackends
import Testing

/// The README's first example, compiled and run as written: the text between the markers
/// below must be the README's first Swift block (after its imports), so neither can
/// change without the other.
@Suite("The README's examples")
struct ReadmeExampleTests {
    @Test("The first example runs as written and gets its echo", .timeLimit(.minutes(1)))
    func firstExample() async throws {
        // README block 1 begin
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
        // README block 1 end
        #expect(reply == Array("hello".utf8))
    }

    @Test("The README's first Swift block is the one this test runs")
    func firstBlockMatches() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let readme = try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
        let test = try String(contentsOf: URL(fileURLWithPath: #filePath), encoding: .utf8)
        let block = try #require(readme.components(separatedBy: "```swift\n").dropFirst().first?.components(separatedBy: "```").first)
        let code = block.split(separator: "\n", omittingEmptySubsequences: false)
            .drop { $0.hasPrefix("import ") || $0.isEmpty }
            .joined(separator: "\n")
        let marked = try #require(test.components(separatedBy: "// README block 1 begin\n").dropFirst().first?.components(separatedBy: "        // README block 1 end").first)
        let unindented = marked.split(separator: "\n", omittingEmptySubsequences: false)
            .map { $0.hasPrefix("        ") ? String($0.dropFirst(8)) : String($0) }
            .joined(separator: "\n")
        #expect(unindented == code, "README.md's first Swift block and the test's copy differ")
    }
}
