import Foundation
import GRPCCore
import Switchyard
import SwitchyardGRPC
import Testing

/// gzip against grpcio (python3's `grpc`, a C-core peer): its server and client, with
/// `grpc.Compression.Gzip`, and SwitchyardGRPC on the other side counting its bytes.
@Suite("Compression against grpcio", .serialized, .timeLimit(.minutes(2)))
struct CompressionGRPCIOTests {
    /// An echo server for `/echo.Echo/Get` (bytes in, the same bytes out) that compresses
    /// its responses with gzip: prints its port, serves until standard input closes.
    static let server = """
        import concurrent.futures, sys, grpc
        handler = grpc.method_handlers_generic_handler(
            "echo.Echo", {"Get": grpc.unary_unary_rpc_method_handler(lambda request, context: request)})
        server = grpc.server(concurrent.futures.ThreadPoolExecutor(2), compression=grpc.Compression.Gzip)
        server.add_generic_rpc_handlers((handler,))
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        print(port, flush=True)
        sys.stdin.read()
        server.stop(0)
        """

    /// A client that calls `/echo.Echo/Get` at the port in argv[1] with 64 KiB, its
    /// requests compressed with gzip; prints `ok` if the echo matches.
    static let client = """
        import sys, grpc
        message = bytes((i * 31 + 7) % 256 for i in range(65536))
        with grpc.insecure_channel("127.0.0.1:" + sys.argv[1], compression=grpc.Compression.Gzip) as channel:
            reply = channel.unary_unary("/echo.Echo/Get")(message, timeout=20)
        print("ok" if reply == message else "mismatch %d" % len(reply), flush=True)
        """

    static var available: Bool {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-c", "import grpc"]
        process.standardError = FileHandle.nullDevice
        guard (try? process.run()) != nil else { return false }
        process.waitUntilExit()
        return process.terminationStatus == 0
    }

    @Test("Our client to grpcio's server: the request goes gzip, and grpcio's gzip reply is read", .enabled(if: available))
    func clientToGRPCIO() async throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-c", Self.server]
        let input = Pipe()
        let output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        try process.run()
        defer {
            try? input.fileHandleForWriting.close()
            process.waitUntilExit()
        }
        let port = try #require(Self.readLine(output.fileHandleForReading).flatMap(Int.init))
        let counting = CountingTransport(try Backend.bsd.transport())
        let config = SwitchyardClientTransport.Config.defaults { $0.compression = .init(algorithm: .gzip, enabledAlgorithms: .gzip) }
        try await withGRPCClient(
            transport: .switchyard(target: Endpoint(host: "127.0.0.1", port: port), transport: counting, config: config)
        ) { client in
            let reply = try await client.get(CompressionTests.message)
            #expect(try reply.message == CompressionTests.message)
        }
        await counting.shutdownNow()
        let written = counting.written.load(ordering: .acquiring)
        let read = counting.read.load(ordering: .acquiring)
        #expect(written < 8 * 1024, "the client wrote \(written) bytes for a 64 KiB request")
        #expect(read < 8 * 1024, "the client read \(read) bytes for a 64 KiB reply")
    }

    @Test("grpcio's client to our server: its gzip request is read, and the reply goes gzip", .enabled(if: available))
    func grpcioToServer() async throws {
        let counting = CountingTransport(try Backend.bsd.transport())
        let server = SwitchyardServerTransport(
            address: Endpoint(host: "127.0.0.1", port: 0), transport: counting, config: CompressionTests.gzipServer)
        let grpcServer = GRPCServer(transport: server, services: [EchoService()])
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await grpcServer.serve() }
            let port = try await server.listeningAddress.port
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = ["python3", "-c", Self.client, String(port)]
            let output = Pipe()
            process.standardOutput = output
            try process.run()
            let line = Self.readLine(output.fileHandleForReading)
            process.waitUntilExit()
            #expect(line == "ok")
            grpcServer.beginGracefulShutdown()
            try await group.waitForAll()
        }
        await counting.shutdownNow()
        let written = counting.written.load(ordering: .acquiring)
        let read = counting.read.load(ordering: .acquiring)
        #expect(read < 8 * 1024, "the server read \(read) bytes for a 64 KiB request")
        #expect(written < 8 * 1024, "the server wrote \(written) bytes for a 64 KiB reply")
    }

    /// The first line `handle` gives, without its newline; nil at the end.
    static func readLine(_ handle: FileHandle) -> String? {
        var bytes: [UInt8] = []
        while true {
            let data = handle.availableData
            if data.isEmpty { return bytes.isEmpty ? nil : String(decoding: bytes, as: UTF8.self) }
            bytes += data
            if let newline = bytes.firstIndex(of: 0x0A) { return String(decoding: bytes[..<newline], as: UTF8.self) }
        }
    }
}
