import GRPCCore
import GRPCEchoLoad
import GRPCEchoService

/// The two sides of the benchmark, generic over GRPCCore's transports: the same server and
/// the same client code whichever transport is under them.
enum EchoServing {
    /// Serves ``EchoService`` on `transport` until the process is killed; prints
    /// `listening on PORT` (the port `port` reads once the transport is bound).
    static func serve<Transport: ServerTransport>(
        on transport: Transport, port: @escaping @Sendable () async throws -> Int
    ) async throws {
        let server = GRPCServer(transport: transport, services: [EchoService()])
        try await withThrowingDiscardingTaskGroup { tasks in
            tasks.addTask { try await server.serve() }
            LineOutput.standardOutput.write("listening on \(try await port())")
        }
    }

    /// Runs the load `options` asks for (an unmeasured warm-up of the same load first)
    /// with a `GRPCClient` on `transport`, and prints its result as one line of JSON.
    /// Writes `measuring` to standard error as the measured load starts, so that a harness
    /// can read the server's CPU time over the measured load alone.
    static func load<Transport: ClientTransport>(over transport: Transport, options: BenchOptions) async throws {
        let pattern = (0..<options.messageSize).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
        let method = options.method
        let concurrency = options.concurrency
        let warmup = options.warmup
        let duration = options.duration
        let result = try await withGRPCClient(transport: transport) { client in
            let driver = LoadDriver(client: client, payload: EchoMessage(pattern))
            switch method {
            case .unary:
                if warmup > 0 { _ = try await driver.unary(concurrency: concurrency, seconds: warmup) }
                LineOutput.standardError.write("measuring")
                return try await driver.unary(concurrency: concurrency, seconds: duration)
            case .stream:
                if warmup > 0 { _ = try await driver.stream(concurrency: concurrency, seconds: warmup) }
                LineOutput.standardError.write("measuring")
                return try await driver.stream(concurrency: concurrency, seconds: duration)
            }
        }
        LineOutput.standardOutput.write(
            result.json(method: method.rawValue, concurrency: concurrency, messageSize: options.messageSize))
    }
}
