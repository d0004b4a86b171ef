import Glibc
import Switchyard
import SwitchyardBackendKit
import Synchronization
import Testing

/// The toolkit's connect over several addresses, with attempts that are closures (no
/// sockets): `localhost` resolves to `127.0.0.1` and `::1`, so the attempts go to `::1`
/// first, then `127.0.0.1`.
@Suite("Happy Eyeballs (RFC 8305) connection attempts")
struct HappyEyeballsTests {
    static let localhost = Endpoint(host: "localhost", port: 4242)

    /// The attempts started, in order, by host.
    final class Attempts: Sendable {
        private let started = Mutex<[String]>([])
        private let discarded = Mutex<[String]>([])
        func start(_ address: SystemSocketAddress) { started.withLock { $0.append(address.endpoint.host) } }
        func discard(_ value: String) { discarded.withLock { $0.append(value) } }
        var hosts: [String] { started.withLock { $0 } }
        var discards: [String] { discarded.withLock { $0 } }
    }

    static func refused(_ address: SystemSocketAddress) -> TransportError {
        TransportError(code: .unavailable, reason: .refused, message: "\(address) refused")
    }

    /// Waits until cancelled, then throws `cancelled` as a pending connect does.
    static func hang(_ address: SystemSocketAddress) async throws -> String {
        while !Task.isCancelled { try? await Task.sleep(for: .milliseconds(5)) }
        throw TransportError(code: .cancelled, reason: .taskCancelled, message: "\(address) cancelled")
    }

    @Test("Addresses are tried IPv6 first, the families alternating, each in its own order")
    func order() throws {
        func address(_ host: String) throws -> SystemSocketAddress { try #require(try SystemSocketAddress(literal: Endpoint(host: host, port: 1))) }
        let given = try ["10.0.0.1", "10.0.0.2", "::1", "fd00::1", "fd00::2", "10.0.0.3"].map(address)
        #expect(HappyEyeballs.ordered(given).map(\.endpoint.host) == ["::1", "10.0.0.1", "fd00::1", "10.0.0.2", "fd00::2", "10.0.0.3"])
        #expect(HappyEyeballs.ordered(try ["10.0.0.1"].map(address)).map(\.endpoint.host) == ["10.0.0.1"])
        #expect(HappyEyeballs.ordered([]).isEmpty)
    }

    @Test("localhost resolves to both loopback addresses without a query")
    func localhostResolves() async throws {
        for name in ["localhost", "LocalHost.", "api.localhost"] {
            let addresses = try await HostResolver.resolve(Endpoint(host: name, port: 80))
            #expect(addresses.map(\.endpoint) == [Endpoint(host: "127.0.0.1", port: 80), Endpoint(host: "::1", port: 80)])
        }
    }

    @Test("An IP literal is one attempt with the whole timeout, and its failure is the connect's")
    func literalIsOneAttempt() async throws {
        let attempts = Attempts()
        let given = Mutex<Duration?>(nil)
        let error = await #expect(throws: TransportError.self) {
            try await HappyEyeballs.connect(
                to: Endpoint(host: "::1", port: 4242), timeout: .seconds(7), discard: attempts.discard
            ) { address, timeout -> String in
                attempts.start(address)
                given.withLock { $0 = timeout }
                throw Self.refused(address)
            }
        }
        #expect(error?.reason == .refused)
        #expect(attempts.hosts == ["::1"])
        #expect(given.withLock { $0 } == .seconds(7))
    }

    @Test("A refused address moves on to the next at once, not after the attempt delay")
    func refusedMovesOnAtOnce() async throws {
        let attempts = Attempts()
        let started = ContinuousClock.now
        let result = try await HappyEyeballs.connect(
            to: Self.localhost, timeout: .seconds(10), attemptDelay: .seconds(5), discard: attempts.discard
        ) { address, _ in
            attempts.start(address)
            if address.family == AF_INET6 { throw Self.refused(address) }
            return "connected to \(address.endpoint.host)"
        }
        #expect(result == "connected to 127.0.0.1")
        #expect(attempts.hosts == ["::1", "127.0.0.1"])
        #expect(ContinuousClock.now - started < .seconds(2))
    }

    @Test("An address that does not answer gets the attempt delay to itself, then the next starts beside it and wins")
    func blackHoleIsRaced() async throws {
        let attempts = Attempts()
        let cancelled = Atomic<Bool>(false)
        let started = ContinuousClock.now
        let result = try await HappyEyeballs.connect(
            to: Self.localhost, timeout: .seconds(10), attemptDelay: .milliseconds(100), discard: attempts.discard
        ) { address, _ in
            attempts.start(address)
            if address.family == AF_INET6 {
                do { return try await Self.hang(address) } catch { cancelled.store(true, ordering: .relaxed); throw error }
            }
            return "v4"
        }
        let elapsed = ContinuousClock.now - started
        #expect(result == "v4")
        #expect(attempts.hosts == ["::1", "127.0.0.1"])
        #expect(elapsed >= .milliseconds(100) && elapsed < .seconds(2), "took \(elapsed)")
        let losingAttemptCancelled = cancelled.load(ordering: .relaxed)
        #expect(losingAttemptCancelled, "the losing attempt was cancelled")
    }

    @Test("A second attempt that connects after the first won is discarded, not leaked")
    func lateWinnerIsDiscarded() async throws {
        let attempts = Attempts()
        let result = try await HappyEyeballs.connect(
            to: Self.localhost, timeout: .seconds(10), attemptDelay: .milliseconds(50), discard: attempts.discard
        ) { address, _ in
            attempts.start(address)
            if address.family == AF_INET6 {
                // Connects a little after the second started, ignoring cancellation.
                try? await Task.sleep(for: .milliseconds(150))
                return "late v6"
            }
            try? await Task.sleep(for: .milliseconds(20))
            return "v4"
        }
        #expect(result == "v4")
        #expect(attempts.discards == ["late v6"])
    }

    @Test("When every address fails, the connect fails with the last failure")
    func everyAddressFails() async throws {
        let attempts = Attempts()
        let error = await #expect(throws: TransportError.self) {
            try await HappyEyeballs.connect(
                to: Self.localhost, timeout: .seconds(10), discard: attempts.discard
            ) { address, _ -> String in
                attempts.start(address)
                throw Self.refused(address)
            }
        }
        #expect(error?.reason == .refused)
        #expect(error?.message.contains("127.0.0.1") == true)
        #expect(attempts.hosts == ["::1", "127.0.0.1"])
    }

    @Test("Running out of descriptors ends the connect without trying the next address")
    func resourceExhaustionEnds() async throws {
        let attempts = Attempts()
        let error = await #expect(throws: TransportError.self) {
            try await HappyEyeballs.connect(
                to: Self.localhost, timeout: .seconds(10), discard: attempts.discard
            ) { address, _ -> String in
                attempts.start(address)
                throw TransportError(code: .resourceExhausted, reason: .resourceLimit, message: "EMFILE")
            }
        }
        #expect(error?.code == .resourceExhausted)
        #expect(attempts.hosts == ["::1"])
    }

    @Test("When no address answers, the connect ends at its timeout with deadlineExceeded")
    func timeout() async throws {
        let started = ContinuousClock.now
        let error = await #expect(throws: TransportError.self) {
            try await HappyEyeballs.connect(
                to: Self.localhost, timeout: .milliseconds(400), attemptDelay: .milliseconds(50), discard: { _ in }
            ) { address, _ -> String in try await Self.hang(address) }
        }
        let elapsed = ContinuousClock.now - started
        #expect(error?.code == .deadlineExceeded && error?.reason == .connectTimeout)
        #expect(elapsed >= .milliseconds(400) && elapsed < .seconds(3), "took \(elapsed)")
    }

    @Test("Cancelling the calling task ends the connect at once with cancelled")
    func cancellation() async throws {
        let task = Task {
            try await HappyEyeballs.connect(
                to: Self.localhost, timeout: .seconds(30), attemptDelay: .milliseconds(50), discard: { _ in }
            ) { address, _ -> String in try await Self.hang(address) }
        }
        try await Task.sleep(for: .milliseconds(200))
        let cancelled = ContinuousClock.now
        task.cancel()
        let result = await task.result
        #expect(ContinuousClock.now - cancelled < .seconds(1))
        #expect(throws: TransportError.self) { try result.get() }
        if case .failure(let error as TransportError) = result { #expect(error.code == .cancelled) }
    }
}
