import Glibc
public import Switchyard
import SwitchyardSimulation
import SwitchyardCalls
import SwitchyardBackendKit
import SwitchyardBackendLoader
import SwitchyardPosix

/// The conformance kit: named scenarios that every backend pair must pass, and the
/// runner that holds each run to a time limit and to a clean descriptor table.
///
/// The kit imports no test framework. A scenario throws a ``ConformanceFailure`` (or
/// the runner wraps whatever else it threw); any harness can call
/// ``run(_:client:server:configuration:)`` and report the error, or
/// ``outcome(of:client:server:tls:configuration:log:)`` for a value (passed, failed, skipped,
/// with what the scenario measured). ``ConformanceRunner`` runs a selection of scenarios
/// and pairs into a ``ConformanceReport``; the `switchyard-conformance` tool and
/// `swift package conformance` print it.
///
/// ```swift
/// ConformanceKit.prepareProcess()
/// for pair in ConformanceKit.pairs(of: registry.all) {
///     for scenario in ConformanceKit.scenarios {
///         try await ConformanceKit.run(scenario, client: pair.client, server: pair.server)
///     }
/// }
/// ```
///
/// Each run makes a fresh client transport and a fresh server transport, runs the
/// scenario, shuts both down with `shutdownNow()`, and fails if any file descriptor
/// opened during the run is still open (G2). Descriptors are counted process-wide, so
/// runs must not overlap each other or anything else that opens descriptors: run the
/// kit serialized, and on its own (`swift test --filter SwitchyardConformanceTests`).
///
/// ## Pairs
///
/// Every socket backend is paired with every socket backend, mixed pairs included (a
/// BSD client against a libuv server). A backend without sockets (the in-memory one)
/// pairs only with itself: it cannot reach a socket. Such a backend must let two of
/// its transports in one process reach each other (a process-wide namespace), since
/// the kit makes the client and the server transports separately.
///
/// ## Coverage of the checklist
///
/// <doc:KitChecklist> is what the test suites of Netty, libuv, grpc-swift and gRPC core
/// check. Each scenario names the items it covers (``ConformanceScenario/checklist``), and
/// <doc:KitCoverage> is the table made from those names, with why each item no scenario
/// covers does not apply.
///
/// ## Over TLS
///
/// A pair of TLS backends (`TransportBackend.tls(wrapping:client:server:)` over each
/// side: `bsd+tls→libuv+tls`, `memory+tls→memory+tls`, ...; the `SwitchyardConformanceTLS`
/// module makes them, `switchyard-conformance --tls` and the kit's tests run them) runs
/// every scenario: the byte-stream and call scenarios hold over TLS as they do without it,
/// and network-namespace scenarios take `tcp+tls` for TCP. Clients check the name
/// `localhost` against the test certificate, so a Unix-domain path or a namespace's
/// address needs no name of its own. Where TLS changes what a scenario sees, it says so:
/// - 11 (close with writes queued): the peer may end with `unavailable`/`truncated`
///   instead of a clean end of stream: the close's `close_notify` would follow the records
///   the close cancels, so TCP ends without it, and the TLS layer reports that.
/// - 24–26, 29 on a network of socket paths (a reset is a close there): the call ends
///   `unavailable`/`truncated` instead of `closed`: a reset sends no `close_notify`.
///
/// Skipped over TLS, with the reason:
/// - 56 (out of descriptors): its clients are raw sockets that echo plaintext on the wire
///   (out of descriptors no Swift task may run, so no TLS client can); a TLS server turns
///   them away with a failed handshake, which 69 covers.
///
/// The TLS scenarios (65–70) run only on TLS pairs (others skip them, saying so), with
/// the certificates of ``ConformancePair/tls``, and end with docs/ERRORS.md's TLS table:
/// 65, 66, 67 (a server certificate for another host, expired, from an untrusted CA:
/// `unavailable`/`certificate` with OpenSSL's verify text, native domain `x509`; 67 also
/// on the server's side); 68 (no client certificate where one is required:
/// `unavailable`/`certificate` on both sides); 69 (a plaintext client: the server's
/// handshake ends `unavailable`/`protocol violation`); 70 (a plaintext server: the
/// client's connect ends `unavailable`/`protocol violation`). In each, the server that
/// saw the failure then serves another client.
public enum ConformanceKit {
    /// Every scenario, in a stable order.
    public static let scenarios: [ConformanceScenario] = [
        .connectAcceptAndClose,       // 1
        .ipv6Loopback,                // 2
        .echoIntegrity,               // 3
        .concurrentConnections,       // 4
        .halfClose,                   // 5
        .peerCloseEndsStream,         // 6
        .peerResetIsUnavailable,      // 7
        .connectionRefused,           // 8
        .unresolvableName,            // 9
        .operationsAfterClose,        // 10
        .writeCompletions,            // 11
        .demandDrivenReads,           // 12
        .slowReaderPushesBack,        // 13
        .shutdownClosesConnections,   // 14
        .acceptThenClose,             // 15
        .listenErrors,                // 16
        .gracefulShutdown,            // 17
        .callEchoIntegrity,                    // 18
        .callWriteReports,                     // 19
        .callStackedRequests,                  // 20
        .callWithoutFlowControlDelivers,       // 21
        .callFlowControlBoundsMemory,          // 22
        .callProtocolErrors,                   // 23
        .callBrokenConnectionIsUnavailable,    // 24
        .callAfterBrokenConnectionReconnects,  // 25
        .callEndsWithoutOutstandingRequest,    // 26
        .callEarlyRequestsLoseNothing,         // 27
        .categoryChangeEndsCalls,              // 28
        .brokenConnectionEndsChannelCalls,     // 29
        .linkDownStallsCalls,                  // 30
        .blackHoleStallsCalls,                 // 31
        .injectedResetEndsCall,                // 32
        .networkSwitchEndsCalls,               // 33
        .noConnectivityFailsCallsAtOnce,       // 34
        .linkFlapIsOneChange,                  // 35
        .acceptHandler,                        // 36
        .callHandlerNotReentered,              // 37
        .pathChangeEndsCalls,                  // 38
        .addressRemovalEndsCalls,              // 39
        .reclaimedSocketEndsCall,              // 40
        .suspendRefusesConnects,               // 41
        .suspendClosesConnections,             // 42
        .suspendEndsChannelCalls,              // 43
        .suspendKeepsConnections,              // 44
        .suspendExpiresOnTimeWithBlackHole,    // 45
        .suspendCallServer,                    // 46
        .idleCallOutlivesStallTimeout,         // 47
        .stallMonitorWithoutKernelHelp,        // 48
        .connectIntoBlackHoleTimesOut,         // 49
        .cancelPendingConnect,                 // 50
        .resetWithQueuedWrites,                // 51
        .writeToHalfOpenPeer,                  // 52
        .callTaskCancellation,                 // 53
        .callDeadlineExceeded,                 // 54
        .descriptorReuseNoCrossTalk,           // 55
        .acceptUnderDescriptorExhaustion,      // 56
        .connectTriesNextAddress,              // 57
        .connectRacesUnansweredAddress,        // 58
        .linkDownStallsCallsOverIPv6,          // 59
        .blackHoleStallsCallsOverIPv6,         // 60
        .injectedResetEndsCallOverIPv6,        // 61
        .networkSwitchEndsCallsOverIPv6,       // 62
        .linkLocalAddressKeepsScope,           // 63
        .callMetadata,                         // 64
        .tlsWrongHostName,                     // 65
        .tlsExpiredCertificate,                // 66
        .tlsUntrustedCertificate,              // 67
        .tlsMissingClientCertificate,          // 68
        .tlsPlaintextClient,                   // 69
        .tlsPlaintextServer,                   // 70
        .resetWhileReadsPaused,                // 71
        .peerCloseWhileReadsStopped,           // 72
        .channelCallsShareOneConnection,       // 73
        .networkSwitchEndsManyCalls,           // 74
        .brokenSharedConnectionEndsCalls,      // 75
        .backoffTimingWithFixedSeed,           // 76
        .keepaliveFindsBlackHole,              // 77
        .goAwayDrainsCalls,                    // 78
        .refusedStreamIsRetried,               // 79
        .goAwayUnprocessedStreamIsRetried,     // 80
        .answeredRefusedStreamIsNotRetried,    // 81
        .refusalPastRetryBufferIsNotRetried,   // 82
        .retryFollowsCallOptions,              // 83
        .goAwayWaitingCallIsRetried,           // 84
        .serverEnforcesRequestDeadline,        // 85
        .compressedCallsBothWays,              // 86
        .earlyServerStatusEndsCall,            // 87
    ]

    /// The scenario named `name`, if any.
    public static func scenario(named name: String) -> ConformanceScenario? {
        scenarios.first { $0.name == name }
    }

    /// The pairs to run: every (client, server) of backends on the same network
    /// (`TransportBackend.network`), mixed pairs included, in the order the backends
    /// are given.
    public static func pairs(of backends: [TransportBackend]) -> [ConformancePair] {
        var pairs: [ConformancePair] = []
        var networks: [String] = []
        for backend in backends where !networks.contains(backend.network) { networks.append(backend.network) }
        for network in networks {
            let members = backends.filter { $0.network == network }
            for client in members {
                for server in members { pairs.append(ConformancePair(client: client, server: server)) }
            }
        }
        return pairs
    }

    /// Prepares the process for the kit: raises the soft descriptor limit to the hard
    /// one (a thousand concurrent connections need two thousand descriptors).
    ///
    /// It does not ignore `SIGPIPE`: a backend must never raise it (it writes with
    /// `MSG_NOSIGNAL` or equivalent), and the kit must catch one that does.
    public static func prepareProcess() {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return }
        if limit.rlim_cur < limit.rlim_max {
            limit.rlim_cur = limit.rlim_max
            _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        }
    }

    /// How long descriptors may take to close after shutdown before they count as leaked.
    static let settleTime: Duration = .seconds(2)

    /// Runs `scenario` over `pair`.
    public static func run(
        _ scenario: ConformanceScenario, pair: ConformancePair,
        configuration: TransportConfiguration = TransportConfiguration(eventLoopCount: 2)
    ) async throws {
        let ended = await perform(scenario, client: pair.client, server: pair.server, tls: pair.tls, configuration: configuration, log: { print($0) })
        if let failure = ended.failure { throw failure }
        if let skip = ended.skip { throw skip }
    }

    /// Runs `scenario` with a fresh client transport from `client` and a fresh server
    /// transport from `server`, then shuts both down and checks that no descriptor
    /// opened during the run is left open.
    ///
    /// - Throws: a ``ConformanceFailure``: the scenario's own, one for an unexpected
    ///   error, one when the scenario exceeds its time limit, or one for a leak; or a
    ///   ``ConformanceSkip`` when the scenario could not run here (after the same
    ///   shutdown and leak check: a skipped scenario that leaked fails).
    public static func run(
        _ scenario: ConformanceScenario, client: TransportBackend, server: TransportBackend,
        configuration: TransportConfiguration = TransportConfiguration(eventLoopCount: 2)
    ) async throws {
        let ended = await perform(scenario, client: client, server: server, configuration: configuration, log: { print($0) })
        if let failure = ended.failure { throw failure }
        if let skip = ended.skip { throw skip }
    }

    /// Runs `scenario` over `pair` and returns how it ended instead of throwing.
    public static func outcome(
        of scenario: ConformanceScenario, pair: ConformancePair,
        configuration: TransportConfiguration = TransportConfiguration(eventLoopCount: 2),
        log: @escaping @Sendable (String) -> Void = { print($0) }
    ) async -> ConformanceOutcome {
        await outcome(of: scenario, client: pair.client, server: pair.server, tls: pair.tls, configuration: configuration, log: log)
    }

    /// Runs `scenario` exactly as ``run(_:client:server:configuration:)`` does (fresh
    /// transports, the time limit, shutdown, the leak check) and returns how it ended,
    /// with what it measured, instead of throwing.
    ///
    /// - Parameters:
    ///   - scenario: the scenario to run.
    ///   - client: the backend whose transport connects.
    ///   - server: the backend whose transport listens.
    ///   - tls: for a pair of TLS backends, what the TLS scenarios need.
    ///   - configuration: what both transports are made with.
    ///   - log: where the scenario's log lines (``ConformanceContext/log(_:)``) and the
    ///     run's last line (passed, FAILED, skipped) go; standard output by default.
    public static func outcome(
        of scenario: ConformanceScenario, client: TransportBackend, server: TransportBackend, tls: ConformanceTLS? = nil,
        configuration: TransportConfiguration = TransportConfiguration(eventLoopCount: 2),
        log: @escaping @Sendable (String) -> Void = { print($0) }
    ) async -> ConformanceOutcome {
        let ended = await perform(scenario, client: client, server: server, tls: tls, configuration: configuration, log: log)
        var outcome = ConformanceOutcome(
            scenario: scenario.name, client: client.name, server: server.name, status: .passed,
            seconds: ended.elapsed.inSeconds, measurements: ended.measurements)
        if let failure = ended.failure {
            outcome.status = .failed
            outcome.reason = failure.message
            outcome.file = failure.file
            outcome.line = failure.line
        } else if let skip = ended.skip {
            outcome.status = .skipped
            outcome.reason = skip.reason
        }
        return outcome
    }

    /// How a run ended: at most one of a failure and a skip, and what it measured.
    struct Ended: Sendable {
        var failure: ConformanceFailure?
        var skip: ConformanceSkip?
        var measurements: [ConformanceMeasurement] = []
        var elapsed: Duration = .zero
    }

    /// The run itself, shared by ``run(_:client:server:configuration:)`` and
    /// ``outcome(of:client:server:tls:configuration:log:)``.
    static func perform(
        _ scenario: ConformanceScenario, client: TransportBackend, server: TransportBackend, tls: ConformanceTLS? = nil,
        configuration: TransportConfiguration, log: @escaping @Sendable (String) -> Void
    ) async -> Ended {
        let pair = "\(client.name)→\(server.name)"
        @Sendable func failure(_ message: String, line: Int = #line) -> ConformanceFailure {
            ConformanceFailure(scenario: scenario.name, pair: pair, message: message, file: #fileID, line: line)
        }
        await warmUpRuntime()
        // Violations from before this run (another run's stragglers) are not this run's.
        _ = LoadableBackend.takeContractViolations()
        let before = DescriptorSnapshot.take()

        let clientTransport: any Transport
        let serverTransport: any Transport
        func notMade(_ side: String, _ backend: TransportBackend, _ error: any Error) -> Ended {
            let made = failure("making the \(side) transport '\(backend.name)' failed: \(error)")
            log("[conformance] [\(pair)] \(scenario.name): FAILED: \(made.message)")
            return Ended(failure: made)
        }
        // A pair of the simulation runs on a network of the run's own, in virtual time:
        // every transport the scenario makes of the pair's backends is on it.
        let simulated: SimulatedNetwork?
        do {
            simulated = SimulatedFaultNetwork.runs(client, server) ? try SimulatedFaultNetwork.makeNetwork() : nil
        } catch {
            return notMade("client", client, error)
        }
        let client = simulated.map { SimulatedFaultNetwork.backend(on: $0, as: client) } ?? client
        let server = simulated.map { SimulatedFaultNetwork.backend(on: $0, as: server) } ?? server
        do {
            clientTransport = try client.make(configuration)
        } catch {
            return notMade("client", client, error)
        }
        do {
            serverTransport = try server.make(configuration)
        } catch {
            await clientTransport.shutdownNow()
            return notMade("server", server, error)
        }
        let context = {
            var context = ConformanceContext(
                scenario: scenario.name, client: clientTransport, server: serverTransport,
                clientBackend: client.name, serverBackend: server.name,
                clientTransportBackend: client, serverTransportBackend: server, configuration: configuration, tls: tls)
            context.logSink = log
            return context
        }()

        if let simulated { context.log("on \(simulated)") }
        let started = ContinuousClock.now
        var scenarioFailure: ConformanceFailure?
        var scenarioSkip: ConformanceSkip?
        do {
            let limit = scenario.timeLimit
            try await raceAgainstDeadline(limit, clock: SystemTransportClock(), onTimeout: { failure("the scenario did not finish within \(limit); it hangs or is far too slow") }) {
                try await KitClock.running(on: simulated) {
                    guard let simulated else { return try await scenario.run(context) }
                    try await simulated.run { try await scenario.run(context) }
                }
            }
        } catch let error as ConformanceFailure {
            scenarioFailure = error
        } catch let skip as ConformanceSkip {
            scenarioSkip = skip
        } catch {
            scenarioFailure = failure("the scenario threw an unexpected error: \(error)")
        }

        // Namespaces a scenario made and could not remove (it was abandoned at its time
        // limit) go now, whatever happened.
        FaultNetwork.removeLeftovers()

        // Shut down, bounded: a shutdown that hangs is itself a failure.
        var shutdownProblems: [String] = []
        for (side, transport) in [("client", clientTransport), ("server", serverTransport)] {
            do {
                try await raceAgainstDeadline(.seconds(30), clock: SystemTransportClock(), onTimeout: { failure("\(side) shutdownNow() did not return within 30 s") }) {
                    try await KitClock.running(on: simulated) {
                        guard let simulated else { return await transport.shutdownNow() }
                        try await simulated.run { await transport.shutdownNow() }
                    }
                }
            } catch {
                shutdownProblems.append("\(error)")
            }
        }

        // Leaks: allow closes that are still in flight to land.
        var leaked = DescriptorSnapshot.take().opened(since: before)
        let settleStart = ContinuousClock.now
        while !leaked.isEmpty && ContinuousClock.now - settleStart < settleTime {
            try? await Task.sleep(for: .milliseconds(20))
            leaked = DescriptorSnapshot.take().opened(since: before)
        }
        var problems = shutdownProblems
        // A loaded backend that called a once-only callback again (its host dropped the
        // call rather than crash): the scenario did not see the contract broken, so say it.
        var violations: [(text: String, count: Int)] = []
        for violation in LoadableBackend.takeContractViolations() {
            if let index = violations.firstIndex(where: { $0.text == violation }) {
                violations[index].count += 1
            } else {
                violations.append((violation, 1))
            }
        }
        for (text, count) in violations {
            problems.append("the backend broke the loaded-library contract\(count > 1 ? " \(count) times" : ""): \(text)")
        }
        if !leaked.isEmpty {
            let list = leaked.map { "fd \($0.fd) → \($0.target)" }.joined(separator: ", ")
            problems.append("\(leaked.count) descriptors opened during the run are still open \(settleTime) after shutdownNow(): \(list)")
        }

        let elapsed = ContinuousClock.now - started
        var ended = Ended(measurements: context.measurements, elapsed: elapsed)
        if var scenarioFailure {
            if !problems.isEmpty { scenarioFailure.message += "; also: " + problems.joined(separator: "; ") }
            if let simulated {
                scenarioFailure.message += " [\(SimulatedNetwork.seedVariable)=\(simulated.seed) replays the run]"
            }
            context.log("FAILED after \(elapsed): \(scenarioFailure.message)")
            ended.failure = scenarioFailure
        } else if !problems.isEmpty {
            let leak = failure(problems.joined(separator: "; "))
            context.log("FAILED after \(elapsed): \(leak.message)")
            ended.failure = leak
        } else if let scenarioSkip {
            ended.skip = scenarioSkip
        } else {
            context.log("passed in \(elapsed)")
        }
        return ended
    }

    /// The Swift runtime opens descriptors lazily for its timers (on Linux, Dispatch
    /// keeps a timerfd per clock and per priority band) the first time a task sleeps;
    /// sleep once on each clock at each priority before counting, so those are not
    /// taken for a leak.
    private static func warmUpRuntime() async {
        let priorities: [TaskPriority] = [.background, .low, .utility, .medium, .userInitiated, .high]
        await withTaskGroup(of: Void.self) { group in
            for priority in priorities {
                group.addTask(priority: priority) {
                    try? await Task.sleep(for: .milliseconds(1))
                    try? await Task.sleep(for: .milliseconds(1), clock: .suspending)
                }
            }
        }
        try? await Task.sleep(for: .milliseconds(1))
        try? await Task.sleep(for: .milliseconds(1), clock: .suspending)
    }
}
