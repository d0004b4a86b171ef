import Foundation
import Testing

/// `echo-client --json`: the report a machine reads (schema: Examples/EchoClient/JSONReport.swift).
@Suite("echo-client --json", .timeLimit(.minutes(3)))
struct EchoClientJSONTests {
    /// The report, as a machine decodes it. Optional fields are those the schema gives
    /// only in some runs.
    struct Report: Decodable {
        var schemaVersion: Int
        var ok: Bool
        var failure: String?
        var backend: String
        var mode: String
        var flowControl: String?
        var endpoint: String
        var connections: Int
        var messagesPerConnection: Int
        var messageSizeBytes: Int
        var messages: Int
        var bytes: Int
        var durationSeconds: Double
        var messagesPerSecond: Double
        var throughputMiBPerSecond: Double
        var latency: Latency
        var errors: [String: Int]
        var errorCount: Int
        var reconnects: Int?

        struct Latency: Decodable {
            var p50Microseconds: Double
            var p90Microseconds: Double
            var p99Microseconds: Double
            var p999Microseconds: Double
            var maxMicroseconds: Double
        }
    }

    /// Standard output must be the object alone: decoding all of it proves that.
    static func decode(_ client: Subprocess) throws -> Report {
        try JSONDecoder().decode(Report.self, from: Data(client.stdout.utf8))
    }

    @Test("A raw run's report has its counts, and percentiles in order", arguments: socketBackends)
    func rawRun(backend: String) async throws {
        let (server, port) = try await startEchoServer(backend: backend)
        defer { server.killIfRunning() }
        let client = try Subprocess(
            try Products.path("echo-client"),
            ["--backend", backend, "--port", String(port), "--count", "500", "--size", "100", "--concurrency", "3", "--json"],
            name: "echo-client(\(backend), --json)")
        defer { client.killIfRunning() }
        #expect(await client.wait() == .exit(0), "\(client.report)")
        let report = try Self.decode(client)
        #expect(report.schemaVersion == 1)
        #expect(report.ok && report.failure == nil)
        #expect(report.backend == backend && report.mode == "raw" && report.flowControl == nil)
        #expect(report.endpoint == "127.0.0.1:\(port)")
        #expect(report.connections == 3 && report.messagesPerConnection == 500 && report.messageSizeBytes == 100)
        #expect(report.messages == 1500 && report.bytes == 150_000)
        #expect(report.durationSeconds > 0 && report.messagesPerSecond > 0 && report.throughputMiBPerSecond > 0)
        #expect(report.errors.isEmpty && report.errorCount == 0 && report.reconnects == nil)
        let l = report.latency
        #expect(0 < l.p50Microseconds, "\(client.stdout)")
        #expect(l.p50Microseconds <= l.p90Microseconds && l.p90Microseconds <= l.p99Microseconds, "\(client.stdout)")
        #expect(l.p99Microseconds <= l.p999Microseconds && l.p999Microseconds <= l.maxMicroseconds, "\(client.stdout)")
        // A round trip over loopback takes less than the whole run.
        #expect(l.maxMicroseconds <= report.durationSeconds * 1_000_000, "\(client.stdout)")
        await expectCleanStop(server)
    }

    @Test("A framed run's report names its flow control", arguments: socketBackends)
    func framedRun(backend: String) async throws {
        let (server, port) = try await startEchoServer(backend: backend, extra: ["--mode", "framed"])
        defer { server.killIfRunning() }
        let client = try Subprocess(
            try Products.path("echo-client"),
            ["--backend", backend, "--port", String(port), "--count", "200", "--mode", "framed", "--flow-control", "on", "--json"],
            name: "echo-client(\(backend), framed, --json)")
        defer { client.killIfRunning() }
        #expect(await client.wait() == .exit(0), "\(client.report)")
        let report = try Self.decode(client)
        #expect(report.ok && report.mode == "framed" && report.flowControl == "on")
        #expect(report.messages == 200 && report.bytes == 200 * 64)
        #expect(report.latency.p50Microseconds > 0 && report.latency.p50Microseconds <= report.latency.maxMicroseconds)
        await expectCleanStop(server)
    }

    @Test("A failed run still reports, with ok false and the error by code, and exits 1", arguments: socketBackends)
    func refusedRun(backend: String) async throws {
        let port = try closedPort()
        let client = try Subprocess(
            try Products.path("echo-client"), ["--backend", backend, "--port", String(port), "--json"],
            name: "echo-client(\(backend), refused, --json)")
        defer { client.killIfRunning() }
        #expect(await client.wait() == .exit(1), "\(client.report)")
        let report = try Self.decode(client)
        #expect(!report.ok)
        #expect(report.failure?.contains("refused") == true, "\(client.stdout)")
        #expect(report.messages == 0 && report.errors == ["unavailable": 1] && report.errorCount == 1, "\(client.stdout)")
        #expect(report.latency.maxMicroseconds == 0)
        #expect(client.stderr.contains("echo-client: error:"), "\(client.report)")
    }
}
