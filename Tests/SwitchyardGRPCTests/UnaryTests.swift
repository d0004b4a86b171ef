import GRPCCore
import Switchyard
import SwitchyardGRPC
import Testing

@Suite("Every RPC kind, metadata and status over SwitchyardGRPC", .serialized, .timeLimit(.minutes(2)))
struct RPCKindTests {
    @Test("Unary, client streaming, server streaming and bidirectional RPCs", arguments: Backend.allCases)
    func everyKind(backend: Backend) async throws {
        try await withEcho(server: try backend.transport(), client: try backend.transport()) { client, probe, _ in
            let coder = BytesCoder()
            let unary = try await client.get(Array("hello".utf8))
            #expect(try unary.message == Array("hello".utf8))

            let collected = try await client.clientStreaming(
                request: StreamingClientRequest(of: [UInt8].self) { writer in
                    for part in ["a", "bc", "def"] { try await writer.write(Array(part.utf8)) }
                },
                descriptor: EchoService.collect, serializer: coder, deserializer: coder, options: .defaults
            ) { try $0.message }
            #expect(collected == Array("abcdef".utf8))

            let expanded = try await client.serverStreaming(
                request: ClientRequest(message: [7, 8], metadata: ["count": "5"]),
                descriptor: EchoService.expand, serializer: coder, deserializer: coder, options: .defaults
            ) { response in
                var messages: [[UInt8]] = []
                for try await message in response.messages { messages.append(message) }
                return messages
            }
            #expect(expanded == Array(repeating: [7, 8], count: 5))

            let echoed = try await client.bidirectionalStreaming(
                request: StreamingClientRequest(of: [UInt8].self) { writer in
                    for index in 0..<10 { try await writer.write([UInt8(index)]) }
                },
                descriptor: EchoService.update, serializer: coder, deserializer: coder, options: .defaults
            ) { response in
                var messages: [[UInt8]] = []
                for try await message in response.messages { messages.append(message) }
                return messages
            }
            #expect(echoed == (0..<10).map { [UInt8($0)] })
            #expect(probe.started == 4)
        }
    }

    @Test("Request metadata reaches the server; its response metadata and trailers come back, strings and -bin values", arguments: Backend.allCases)
    func metadata(backend: Backend) async throws {
        try await withEcho(server: try backend.transport(), client: try backend.transport()) { client, _, _ in
            var metadata: Metadata = [:]
            metadata.addString("hello", forKey: "x-text")
            metadata.addString("again", forKey: "x-text")
            metadata.addBinary([0, 1, 2, 0xff, 0x80], forKey: "x-data-bin")
            metadata.addString("not echoed", forKey: "other")
            let response = try await client.get([1], metadata: metadata)
            for received in [response.metadata, response.trailingMetadata] {
                #expect(Array(received[stringValues: "x-text"]) == ["hello", "again"])
                #expect(Array(received[binaryValues: "x-data-bin"]) == [[0, 1, 2, 0xff, 0x80]])
                #expect(Array(received[stringValues: "other"]).isEmpty)
            }
        }
    }

    @Test("Every status code a handler throws reaches the client with its message", arguments: Backend.allCases)
    func statusCodes(backend: Backend) async throws {
        try await withEcho(server: try backend.transport(), client: try backend.transport()) { client, _, _ in
            for raw in 1...16 {
                let code = try #require(Status.Code(rawValue: raw))
                let message = "failed with \(code) on purpose"
                let error = await #expect(throws: RPCError.self) {
                    try await client.get([1], metadata: ["fail-code": "\(raw)", "fail-message": "\(message)"]).message
                }
                #expect(error?.code == RPCError.Code(code), "\(String(describing: error))")
                #expect(error?.message == message, "\(String(describing: error))")
            }
        }
    }

    @Test("A 4 MiB message goes both ways", arguments: Backend.allCases)
    func largeMessage(backend: Backend) async throws {
        try await withEcho(server: try backend.transport(), client: try backend.transport()) { client, _, _ in
            let message = bytes(4 << 20)
            let response = try await client.get(message)
            #expect(try response.message == message)
        }
    }

    @Test("100 concurrent RPCs share one connection", arguments: Backend.allCases)
    func concurrent(backend: Backend) async throws {
        try await withEcho(server: try backend.transport(), client: try backend.transport()) { client, probe, _ in
            try await withThrowingTaskGroup(of: Bool.self) { group in
                for index in 0..<100 {
                    group.addTask {
                        let message = bytes(1000 + index, seed: UInt8(truncatingIfNeeded: index))
                        return try await client.get(message).message == message
                    }
                }
                var good = 0
                for try await ok in group where ok { good += 1 }
                #expect(good == 100)
            }
            #expect(probe.started == 100)
            #expect(Set(probe.peers).count == 1, "the RPCs came from \(Set(probe.peers))")
        }
    }

    @Test("An unknown method ends unimplemented", arguments: [Backend.bsd])
    func unknownMethod(backend: Backend) async throws {
        try await withEcho(server: try backend.transport(), client: try backend.transport()) { client, _, _ in
            let error = await #expect(throws: RPCError.self) {
                try await client.unary(
                    request: ClientRequest(message: [1]), descriptor: MethodDescriptor(fullyQualifiedService: "echo.Echo", method: "Nope"),
                    serializer: BytesCoder(), deserializer: BytesCoder(), options: .defaults
                ) { try $0.message }
            }
            #expect(error?.code == .unimplemented)
        }
    }
}
