import Synchronization
import Switchyard
import SwitchyardCalls

// A channel's reconnect backoff (gRPC's connection-backoff, `ConnectionBackoff`) seen
// from outside: when its attempts to connect start, what its connectivity state does,
// and what fail-fast and wait-for-ready calls get meanwhile. The jitter comes from a
// seeded generator, so the kit computes the schedule the channel must follow and checks
// the attempts a recording transport saw against it.

/// The backoff of the scenario: 100 ms, doubling, at most 1 s, ±20 % jitter.
private let initialBackoff: Duration = .milliseconds(100)
private let backoffMultiplier = 2.0
private let maximumBackoff: Duration = .seconds(1)
private let backoffJitter = 0.2
private let jitterSeed: UInt64 = 90
/// Attempts refused before the server starts listening.
private let refusedAttempts = 5
/// How early an attempt may start against the schedule (clock granularity), and how
/// late (a timer on a loaded machine; each gap is measured from the attempt before, so
/// lateness does not add up).
private let earlyMargin: Duration = .milliseconds(5)
private let lateMargin: Duration = .milliseconds(300)
/// The wait-for-ready call's deadline: the server's attempt comes at most
/// 100 + 240 + 480 + 960 + 1,200 ms (+20 % each) after the first, about 3 s.
private let waitingCallTimeout: Duration = .seconds(6)

/// Draws the backoff's jitter from SplitMix64 seeded with `seed`: the same seed gives the
/// same draws, so a second one replays the schedule the channel follows.
final class SeededJitter: Sendable {
    private let generator: Mutex<ConformancePattern.Generator>

    init(seed: UInt64) { generator = Mutex(ConformancePattern.Generator(seed: seed)) }

    /// A value uniform in `range`.
    func draw(in range: ClosedRange<Double>) -> Double {
        let unit = Double(generator.withLock { $0.next() } >> 11) / Double(UInt64(1) << 53)
        return range.lowerBound + (range.upperBound - range.lowerBound) * unit
    }
}

extension ConformanceScenario {
    /// 76. Backoff timing with a fixed seed.
    public static let backoffTimingWithFixedSeed = ConformanceScenario(
        "A channel whose target refuses connects retries on gRPC's backoff (100 ms, × 2, at most 1 s, seeded ±20 % jitter): each attempt starts on schedule (at most 300 ms late); its state goes idle, connecting, transient failure, connecting, ... ; a fail-fast call meanwhile fails at once with unavailable; a wait-for-ready call waits through the failures and succeeds once a server listens, and the channel is ready",
        checklist: ["J1"], timeLimit: .seconds(60)
    ) { context in
        // A target where nothing listens: an address the server transport just let go.
        let probe = try await context.listen()
        let address = probe.localAddress
        probe.close()
        let target = context.target(of: address)

        let recording = ConnectRecordingTransport(context.client)
        let jitter = SeededJitter(seed: jitterSeed)
        let backoff = ConnectionBackoff(
            initial: initialBackoff, multiplier: backoffMultiplier, jitter: backoffJitter, maximum: maximumBackoff,
            jitterSource: { jitter.draw(in: $0) })
        let channel = CallChannel(target: target, transport: recording, configuration: ChannelConfiguration(backoff: backoff))
        defer { channel.close() }

        let states = Collected<ChannelConnectivityState>()
        let statesSeen = channel.connectivityStates
        let watcher = Task(executorPreference: KitClock.taskExecutor) {
            for await state in statesSeen { states.append(state) }
        }
        defer { watcher.cancel() }
        func failures() -> Int { states.all.count { $0 == .transientFailure } }
        try await context.waitUntil(seconds: 5, "the channel's first state is published") { states.count >= 1 }
        try context.expectEqual(states[0], .idle, "a new channel's state")

        let recorder = CallRecorder()
        var waitForReady = CallConfiguration(timeout: waitingCallTimeout)
        waitForReady.waitForReady = true
        let waiting = Task(executorPreference: KitClock.taskExecutor) { [waitForReady] in
            try await channel.startCall(options: waitForReady, handler: recorder)
        }
        defer { waiting.cancel() }

        try await context.waitUntil(seconds: 10, "the channel's first attempt failed (states: \(states.all))") { failures() >= 1 }
        let fastStarted = KitClock.now
        let fast = try await context.expectError(
            code: .unavailable, reason: .refused, "a fail-fast call while the channel's attempts are refused", within: 10
        ) {
            try await channel.startCall(options: CallConfiguration(timeout: .seconds(5)), handler: CallRecorder())
        }
        let fastTook = KitClock.now - fastStarted
        context.record("fail-fast call's failure", fastTook)
        try context.expect(fastTook < .milliseconds(500), "a fail-fast call failed at once (it took \(fastTook)): \(fast)")

        try await context.waitUntil(seconds: 10, "\(refusedAttempts) attempts failed (states: \(states.all))") { failures() >= refusedAttempts }
        try context.expectEqual(recording.connectStarts.count, refusedAttempts, "attempts when the \(refusedAttempts)th had failed")
        let server = try await context.step("starting a call server on \(address)", seconds: 10) {
            try await CallServer.start(transport: context.server, on: address) { call in
                for try await message in call.messages { try await call.write(message) }
                return .ok
            }
        }
        defer { server.close() }

        let call = try await context.step("the wait-for-ready call's start once the server listens", seconds: 10) {
            try await waiting.value
        }
        let message = ConformancePattern.bytes(count: 64, seed: 90)
        call.send(message)
        call.finishSending()
        try context.expectOK(try await context.status(of: recorder, "the wait-for-ready call"), "the wait-for-ready call")
        try context.expectEqual(recorder.snapshot.messages.count, 1, "messages echoed to the wait-for-ready call")
        try context.expectBytes(recorder.snapshot.messages[0], message, "the wait-for-ready call's echo")
        try context.expectEqual(channel.connectivityState, .ready, "the channel's state after the call")

        // The attempts against the schedule the same seed gives.
        let starts = recording.connectStarts
        try context.expectEqual(starts.count, refusedAttempts + 1, "attempts to connect (\(refusedAttempts) refused, then the one the server took)")
        let replay = SeededJitter(seed: jitterSeed)
        var backoffNow = initialBackoff
        for index in 1..<starts.count {
            var expected = initialBackoff
            if index > 1 {
                backoffNow = min(backoffNow * backoffMultiplier, maximumBackoff)
                expected = backoffNow + backoffNow * replay.draw(in: -backoffJitter...backoffJitter)
            }
            let gap = starts[index] - starts[index - 1]
            context.record("gap before attempt \(index + 1) (scheduled \(Int((expected / .milliseconds(1)).rounded())) ms)", gap)
            try context.expect(
                gap >= expected - earlyMargin && gap <= expected + lateMargin,
                "attempt \(index + 1) started \(gap) after attempt \(index); the backoff schedules it \(expected) after")
        }

        var expectedStates: [ChannelConnectivityState] = [.idle]
        for _ in 0..<refusedAttempts { expectedStates += [.connecting, .transientFailure] }
        expectedStates += [.connecting, .ready]
        try context.expectEqual(states.all, expectedStates, "the channel's states")

        // A new subscriber gets the current state first.
        var late = channel.connectivityStates.makeAsyncIterator()
        let first = await late.next()
        try context.expectEqual(first, .ready, "the first state a subscriber gets once the channel is ready")
    }
}
