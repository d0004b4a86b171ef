import Foundation
import GRPCCore
import Switchyard
import SwitchyardBSD
import SwitchyardGRPC
import Testing

/// The server side of a deadline, and the `grpc-` keys GRPCCore reads that go on the wire.
@Suite("The server enforces grpc-timeout; gRPC's retry keys cross the wire", .serialized, .timeLimit(.minutes(2)))
struct ServerDeadlineTests {
    /// nghttp (nghttp2-client), a peer we did not write and that keeps no deadline of its
    /// own, sends a gRPC request with `grpc-timeout: 200m` to a handler that waits; only
    /// the server can end it.
    @Test("A request with grpc-timeout from nghttp ends with grpc-status 4, and the GRPCCore handler is cancelled")
    func nghttpRequestDeadline() async throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/nghttp") else {
            print("ServerDeadlineTests: /usr/bin/nghttp is missing (apt-get install nghttp2-client); skipped")
            return
        }
        let serverTransport = try BSDTransport(configuration: TransportConfiguration(eventLoopCount: 1))
        let probe = Probe()
        let transport = SwitchyardServerTransport(address: Endpoint(host: "127.0.0.1", port: 0), transport: serverTransport)
        let server = GRPCServer(transport: transport, services: [EchoService(probe: probe)])
        let body = FileManager.default.temporaryDirectory.appendingPathComponent("switchyard-deadline-\(getpid()).bin")
        try Data([0, 0, 0, 0, 1, 7]).write(to: body)
        defer { try? FileManager.default.removeItem(at: body) }
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await server.serve() }
            let port = try await transport.listeningAddress.port
            let started = ContinuousClock.now
            let output = try await Task.detached {
                let process = Process()
                process.executableURL = URL(fileURLWithPath: "/usr/bin/nghttp")
                process.arguments = [
                    "-v", "-t", "10", "-H", "content-type: application/grpc", "-H", "te: trailers", "-H", "grpc-timeout: 200m",
                    "-d", body.path, "http://127.0.0.1:\(port)/echo.Echo/Wait",
                ]
                let pipe = Pipe()
                process.standardOutput = pipe
                process.standardError = pipe
                try process.run()
                let data = pipe.fileHandleForReading.readDataToEndOfFile()
                process.waitUntilExit()
                return String(decoding: data, as: UTF8.self)
            }.value
            let elapsed = ContinuousClock.now - started
            #expect(output.contains("grpc-status: 4"), "nghttp's output:\n\(output)")
            #expect(elapsed >= .milliseconds(190) && elapsed < .seconds(5), "nghttp ran for \(elapsed)")
            #expect(await probe.wait { $0.cancelled == 1 }, "the handler did not see its call end")
            probe.release()
            server.beginGracefulShutdown()
            try await group.waitForAll()
        }
        await serverTransport.shutdownNow()
    }

    @Test("A GRPCCore server handler sees the request's deadline as grpc-timeout, the time left", arguments: Backend.allCases)
    func handlerSeesDeadline(backend: Backend) async throws {
        try await withEcho(server: try backend.transport(), client: try backend.transport()) { client, _, _ in
            var options = CallOptions.defaults
            options.timeout = .seconds(5)
            let response = try await client.get([1], options: options)
            let seen = response.metadata[stringValues: "x-grpc-timeout"].first(where: { _ in true })
            #expect(seen != nil, "the handler saw no grpc-timeout in \(response.metadata)")
            // GRPCCore's format: up to 8 digits and a unit; the time left is at most 5 s.
            let millis: Int? = seen.flatMap { text -> Int? in
                guard let unit = text.last, let amount = Int(text.dropLast()) else { return nil }
                switch unit {
                case "H": return amount * 3_600_000
                case "M": return amount * 60_000
                case "S": return amount * 1000
                case "m": return amount
                case "u": return amount / 1000
                case "n": return amount / 1_000_000
                default: return nil
                }
            }
            #expect(millis.map { $0 > 0 && $0 <= 5000 } == true, "grpc-timeout \(String(describing: seen))")
        }
    }

    @Test("A server's grpc-retry-pushback-ms reaches the GRPCCore client: in the error's metadata, and a negative one stops its retries")
    func retryPushback() async throws {
        try await withEcho(server: try Backend.bsd.transport(), client: try Backend.bsd.transport()) { client, probe, _ in
            let metadata: Metadata = ["fail-code": "14", "fail-message": "busy", "fail-pushback-ms": "-1"]
            var options = CallOptions.defaults
            options.executionPolicy = .retry(
                RetryPolicy(
                    maxAttempts: 3, initialBackoff: .milliseconds(10), maxBackoff: .milliseconds(20), backoffMultiplier: 1,
                    retryableStatusCodes: [.unavailable]))
            let error = await #expect(throws: RPCError.self) { try await client.get([1], metadata: metadata, options: options).message }
            #expect(error?.code == .unavailable, "\(String(describing: error))")
            let pushback = error.map { Array($0.metadata[stringValues: "grpc-retry-pushback-ms"]) }
            #expect(pushback == ["-1"], "\(String(describing: error?.metadata))")
            // A6: a negative pushback means "do not retry"; without it the client would
            // have tried three times.
            try await Task.sleep(for: .milliseconds(200))
            #expect(probe.started == 1, "the handler ran \(probe.started) times")
        }
    }
}
