import GRPCCore
import InteropGRPCCore
import InteropTesting
import Switchyard
import SwitchyardCalls
import Testing

/// The GRPCCore service and cases (`--grpc-swift`) in one process over loopback, on
/// grpc-swift-nio-transport's HTTP/2 Posix transport, against each other and against the
/// calls-API side on Switchyard. scripts/interop-matrix runs the same through the tools,
/// with TLS, and against grpcio.
@Suite("The interop cases on GRPCCore", .serialized)
struct GRPCCoreInteropTests {
    @Test("Every GRPCCore case passes against the GRPCCore service (NIO both sides)")
    func casesAgainstGRPCCoreService() async throws {
        let failures = try await withNIOServer { port in
            await Self.failures { testCase throws(InteropFailure) in try await testCase.runNIO(host: "127.0.0.1", port: port, tls: nil) }
        }
        #expect(failures == [])
    }

    @Test("Every GRPCCore case passes against the calls-API service on Switchyard", arguments: ["bsd", "libuv"])
    func casesAgainstCallsService(backend: String) async throws {
        let transport = try await InteropTransport.make(backend: backend)
        let service = TestService()
        let callServer = try await CallServer.start(transport: transport, on: Endpoint(host: "127.0.0.1", port: 0)) { call in
            try await service.serve(call)
        }
        let port = callServer.localAddress.port
        let failures = await Self.failures { testCase throws(InteropFailure) in
            try await testCase.runNIO(host: "127.0.0.1", port: port, tls: nil)
        }
        callServer.close()
        await callServer.serve()
        await transport.shutdown(gracePeriod: .seconds(2))
        #expect(failures == [])
    }

    @Test("Every calls-API case passes against the GRPCCore service", arguments: ["bsd", "libuv"])
    func callsCasesAgainstGRPCCoreService(backend: String) async throws {
        let transport = try await InteropTransport.make(backend: backend)
        let failures = try await withNIOServer { port in
            let channel = CallChannel(target: Endpoint(host: "127.0.0.1", port: port), transport: transport)
            let failures = await Self.failures { testCase throws(InteropFailure) in try await testCase.run(on: channel) }
            channel.close()
            return failures
        }
        await transport.shutdown(gracePeriod: .seconds(2))
        #expect(failures == [])
    }

    /// Against a server that answers every call with OK and nothing else, the GRPCCore
    /// cases fail, each saying what it missed: the checks check.
    @Test("The GRPCCore cases fail against a server that answers nothing")
    func casesFailAgainstAnEmptyServer() async throws {
        let transport = try await InteropTransport.make(backend: "bsd")
        let callServer = try await CallServer.start(transport: transport, on: Endpoint(host: "127.0.0.1", port: 0)) { _ in .ok }
        let port = callServer.localAddress.port
        // empty_stream passes against any server that ends a call OK; cancel_after_begin
        // races the OK against the cancellation, timeout_on_sleeping_server against 1 ms.
        // The two unimplemented cases pass too: GRPCCore's client ends a unary call that
        // got OK and no message UNIMPLEMENTED ("No messages received, exactly one was
        // expected."), as gRPC's clients do.
        let passing: [InteropTestCase] = [
            .emptyStream, .cancelAfterBegin, .timeoutOnSleepingServer, .unimplementedMethod, .unimplementedService,
        ]
        let expectedToFail = InteropTestCase.allCases.filter { !passing.contains($0) }
        var passed: [String] = []
        for testCase in expectedToFail {
            do {
                try await testCase.runNIO(host: "127.0.0.1", port: port, tls: nil)
                passed.append(testCase.rawValue)
            } catch {
                #expect(!error.message.isEmpty)
            }
        }
        callServer.close()
        await callServer.serve()
        await transport.shutdown(gracePeriod: .seconds(2))
        #expect(passed == [])
    }

    /// The cancel cases wait for the call to start or answer before cancelling it; a call
    /// that fails before that ends the case instead of leaving it waiting.
    @Test("The cancel cases fail, not wait, when no server listens", .timeLimit(.minutes(1)))
    func cancelCasesFailWithoutServer() async throws {
        let transport = try await InteropTransport.make(backend: "bsd")
        let callServer = try await CallServer.start(transport: transport, on: Endpoint(host: "127.0.0.1", port: 0)) { _ in .ok }
        let port = callServer.localAddress.port
        callServer.close()
        await callServer.serve()
        await transport.shutdown(gracePeriod: .seconds(2))
        for testCase in [InteropTestCase.cancelAfterBegin, .cancelAfterFirstResponse] {
            await #expect(throws: InteropFailure.self) {
                try await testCase.runNIO(host: "127.0.0.1", port: port, tls: nil)
            }
        }
    }

    // MARK: helpers

    /// Runs `body` with the GRPCCore service served on NIO on a free loopback port.
    private func withNIOServer<Result: Sendable>(_ body: (Int) async throws -> Result) async throws -> Result {
        let server = InteropGRPCServer.nio(host: "127.0.0.1", port: 0, tls: nil)
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await server.serve() }
            let result: Result
            do {
                result = try await body(try await server.port())
            } catch {
                server.beginGracefulShutdown()
                throw error
            }
            server.beginGracefulShutdown()
            try await group.waitForAll()
            return result
        }
    }

    /// Each case's failure, `name: what differed`.
    private static func failures(_ run: (InteropTestCase) async throws(InteropFailure) -> Void) async -> [String] {
        var failures: [String] = []
        for testCase in InteropTestCase.allCases {
            do {
                try await run(testCase)
            } catch {
                failures.append("\(testCase.rawValue): \(error)")
            }
        }
        return failures
    }
}
