import Switchyard
import SwitchyardCalls
import Synchronization

extension ConformanceScenario {
    /// F5 for the async face: task cancellation reaches the call. A task cancelled while it
    /// waits for a message, for a write the peer pushes back, or for the status, ends
    /// that wait under 100 ms: the read and the write throw `cancelled` (`call cancelled`),
    /// the status is that, and the server's call ends too (`unavailable` over TCP; over
    /// socket paths the client's close reads as its end, and the server finishes).
    public static let callTaskCancellation = ConformanceScenario(
        "A cancelled task ends its call's pending read, pushed-back write or status wait at once with cancelled; the peer's call ends",
        checklist: ["F5", "E8"], timeLimit: .seconds(90)
    ) { context in
        // A server whose calls take nothing (flow control on, no message asked for) and
        // answer nothing: a read waits, and writes are pushed back once the windows fill.
        let serverCalls = Collected<CallRecorder>()
        let serverCallObjects = Collected<Call>()
        let options = CallConfiguration(enableFlowControl: true)
        let server = try await context.startCallServer(options: options) { call in
            // It finishes its call when the client's end arrives: on a network of socket
            // paths the client's reset is a close, which the server reads as that end.
            let recorder = CallRecorder(keepsMessages: false, onEnd: { call in call.finish() })
            serverCalls.append(recorder)
            serverCallObjects.append(call)
            return recorder
        }
        defer { server.close() }
        let channel = context.channel(to: server)
        let block = ConformancePattern.bytes(count: 1 << 20, seed: 47)

        for wait in ["read", "write", "status"] {
            let index = serverCalls.count
            let outcome = try await context.step("a \(wait) whose task is cancelled", seconds: 40) {
                try await channel.withCall(options: options) { call -> (error: (any Error)?, status: CallStatus, latency: Duration, writes: Int) in
                    let writes = Atomic<Int>(0)
                    let task = Task(executorPreference: KitClock.taskExecutor) { () -> (any Error)? in
                        do {
                            switch wait {
                            case "read":
                                _ = try await call.next()
                            case "write":
                                while true {
                                    try await call.write(block)
                                    writes.add(1, ordering: .relaxed)
                                }
                            default:
                                _ = await call.status()
                            }
                            return nil
                        } catch {
                            return error
                        }
                    }
                    // Let the wait begin; for the write, until no write completed for 300 ms
                    // (the windows are full and one write is pending).
                    var seen = -1
                    var still = KitClock.now
                    while true {
                        try await KitClock.sleep(for: .milliseconds(50))
                        let now = writes.load(ordering: .relaxed)
                        if now != seen { seen = now; still = KitClock.now }
                        if KitClock.now - still >= .milliseconds(300) { break }
                    }
                    let cancelled = KitClock.now
                    task.cancel()
                    let error = await task.value
                    let latency = KitClock.now - cancelled
                    return (error, await call.status(), latency, writes.load(ordering: .relaxed))
                }
            }
            if wait != "status" {
                try context.expectError(outcome.error, code: .cancelled, reason: .callCancelled, "the cancelled task's \(wait)")
            }
            try context.expectStatus(outcome.status, code: .cancelled, reason: .callCancelled, "the call's status after its task's \(wait) was cancelled")
            try context.expect(
                outcome.latency < .milliseconds(100),
                "the cancelled \(wait) ended \(outcome.latency) after the task was cancelled (at once means under 100 ms)")
            context.record("cancelled \(wait) ended after", outcome.latency)
            if wait == "write" {
                context.log("the write was pending after \(outcome.writes) MiB were taken")
            }
            try await context.waitUntil(seconds: 10, quiet: quietLimit, "the server's call of the cancelled \(wait) started") { serverCalls.count > index }
            if context.listensOnPaths {
                // On a network of socket paths the client's reset is a close: an end of
                // stream, which a call whose reads are stopped (the write's, pushed back)
                // reads only once it asks. It asks now.
                if wait == "write" { serverCallObjects[index].receiveNextMessages(1 << 20) }
                let serverStatus = try await context.status(of: serverCalls[index], "the server's call of the cancelled \(wait)", quiet: quietLimit)
                context.log("the server's call of the cancelled \(wait) ended: \(serverStatus)")
            } else {
                // The server's call asks for nothing (for the write, its reads are stopped
                // with the windows full): the client's RST_STREAM CANCEL reaches it all the
                // same, with no read or write of its own.
                let serverStatus = try await context.status(
                    of: serverCalls[index], "the server's call of the cancelled \(wait), which asks for nothing, after the client reset", seconds: 5)
                try context.expectStatus(serverStatus, code: .cancelled, reason: .reset, "the status of the server's call of the cancelled \(wait), which asks for nothing")
                context.log("the server's call of the cancelled \(wait) ended: \(serverStatus)")
            }
        }
    }
}

extension ConformanceScenario {
    /// F7: a call's deadline (`CallConfiguration.timeout`). A call still waiting when it passes
    /// ends `deadlineExceeded`, reason `timed out`, within 100 ms of it, and the server's
    /// call ends too; a call that finished first keeps its OK status after the deadline.
    public static let callDeadlineExceeded = ConformanceScenario(
        "A call past its deadline ends deadlineExceeded within 100 ms of it; one that finished first stays OK",
        checklist: ["F7"], timeLimit: .seconds(60)
    ) { context in
        let serverCalls = Collected<CallRecorder>()
        let hold = Array("hold".utf8)
        let server = try await context.startCallServer { _ in
            // Echoes, except "hold", which it never answers.
            let recorder = CallRecorder(
                keepsMessages: false,
                onReceive: { call, message in if message != hold { call.send(message) } },
                onEnd: { call in call.finish() })
            serverCalls.append(recorder)
            return recorder
        }
        defer { server.close() }
        let channel = context.channel(to: server)
        let timeout = Duration.milliseconds(400)

        // A reply that never comes: the read ends at the deadline.
        let index = serverCalls.count
        let outcome = try await context.step("a call whose reply never comes, with a \(timeout) deadline", seconds: 20) {
            let asked = KitClock.now
            return try await channel.withCall(options: CallConfiguration(timeout: timeout)) { call -> (error: (any Error)?, status: CallStatus, after: Duration) in
                try await call.write(hold)
                do {
                    _ = try await call.next()
                    return (nil, await call.status(), KitClock.now - asked)
                } catch {
                    return (error, await call.status(), KitClock.now - asked)
                }
            }
        }
        try context.expectError(outcome.error, code: .deadlineExceeded, reason: .timedOut, "the read of a call past its deadline")
        try context.expectStatus(outcome.status, code: .deadlineExceeded, reason: .timedOut, "the status of a call past its deadline")
        try context.expect(
            outcome.after >= timeout && outcome.after < timeout + .milliseconds(100),
            "the call ended \(outcome.after) after it was asked for; its deadline was \(timeout) (within 100 ms of it expected)")
        context.record("deadline passed, call ended after", outcome.after)
        try await context.waitUntil(seconds: 10, quiet: quietLimit, "the server's call started") { serverCalls.count > index }
        let serverStatus = try await context.status(of: serverCalls[index], "the server's call of the call past its deadline", quiet: quietLimit)
        try context.expect(!serverStatus.isOK, "the server's call ended OK after the client's deadline passed")

        // A call that finishes in time: OK, and still OK after its deadline.
        let message = ConformancePattern.bytes(count: 1000, seed: 48)
        let (echo, status) = try await context.step("a call that finishes before its deadline", seconds: 20) {
            try await channel.withCall(options: CallConfiguration(timeout: timeout)) { call -> ([UInt8]?, CallStatus) in
                try await call.write(message)
                let echo = try await call.next()
                try await call.finishSending()
                while try await call.next() != nil {}
                _ = await call.status()
                try await KitClock.sleep(for: timeout + .milliseconds(100))
                return (echo, await call.status())
            }
        }
        try context.expectBytes(echo ?? [], message, "the echo of a call within its deadline")
        try context.expectOK(status, "a call that finished before its deadline")
    }
}
