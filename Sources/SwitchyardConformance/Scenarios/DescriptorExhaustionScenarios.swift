import Glibc
import Switchyard
import SwitchyardBackendKit
import Synchronization
import SwitchyardPosix

// Accept when the process is out of descriptors, as libuv's `emfile` test does it
// (KitChecklist.md C6 for a listener: no busy loop; A10: accepting resumes).

extension ConformanceScenario {
    /// 61. Out of descriptors (`EMFILE`) with connections waiting to be accepted: the
    /// listener does not spin, open connections keep working, and once descriptors free
    /// up accepting resumes; a connection waiting meanwhile is accepted or ended (a
    /// backend may shed it, as libuv does), never left hanging.
    public static let acceptUnderDescriptorExhaustion = ConformanceScenario(
        "Out of descriptors, a listener with connections waiting does not spin, open connections keep working, and accepting resumes once descriptors free up",
        checklist: ["C6", "A10"], timeLimit: .seconds(120)
    ) { context in
        if context.serverTransportBackend?.usesSockets == false {
            try context.skip("\(context.serverBackend) opens no descriptors: there are none to run out of")
        }
        if context.listensOnPaths { try context.skip("the kit's own clients for this scenario connect over TCP; \(context.serverBackend) listens on socket paths") }
        if context.serverTransportBackend?.speaksTLS == true {
            // They must: out of descriptors no Swift task may run, so no TLS client can.
            try context.skip("the kit's own clients for this scenario are raw sockets that echo plaintext bytes on the wire; \(context.serverBackend) answers those with a failed handshake (69 covers that)")
        }
        let listener = try await context.listen()
        defer { listener.close() }
        let endpoint = context.endpoint(of: listener)

        // Every connection is echoed from the moment it is accepted.
        listener.acceptConnections { EchoHandler($0).start() }

        // The window out of descriptors runs no Swift task and no timer of the kit, and
        // runs on a thread of its own, not on the runtime's thread pool: that pool
        // (libdispatch) reads /proc to watch its threads when work stays queued while its
        // threads are blocked, and crashes the process when it cannot open a file
        // (measured: 3 in 25 runs with tasks awaiting echoes in the window; and once in a
        // CI run with this blocking loop on one of the pool's two threads). The kit's own
        // sockets and that thread, blocked in poll(2), do the work: two connections open
        // before (the server's ends must keep working), four that connect during it (they
        // wait to be accepted). Every socket exists before the table fills; connecting
        // needs no new descriptor.
        let open = try (0..<2).map { _ in try RawClientSocket(for: endpoint) }
        let waiting = try (0..<4).map { _ in try RawClientSocket(for: endpoint) }
        defer { for socket in open + waiting { socket.close() } }
        for (index, socket) in open.enumerated() {
            try socket.startConnect(to: endpoint)
            if let problem = socket.echo(ConformancePattern.bytes(count: 512, seed: UInt64(610_000 + index)), milliseconds: 10_000) {
                try context.fail("open connection \(index), before descriptors ran out: \(problem)")
            }
        }

        let window = await onThreadOfItsOwn { () -> ExhaustionWindow in
            let exhaustion: DescriptorExhaustion
            do { exhaustion = try DescriptorExhaustion.begin() } catch { return ExhaustionWindow(beginFailure: "\(error)") }
            var problems: [String] = []
            for socket in waiting {
                do { try socket.startConnect(to: endpoint) } catch { problems.append("\(error)") }
            }
            // While the connections wait and no descriptor is free: CPU, and the open ones.
            let cpuBefore = processCPUTime()
            let wallStart = KitClock.now
            for round in 0..<5 where problems.isEmpty {
                for (index, socket) in open.enumerated() {
                    if let problem = socket.echo(ConformancePattern.bytes(count: 512, seed: UInt64(611_000 + 10 * round + index)), milliseconds: 5_000) {
                        problems.append("open connection \(index), round \(round), out of descriptors: \(problem)")
                    }
                }
                _ = poll(nil, 0, 200)
            }
            let wall = KitClock.now - wallStart
            let cpu = processCPUTime() - cpuBefore
            let stillExhausted = exhaustion.stillExhausted()
            exhaustion.end()
            return ExhaustionWindow(
                problems: problems, cpu: cpu, wall: wall, stillExhausted: stillExhausted,
                fillers: exhaustion.fillers.count, limit: exhaustion.limit)
        }
        if let failure = window.beginFailure { throw DescriptorExhaustion.Failure(description: failure) }
        let (problems, cpu, wall) = (window.problems, window.cpu, window.wall)
        context.log("out of descriptors: \(window.fillers) filler descriptors, soft limit \(window.limit)")
        try context.expect(problems.isEmpty, problems.joined(separator: "; "))
        context.record("CPU while out of descriptors", cpu)
        context.record("wall time out of descriptors", wall)
        context.log("out of descriptors for \(wall): the process used \(cpu) of CPU")
        try context.expect(window.stillExhausted, "the descriptor table had a free slot during the test (the test itself is broken)")
        // A listener that spins on EMFILE burns a core: measured here with bsd's pause on
        // EMFILE taken out, 0.96 to 1.0 s of CPU a second; with it, 3 to 7 ms. The bound,
        // a tenth of the wall time, still catches a spin that a loaded machine slows down.
        try context.expect(cpu < wall * 0.1, "the process used \(cpu) of CPU in \(wall) while out of descriptors with connections waiting: the listener spins on EMFILE")

        // Descriptors are back: each waiting connection is accepted (its bytes echo) or
        // was shed (end of stream or reset), within a bound.
        var accepted = 0
        var shed = 0
        for (index, socket) in waiting.enumerated() {
            let outcome = try await context.within(seconds: 15, "waiting connection \(index) was accepted or shed after descriptors freed up") {
                await rawEchoOrEnd(socket, tag: UInt64(612_000 + index))
            }
            switch outcome {
            case .echoed: accepted += 1
            case .ended: shed += 1
            case .failed(let why): try context.fail("waiting connection \(index): \(why)")
            }
        }
        context.record("waiting connections accepted", count: accepted)
        context.record("waiting connections shed", count: shed)
        context.log("after descriptors freed up: \(accepted) waiting connections accepted, \(shed) shed")

        // Accepting resumed: a new connection is accepted and echoes.
        let started = KitClock.now
        let fresh = AsyncConnection(try await context.connect(to: endpoint))
        let ping = ConformancePattern.bytes(count: 512, seed: 613_000)
        try await context.step("an echo on a new connection after descriptors freed up") { try await fresh.write(ping) }
        try context.expectBytes(try await context.read(exactly: ping.count, from: fresh, seconds: 10), ping, "the echo on a new connection after descriptors freed up")
        context.record("new connection echoed after", KitClock.now - started)
        fresh.close()
        for (index, socket) in open.enumerated() {
            if let problem = socket.echo(ConformancePattern.bytes(count: 512, seed: UInt64(614_000 + index)), milliseconds: 10_000) {
                try context.fail("open connection \(index), after descriptors freed up: \(problem)")
            }
        }
    }
}

/// What the window out of descriptors saw, handed back from its thread.
private struct ExhaustionWindow: Sendable {
    var beginFailure: String?
    var problems: [String] = []
    var cpu: Duration = .zero
    var wall: Duration = .zero
    var stillExhausted = false
    var fillers = 0
    var limit: rlim_t = 0

    init(beginFailure: String) { self.beginFailure = beginFailure }
    init(problems: [String], cpu: Duration, wall: Duration, stillExhausted: Bool, fillers: Int, limit: rlim_t) {
        (self.problems, self.cpu, self.wall, self.stillExhausted, self.fillers, self.limit) = (problems, cpu, wall, stillExhausted, fillers, limit)
    }
}

/// Runs `body` on a new thread (not the runtime's pool) and returns its result; on the
/// calling task's thread if no thread can be started.
private func onThreadOfItsOwn<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
        if !runOnNewThread(name: "kit-emfile", { continuation.resume(returning: body()) }) {
            continuation.resume(returning: body())
        }
    }
}

/// The outcome of a raw client's echo attempt.
private enum RawEcho: Sendable {
    case echoed
    case ended
    case failed(String)
}

/// Waits until `socket` is connected, sends an 8-byte tag and waits for it back; a
/// connection the server shed ends instead. Bounded by the caller.
private func rawEchoOrEnd(_ socket: RawClientSocket, tag: UInt64) async -> RawEcho {
    let bytes = withUnsafeBytes(of: tag.littleEndian) { Array($0) }
    while socket.wait(for: Int16(POLLOUT), milliseconds: 0) == 0 {
        try? await KitClock.sleep(for: .milliseconds(5))
    }
    let code = socket.connectError()
    if code == ECONNRESET || code == ECONNREFUSED || code == EPIPE { return .ended }
    if code != 0 { return .failed("the connect failed: \(String(cString: strerror(code)))") }
    if let error = socket.send(bytes) {
        return error == EPIPE || error == ECONNRESET ? .ended : .failed("send failed: \(String(cString: strerror(error)))")
    }
    var received: [UInt8] = []
    while !Task.isCancelled {
        switch socket.receive() {
        case .bytes(let more):
            received += more
            if received.count >= bytes.count {
                return received == bytes ? .echoed : .failed("received \(received) for the tag \(bytes)")
            }
        case .endOfStream:
            return .ended
        case .failed(let error):
            return error == ECONNRESET ? .ended : .failed("recv failed: \(String(cString: strerror(error)))")
        case .nothing:
            try? await KitClock.sleep(for: .milliseconds(5))
        }
    }
    return .failed("cancelled")
}

/// The process out of descriptors: the soft `RLIMIT_NOFILE` lowered to a little above
/// the highest open descriptor, and every free number below it taken by a duplicate of
/// `/dev/null`. ``end()`` closes the duplicates and restores the limit. Process-wide:
/// the kit runs alone (it counts descriptors anyway).
private final class DescriptorExhaustion: Sendable {
    let fillers: [CInt]
    let limit: rlim_t
    private let saved: rlimit
    private let ended = Atomic<Bool>(false)

    private init(fillers: [CInt], limit: rlim_t, saved: rlimit) {
        self.fillers = fillers
        self.limit = limit
        self.saved = saved
    }

    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    static func begin() throws -> DescriptorExhaustion {
        var saved = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &saved) == 0 else {
            throw Failure(description: "getrlimit(RLIMIT_NOFILE) failed")
        }
        let null = open("/dev/null", O_RDONLY | O_CLOEXEC)
        guard null >= 0 else { throw Failure(description: "cannot open /dev/null") }
        let highest = DescriptorSnapshot.take().targets.keys.max() ?? null
        let limit = rlim_t(highest + 1 + 8)
        guard limit <= saved.rlim_cur else {
            close(null)
            throw Failure(description: "the soft descriptor limit \(saved.rlim_cur) is already below \(limit)")
        }
        var lowered = saved
        lowered.rlim_cur = limit
        guard setrlimit(Int32(RLIMIT_NOFILE.rawValue), &lowered) == 0 else {
            close(null)
            throw Failure(description: "setrlimit(RLIMIT_NOFILE, \(limit)) failed")
        }
        var fillers: [CInt] = [null]
        fillers.reserveCapacity(Int(limit))
        while fillers.count <= Int(limit) {
            let copy = fcntl(null, F_DUPFD_CLOEXEC, 0)
            if copy < 0 { break }
            fillers.append(copy)
        }
        let code = errno
        let exhaustion = DescriptorExhaustion(fillers: fillers, limit: limit, saved: saved)
        guard code == EMFILE else {
            exhaustion.end()
            throw Failure(description: "filling the descriptor table stopped with \(String(cString: strerror(code))), not EMFILE")
        }
        return exhaustion
    }

    /// Whether no descriptor can be opened now (it opens none if so).
    func stillExhausted() -> Bool {
        let probe = fcntl(fillers[0], F_DUPFD_CLOEXEC, 0)
        if probe >= 0 {
            close(probe)
            return false
        }
        return errno == EMFILE
    }

    /// Frees the descriptors and restores the limit. Idempotent.
    func end() {
        guard !ended.exchange(true, ordering: .acquiringAndReleasing) else { return }
        for fd in fillers { close(fd) }
        var restored = saved
        _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &restored)
    }
}
