import Glibc
import Switchyard
import SwitchyardCalls

extension ConformanceScenario {
    /// 40. A descriptor reclaimed underneath a call ends it `unavailable`/`reclaimed`:
    /// for every kind of replacement `dup2` can put in its place (`DescriptorReplacement`),
    /// on the client's side and on the server's, and for a socket the kernel destroyed
    /// (`ss -K`, `SOCK_DESTROY`). No write after the replacement is reported sent, nothing
    /// crashes or leaks (the kit checks descriptors after the run), and the channel's next
    /// call connects afresh and succeeds.
    ///
    /// The kit finds the connection's descriptor by its ports (`SocketDescriptors`), so
    /// a backend without TCP descriptors (the in-memory one, a backend on socket paths)
    /// skips it. `ss -K` needs root and a kernel with `CONFIG_INET_DIAG_DESTROY`; without
    /// them that case alone is skipped (logged), and the filter names both addresses and
    /// ports of the kit's own connection, so nothing else is touched.
    public static let reclaimedSocketEndsCall = ConformanceScenario(
        "A descriptor reclaimed underneath a call (dup2 of a fresh socket, /dev/null, a file or a pipe, on either side; ss -K) ends it unavailable (reclaimed), reports no write sent after it, and the next call succeeds",
        checklist: ["E4", "E6", "J3"], timeLimit: .seconds(120)
    ) { context in
        if context.listensOnPaths { try context.skip("\(context.serverBackend) listens on socket paths: the kit finds a connection's descriptor by its TCP ports") }
        let serverCalls = Collected<(call: Call, recorder: CallRecorder)>()
        let server = try await context.startCallServer { call in
            let recorder = CallRecorder(onReceive: { call, message in call.send(message) }, onEnd: { call in call.finish() })
            serverCalls.append((call, recorder))
            return recorder
        }
        defer { server.close() }
        let channel = context.channel(to: server)
        // A simulated network has no descriptors: its system reclaims a socket itself.
        let simulated = KitClock.simulatedNetwork
        var cases: [ReclaimCase] = DescriptorReplacement.allCases.map { .client($0) }
        cases += DescriptorReplacement.allCases.map { .server($0) }
        cases += DescriptorReplacement.allCases.map { .clientNotReading($0) }
        cases.append(.destroyed)
        if simulated != nil { cases = [.simulated(serverSide: false), .simulated(serverSide: true)] }
        var seed: UInt64 = 38_000
        for reclaim in cases {
            seed += 1
            let serverCallsBefore = serverCalls.count
            let recorder = CallRecorder()
            let call = try await context.startCall(
                on: channel, options: CallConfiguration(enableFlowControl: reclaim.stopsReading), handler: recorder)
            if reclaim.stopsReading { call.receiveNextMessage() }
            call.send(ConformancePattern.bytes(count: 100, seed: seed))
            try await context.waitUntil(seconds: 10, quiet: quietLimit, "the first echo arrived (\(reclaim))", seen: recorder.seen) { recorder.messageCount == 1 }
            if reclaim.stopsReading {
                // A second echo that nobody asked for: the call holds its frame and stops
                // reading the socket.
                call.send(ConformancePattern.bytes(count: 100, seed: seed + 300))
                let held = KitClock.now + .seconds(10)
                while try await context.bufferedBytes(of: call) < 105 {
                    if KitClock.now > held { try context.fail("\(reclaim): the second echo never arrived") }
                    try await KitClock.sleep(for: .milliseconds(2))
                }
            }
            let clientPort = call.connection.localAddress.port
            let serverPort = call.connection.remoteAddress.port
            let (localPort, remotePort) = reclaim.isServerSide ? (serverPort, clientPort) : (clientPort, serverPort)
            var fd: Int32 = -1
            if simulated == nil {
                guard let found = SocketDescriptors.descriptor(localPort: localPort, remotePort: remotePort) else {
                    call.cancel()
                    try context.skip("no established TCP socket from port \(localPort) to \(remotePort) in /proc/net/tcp(6) and /proc/self/fd: \(context.pair) has no TCP descriptors")
                }
                fd = found
            }
            // The side whose descriptor goes, and the call that must end reclaimed.
            let (victim, victimRecorder): (Call, CallRecorder)
            if reclaim.isServerSide {
                try await context.waitUntil(seconds: 5, quiet: quietLimit, "the server has the call (\(reclaim))") { serverCalls.count > serverCallsBefore }
                (victim, victimRecorder) = serverCalls[serverCallsBefore]
            } else {
                (victim, victimRecorder) = (call, recorder)
            }

            var kept: [Int32] = []
            switch reclaim {
            case .client(let replacement), .server(let replacement), .clientNotReading(let replacement):
                do { kept = try replacement.replace(fd) } catch { try context.fail("\(reclaim): \(error)") }
            case .simulated:
                let (local, remote) = (call.connection.localAddress, call.connection.remoteAddress)
                simulated?.inject(reclaim.isServerSide ? .reclaimSocket(local: remote, remote: local) : .reclaimSocket(local: local, remote: remote))
                // It acts in a turn of its own, as dup2 acts before the write below.
                try await KitClock.sleep(for: .milliseconds(1))
            case .destroyed:
                guard geteuid() == 0 else {
                    context.log("ss -K skipped: not root (SOCK_DESTROY needs CAP_NET_ADMIN)")
                    call.cancel()
                    _ = try await context.status(of: recorder, "the call left when ss -K was skipped", seconds: 5)
                    continue
                }
                // Both ends' addresses and ports: exactly this connection's socket, nothing else.
                func socketAddress(_ endpoint: Endpoint) -> String {
                    endpoint.host.contains(":") ? "[\(endpoint.host)]:\(endpoint.port)" : "\(endpoint.host):\(endpoint.port)"
                }
                FaultNetwork.run([
                    "ss", "-K", "-t", "-n", "src", socketAddress(call.connection.localAddress),
                    "and", "dst", socketAddress(call.connection.remoteAddress),
                ])
                if SocketDescriptors.establishedInode(localPort: localPort, remotePort: remotePort) != nil {
                    context.log("ss -K skipped: the socket survived `ss -K` (no `ss`, or a kernel without CONFIG_INET_DIAG_DESTROY)")
                    call.cancel()
                    _ = try await context.status(of: recorder, "the call left when ss -K was skipped", seconds: 5)
                    continue
                }
            }
            defer { DescriptorReplacement.release(kept) }

            if reclaim.stopsReading {
                // The call asks for a message: the connection starts reading again, and
                // the backend changes what it watches the replaced descriptor for (where
                // libuv used to abort the process: epoll_ctl fails on /dev/null and
                // files, and on any replacement of a descriptor it had registered).
                call.receiveNextMessage()
                try await context.waitUntil(seconds: 5, "the held echo was delivered (\(reclaim))") { recorder.messageCount == 2 }
                try await KitClock.sleep(for: .milliseconds(50))
                context.log("\(reclaim): \(recorder.status.map { "the read demand alone ended the call: \($0.error.map { "\($0)" } ?? "OK")" } ?? "the read demand alone did not end the call (no event on the replacement); the write below must")")
            }

            // A write after the replacement: it must fail, never complete as sent.
            let written = KitClock.now
            victim.send(ConformancePattern.bytes(count: 100, seed: seed + 100)) { victimRecorder.note(completion: 1, $0) }
            let status = try await context.status(of: victimRecorder, "the call whose descriptor was reclaimed (\(reclaim))", seconds: 5)
            context.record("\(reclaim.label)", KitClock.now - written)
            try context.expectStatus(status, code: .unavailable, reason: .reclaimed, "the call whose descriptor was reclaimed (\(reclaim))")
            try await context.waitUntil(seconds: 5, "the write after the replacement completed (\(reclaim))") {
                victimRecorder.snapshot.log.contains(.completion(1))
            }
            let failed = victimRecorder.snapshot.failedCompletions.contains { $0.0 == 1 }
            try context.expect(failed, "\(reclaim): the write after the replacement was reported sent")
            try context.expectWellBehaved(victimRecorder, "the call whose descriptor was reclaimed (\(reclaim))")
            if reclaim.isServerSide {
                // The client's call lost its server: it ends too, with whatever the peer's
                // end looked like (end of stream or reset), and within the status wait.
                _ = try await context.status(of: recorder, "the client's call after the server's descriptor was reclaimed (\(reclaim))", seconds: 10)
            }
            context.log("\(reclaim): ended \(status.error.map { "\($0)" } ?? "OK")")

            // The channel's next call connects afresh and succeeds.
            let next = CallRecorder(onReceive: { call, _ in call.finishSending() })
            let nextCall = try await context.startCall(on: channel, handler: next)
            let message = ConformancePattern.bytes(count: 1000, seed: seed + 200)
            nextCall.send(message)
            let nextStatus = try await context.status(of: next, "the call after \(reclaim)", seconds: 10)
            try context.expectOK(nextStatus, "the call after \(reclaim)")
            try context.expectEqual(next.messageCount, 1, "messages echoed in the call after \(reclaim)")
            try context.expectBytes(next.snapshot.messages[0], message, "the echo in the call after \(reclaim)")
        }
        try await context.waitUntil(seconds: 5, quiet: quietLimit, "the channel has no open call left (\(channel.openCalls))") { channel.openCalls == 0 }

        // Queued writes wait in a descriptor's kernel buffer only on a real socket.
        guard simulated == nil else { return }
        for replacement in DescriptorReplacement.allCases {
            try await reclaimWithQueuedWrites(context, replacement)
        }
    }

    /// A backend connection's descriptor replaced while its writes wait for the kernel
    /// (the peer does not read): no event comes for the replacement and a later write
    /// joins the queue without a system call, so the connection goes on until it is
    /// closed; none of the writes still queued, nor the one after, is reported sent
    /// (libuv's queued `uv_write` must not put them into the replacement), closing leaks
    /// nothing, and nothing crashes.
    ///
    /// On a raw connection pair: a call's writes on gRPC's wire wait for its HTTP/2
    /// stream's flow-control window, not in the backend's queue, and this is the
    /// backend's property.
    private static func reclaimWithQueuedWrites(_ context: ConformanceContext, _ replacement: DescriptorReplacement) async throws {
        let what = "the client's descriptor replaced by \(replacement.rawValue) with writes queued"
        let listener = try await context.listen()
        defer { listener.close() }
        let connection = try await context.connect(to: context.endpoint(of: listener))
        // The accepted side never reads: TCP pushes back and the client's writes queue.
        let accepted = try await context.accept(from: listener)
        defer { accepted.close() }
        _ = RecordingHandler(on: accepted)
        let handler = RecordingHandler(on: connection)
        let completions = CompletionLog()
        let chunk = ConformancePattern.bytes(count: 1 << 20, seed: 38_500)
        var sends = 0
        while connection.pendingWriteBytes == 0 {
            sends += 1
            if sends > 256 { try context.fail("\(what): 256 MiB went out and no write queued") }
            let index = 100 + sends
            connection.write(chunk) { completions.record(index, $0) }
            try await context.barrier(on: connection.eventLoop, "write \(sends) (\(what))")
        }
        guard let fd = SocketDescriptors.descriptor(localPort: connection.localAddress.port, remotePort: connection.remoteAddress.port)
        else { try context.fail("\(what): the client's descriptor was not found") }
        try await KitClock.sleep(for: .milliseconds(20))
        try await context.barrier(on: connection.eventLoop, "settling (\(what))")
        let sentBefore = completions.all.filter { $0.error == nil }.count
        let kept: [Int32]
        do { kept = try replacement.replace(fd) } catch { try context.fail("\(what): \(error)") }
        defer { DescriptorReplacement.release(kept) }
        connection.write(chunk) { completions.record(1, $0) }
        try await KitClock.sleep(for: .milliseconds(100))
        let endedBySelf = !handler.snapshot.closes.isEmpty
        connection.close()
        try await context.waitUntil(seconds: 5, "the connection closed (\(what))") { !handler.snapshot.closes.isEmpty }
        try await context.waitUntil(seconds: 5, "every write completed (\(what))") { completions.count == sends + 1 }
        let entries = completions.all
        let sentAfter = entries.filter { $0.error == nil }.count
        try context.expect(sentAfter == sentBefore, "\(what): \(sentAfter - sentBefore) writes were reported sent after the replacement")
        try context.expect(entries.contains { $0.index == 1 && $0.error != nil }, "\(what): the write after the replacement was reported sent")
        let events = handler.snapshot
        try context.expectEqual(events.closes.count, 1, "\(what): connectionDidClose calls")
        try context.expect(events.offLoopCalls.isEmpty, "\(what): callbacks ran off the connection's loop: \(events.offLoopCalls)")
        let ending = events.closes[0].map { "\($0.code) (\($0.reason))" } ?? "no error"
        context.log("\(what): \(sentBefore) of \(sends) writes sent before, none after; \(endedBySelf ? "it ended by itself" : "closed"): \(ending)")
    }
}

/// One way a call's descriptor is reclaimed in ``ConformanceScenario/reclaimedSocketEndsCall``.
enum ReclaimCase: Sendable, CustomStringConvertible {
    /// The client's descriptor replaced.
    case client(DescriptorReplacement)
    /// The server's descriptor of the accepted call replaced.
    case server(DescriptorReplacement)
    /// The client's descriptor replaced while its call (flow control on) does not read,
    /// then the call asks for a message, so the connection reads again.
    case clientNotReading(DescriptorReplacement)
    /// The client's socket destroyed by the kernel (`ss -K`).
    case destroyed
    /// On a simulated network: the client's (or the server's) socket reclaimed by the
    /// simulated system (`SimulatedFault.reclaimSocket(local:remote:)`).
    case simulated(serverSide: Bool)

    var isServerSide: Bool {
        switch self {
        case .server, .simulated(serverSide: true): true
        default: false
        }
    }

    var stopsReading: Bool {
        if case .clientNotReading = self { return true }
        return false
    }

    var description: String {
        switch self {
        case .client(let replacement): "the client's descriptor replaced by \(replacement.rawValue)"
        case .server(let replacement): "the server's descriptor replaced by \(replacement.rawValue)"
        case .clientNotReading(let replacement): "the client's descriptor replaced by \(replacement.rawValue) while not reading, then a read asked for"
        case .destroyed: "the client's socket destroyed by ss -K"
        case .simulated(let serverSide): "the \(serverSide ? "server" : "client")'s socket reclaimed by the simulated system"
        }
    }

    /// A short name for the measurement.
    var label: String {
        switch self {
        case .client(let replacement): "client \(replacement)"
        case .server(let replacement): "server \(replacement)"
        case .clientNotReading(let replacement): "client \(replacement) not reading"
        case .destroyed: "ss -K"
        case .simulated(let serverSide): "\(serverSide ? "server" : "client") reclaimed"
        }
    }
}
