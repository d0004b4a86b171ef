import Switchyard
import SwitchyardPosix

// A connect that cannot complete (A3, A4, F5 for a connect): a loopback connect completes
// at once, so these connect across the kit's fault network (`FaultNetwork`) to a port
// whose packets an nft rule drops: the SYN goes unanswered, and the connect stays pending
// until its timeout, its task's cancellation or the transport's shutdown. They need root
// (and ip, nft), and skip with one line without it, as they do for pairs without TCP
// sockets.

/// The connect timeout of ``ConformanceScenario/connectIntoBlackHoleTimesOut``.
private let blackHoleConnectTimeout: Duration = .seconds(1)
/// How late after its timeout a connect may end: a timer, not a retransmission.
private let connectTimeoutSlack: Duration = .milliseconds(500)

extension ConformanceScenario {
    /// 49. A connect into a black hole ends at its connect timeout.
    public static let connectIntoBlackHoleTimesOut = ConformanceScenario(
        "A connect into a black hole (its SYN dropped) ends with deadlineExceeded (connect timeout) at its 1 s timeout, not before and not more than 500 ms after, and its descriptor is closed",
        checklist: ["A3", "F7", "G2"], timeLimit: .seconds(45)
    ) { context in
        try await context.withFaultNetwork { rig in
            try context.networkStep("dropping the server port's packets both ways") { try rig.network.blackHole(port: rig.port) }
            let client = rig.client
            let target = rig.target
            let before = DescriptorSnapshot.take()
            let started = KitClock.now
            try await context.expectError(code: .deadlineExceeded, reason: .connectTimeout, "a connect to \(target) through the black hole with a \(blackHoleConnectTimeout) timeout", within: 10) {
                try await client.connect(to: target, options: ConnectOptions(timeout: blackHoleConnectTimeout))
            }
            let elapsed = KitClock.now - started
            context.record("connect timeout", elapsed)
            context.log("the connect with a \(blackHoleConnectTimeout) timeout ended after \(fineMilliseconds(elapsed))")
            try context.expect(elapsed >= blackHoleConnectTimeout - .milliseconds(10), "the connect ended after \(fineMilliseconds(elapsed)), before its \(blackHoleConnectTimeout) timeout")
            try context.expect(elapsed <= blackHoleConnectTimeout + connectTimeoutSlack, "the connect ended after \(fineMilliseconds(elapsed)); its timeout is \(blackHoleConnectTimeout) (allowed: \(connectTimeoutSlack) more)")
            try await context.expectDescriptorsReleased(since: before, "the timed-out connect")
        }
    }

    /// 50. Cancelling a pending connect (its task; the transport's `shutdownNow`) ends it
    /// at once and releases its descriptor.
    public static let cancelPendingConnect = ConformanceScenario(
        "A pending connect ends in under 100 ms with cancelled (task cancelled) when its task is cancelled, and with cancelled (shutdown) when its transport shuts down, and its descriptor is closed",
        checklist: ["A4", "F5", "F9", "G2"], timeLimit: .seconds(45)
    ) { context in
        try await context.withFaultNetwork { rig in
            try context.networkStep("dropping the server port's packets both ways") { try rig.network.blackHole(port: rig.port) }
            let client = rig.client
            let target = rig.target

            // The task's cancellation, twice: the second connect must not be held up by
            // anything the first left behind.
            for round in 0..<2 {
                let before = DescriptorSnapshot.take()
                let pending = try await context.pendingConnect(from: client, to: target, "the connect into the black hole (round \(round))")
                let cancelled = KitClock.now
                pending.cancel()
                try await context.expectError(code: .cancelled, reason: .taskCancelled, "the connect whose task was cancelled (round \(round))", within: 5) {
                    try await pending.value
                }
                try context.expectAtOnce(KitClock.now - cancelled, round == 0 ? "task cancelled" : "task cancelled again", "the connect whose task was cancelled (round \(round)) ended")
                try await context.expectDescriptorsReleased(since: before, "the cancelled connect (round \(round))")
            }

            // The transport's shutdownNow.
            let pending = try await context.pendingConnect(from: client, to: target, "the connect into the black hole before shutdownNow")
            let stopping = KitClock.now
            let shutdown = Task(executorPreference: KitClock.taskExecutor) { await client.shutdownNow() }
            try await context.expectError(code: .cancelled, reason: .shutdown, "the connect pending when its transport shut down", within: 5) {
                try await pending.value
            }
            try context.expectAtOnce(KitClock.now - stopping, "shutdownNow", "the connect pending when shutdownNow() began ended")
            try await context.within(seconds: 10, "shutdownNow() returned") { await shutdown.value }
            context.log("shutdownNow() returned after \(fineMilliseconds(KitClock.now - stopping))")
        }
    }
}

extension ConformanceContext {
    /// Starts a connect to `target` from `client` in a task of its own, waits 200 ms and
    /// fails unless it is still pending (a connect into a black hole must be); returns
    /// the task.
    func pendingConnect(
        from client: any Transport, to target: Endpoint, _ what: String, file: String = #fileID, line: Int = #line
    ) async throws -> Task<any Connection, any Error> {
        let ended = Collected<Int>()
        let task = Task(executorPreference: KitClock.taskExecutor) {
            defer { ended.append(1) }
            return try await client.connect(to: target, options: ConnectOptions(timeout: .seconds(30)))
        }
        try await KitClock.sleep(for: .milliseconds(200))
        guard ended.count > 0 else { return task }
        switch await task.result {
        case .success(let connection):
            connection.close()
            try fail("\(what) connected (to \(connection.remoteAddress)); the black hole should hold it pending", file: file, line: line)
        case .failure(let error):
            try fail("\(what) ended early with \(error); it should still be pending", file: file, line: line)
        }
    }

    /// Waits (up to a second) until every socket descriptor opened since `before` is
    /// closed again; fails naming what is still open.
    ///
    /// Only sockets count: what a connect opens is its socket, while a loop may open
    /// bookkeeping of its own on its first connect and keep it until it stops (libuv
    /// opens `/dev/null` once per loop, its reserve for accepting under `EMFILE`). Those
    /// are held to the run's leak check after shutdown, as every descriptor is.
    func expectDescriptorsReleased(
        since before: DescriptorSnapshot, _ what: String, file: String = #fileID, line: Int = #line
    ) async throws {
        func openSockets() -> [(fd: Int32, target: String)] {
            DescriptorSnapshot.take().opened(since: before).filter { $0.target.hasPrefix("socket:") }
        }
        let started = KitClock.now
        var left = openSockets()
        while !left.isEmpty && KitClock.now - started < .seconds(1) {
            try await KitClock.sleep(for: .milliseconds(5))
            left = openSockets()
        }
        let list = left.map { "fd \($0.fd) → \($0.target)" }.joined(separator: ", ")
        try expect(left.isEmpty, "\(what) left \(left.count) sockets open 1 s after it ended: \(list)", file: file, line: line)
    }
}
