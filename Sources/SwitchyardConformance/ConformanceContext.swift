public import Switchyard

/// What a scenario runs with: a client transport and a server transport (fresh for each
/// run), and helpers that fail with a clear ``ConformanceFailure`` instead of hanging or
/// trapping.
///
/// Every helper that waits has a time limit, so a scenario written with them cannot
/// hang; a limit that passes fails naming what was being waited for.
public struct ConformanceContext: Sendable {
    /// The scenario's name, used in logs and failures.
    public let scenario: String
    /// The transport clients connect from.
    public let client: any Transport
    /// The transport servers listen on.
    public let server: any Transport
    /// The client backend's registered name.
    public let clientBackend: String
    /// The server backend's registered name.
    public let serverBackend: String
    /// The client backend itself, when the runner knows it: scenarios that must make
    /// transports of their own (inside network namespaces) make them with it.
    public let clientTransportBackend: TransportBackend?
    /// The server backend itself, when the runner knows it.
    public let serverTransportBackend: TransportBackend?
    /// The configuration the runner made ``client`` and ``server`` with.
    public let configuration: TransportConfiguration
    /// For a pair of TLS backends, what the TLS scenarios need (``ConformancePair/tls``);
    /// `nil` otherwise.
    public let tls: ConformanceTLS?
    /// Where ``log(_:)`` writes its lines: standard output, unless the runner routes them
    /// elsewhere (a report written to standard output keeps them out of its way).
    var logSink: @Sendable (String) -> Void = { print($0) }
    /// What the run measured (``record(_:_:)``), shared by every copy of this context.
    let measurementLog = MeasurementLog()

    public init(
        scenario: String, client: any Transport, server: any Transport, clientBackend: String, serverBackend: String,
        clientTransportBackend: TransportBackend? = nil, serverTransportBackend: TransportBackend? = nil,
        configuration: TransportConfiguration = TransportConfiguration(), tls: ConformanceTLS? = nil
    ) {
        self.scenario = scenario
        self.client = client
        self.server = server
        self.clientBackend = clientBackend
        self.serverBackend = serverBackend
        self.clientTransportBackend = clientTransportBackend
        self.serverTransportBackend = serverTransportBackend
        self.configuration = configuration
        self.tls = tls
    }

    /// `client→server`.
    public var pair: String { "\(clientBackend)→\(serverBackend)" }

    /// Prints one line prefixed with the pair and the scenario.
    public func log(_ message: String) {
        logSink("[conformance] [\(pair)] \(scenario): \(message)")
    }

    // MARK: - Measuring

    /// Records a value this run measured, for the report (a log line says it to people;
    /// this keeps it for the report's table and its JSON).
    public func record(_ measurement: ConformanceMeasurement) {
        measurementLog.append(measurement)
    }

    /// Records a time this run measured, such as how long a stall took to detect.
    public func record(_ name: String, _ duration: Duration) {
        record(ConformanceMeasurement(name, duration))
    }

    /// Records a number of bytes this run measured, such as what a reader held.
    public func record(_ name: String, bytes: Int) {
        record(ConformanceMeasurement(name, bytes: bytes))
    }

    /// Records a count this run measured, such as how many changes a monitor reported.
    public func record(_ name: String, count: Int) {
        record(ConformanceMeasurement(name, count: count))
    }

    /// What this run recorded so far, in order.
    public var measurements: [ConformanceMeasurement] { measurementLog.all }

    // MARK: - Failing

    /// A failure of this scenario at the caller's line.
    public func failure(_ message: String, file: String = #fileID, line: Int = #line) -> ConformanceFailure {
        ConformanceFailure(scenario: scenario, pair: pair, message: message, file: file, line: line)
    }

    /// Fails the scenario.
    public func fail(_ message: String, file: String = #fileID, line: Int = #line) throws -> Never {
        throw failure(message, file: file, line: line)
    }

    /// Fails with `message` unless `condition` holds.
    public func expect(
        _ condition: Bool, _ message: @autoclosure () -> String, file: String = #fileID, line: Int = #line
    ) throws {
        if !condition { throw failure(message(), file: file, line: line) }
    }

    /// Fails unless `received == expected`, saying both.
    public func expectEqual<T: Equatable>(
        _ received: T, _ expected: T, _ what: String, file: String = #fileID, line: Int = #line
    ) throws {
        if received != expected {
            throw failure("\(what): expected \(expected), received \(received)", file: file, line: line)
        }
    }

    /// Fails unless the bytes are equal, naming the first differing offset.
    public func expectBytes(
        _ received: [UInt8], _ expected: [UInt8], _ what: String, file: String = #fileID, line: Int = #line
    ) throws {
        if let difference = ConformancePattern.difference(received, expected) {
            throw failure("\(what): \(difference)", file: file, line: line)
        }
    }

    /// Fails unless `error` is a `TransportError` with this code and reason.
    public func expectError(
        _ error: (any Error)?, code: TransportError.Code, reason: TransportError.Reason, _ what: String,
        file: String = #fileID, line: Int = #line
    ) throws {
        guard let error else {
            throw failure("\(what): expected \(code) (\(reason)), but it succeeded", file: file, line: line)
        }
        guard let transportError = error as? TransportError else {
            throw failure("\(what): expected TransportError \(code) (\(reason)), received \(type(of: error)): \(error)", file: file, line: line)
        }
        if transportError.code != code || transportError.reason != reason {
            throw failure("\(what): expected \(code) (\(reason)), received \(transportError)", file: file, line: line)
        }
    }

    /// Runs `body`, which must throw a `TransportError` with this code and reason
    /// within `seconds`; returns that error.
    @discardableResult
    public func expectError<T: Sendable>(
        code: TransportError.Code, reason: TransportError.Reason, _ what: String, within seconds: Double = 10,
        file: String = #fileID, line: Int = #line, _ body: @escaping @Sendable () async throws -> T
    ) async throws -> TransportError {
        let outcome: Result<T, any Error> = try await within(seconds: seconds, what, file: file, line: line) {
            do { return .success(try await body()) } catch { return .failure(error) }
        }
        switch outcome {
        case .success(let value):
            throw failure("\(what): expected \(code) (\(reason)), but it succeeded with \(value)", file: file, line: line)
        case .failure(let error):
            try expectError(error, code: code, reason: reason, what, file: file, line: line)
            return error as! TransportError
        }
    }

    /// Runs `body` and returns its result, or fails once `seconds` pass. A body that
    /// does not finish is cancelled and abandoned; the caller never hangs.
    public func within<T: Sendable>(
        seconds: Double, _ what: String, file: String = #fileID, line: Int = #line,
        _ body: @escaping @Sendable () async throws -> T
    ) async throws -> T {
        let timeout = failure("timed out after \(seconds) s: \(what)", file: file, line: line)
        return try await raceAgainstDeadline(.milliseconds(Int(seconds * 1000)), onTimeout: { timeout }, body)
    }

    /// Runs `body`, which reports what it has seen to `progress`, and returns its result;
    /// fails once nothing moved for `quiet` seconds (a transfer that stopped: the
    /// failure says how far it got) or once `seconds` pass in all.
    func within<T: Sendable>(
        seconds: Double, quiet: Double = quietLimit, _ what: String, progress: WaitProgress,
        file: String = #fileID, line: Int = #line, _ body: @escaping @Sendable () async throws -> T
    ) async throws -> T {
        let started = KitClock.now
        let end = started + .milliseconds(Int(seconds * 1000))
        let quietSpan = Duration.milliseconds(Int(quiet * 1000))
        return try await raceAgainstWatchdog({ now in
            let (seen, changed) = progress.snapshot
            if now >= end {
                return failure("timed out after \(seconds) s: \(what): \(seen)", file: file, line: line)
            }
            if now - changed >= quietSpan {
                return failure(
                    "\(what): nothing moved for \(quiet) s (\(milliseconds(now - started)) in all): \(seen)", file: file, line: line)
            }
            return nil
        }, body)
    }

    /// Polls `condition` every few milliseconds until it holds, or fails after `seconds`.
    public func waitUntil(
        seconds: Double, _ what: String, file: String = #fileID, line: Int = #line, _ condition: () -> Bool
    ) async throws {
        let deadline = KitClock.now + .milliseconds(Int(seconds * 1000))
        while !condition() {
            if KitClock.now >= deadline {
                throw failure("timed out after \(seconds) s waiting until \(what)", file: file, line: line)
            }
            try await KitClock.sleep(for: .milliseconds(2))
        }
    }

    /// Polls `condition` every few milliseconds until it holds: a wait for what comes in
    /// milliseconds (an echo, a callback, a count reaching its mark). It fails once
    /// `quiet` seconds pass in which neither `what` nor `seen()` changed (both are read
    /// again as it waits, so a `what` that quotes a count, "(it has 999)", is progress
    /// when the count moves), or once `seconds` pass in all. The failure quotes both as
    /// they were at the end: what arrived, not only what did not.
    func waitUntil(
        seconds: Double, quiet: Double, _ what: @autoclosure () -> String, seen: () -> String = { "" },
        file: String = #fileID, line: Int = #line, _ condition: () -> Bool
    ) async throws {
        let started = KitClock.now
        let deadline = started + .milliseconds(Int(seconds * 1000))
        let quietSpan = Duration.milliseconds(Int(quiet * 1000))
        var last = what() + seen()
        var changed = started
        while !condition() {
            let now = KitClock.now
            let current = what() + seen()
            if current != last {
                last = current
                changed = now
            }
            let saw = seen()
            let quoted = saw.isEmpty ? "" : "; \(saw)"
            if now >= deadline {
                throw failure("timed out after \(seconds) s waiting until \(what())\(quoted)", file: file, line: line)
            }
            if now - changed >= quietSpan {
                throw failure(
                    "waited \(milliseconds(now - started)) until \(what()), and nothing moved in the last \(quiet) s\(quoted)",
                    file: file, line: line)
            }
            try await KitClock.sleep(for: .milliseconds(2))
        }
    }

    // MARK: - Transports

    /// Where the server transport listens when a scenario does not say: the server
    /// backend's `TransportBackend.localEndpoint` (a fresh call each time), or
    /// `127.0.0.1`, port 0, when the runner did not say which backend it is.
    public func localEndpoint() -> Endpoint {
        serverTransportBackend?.localEndpoint() ?? Endpoint(host: "127.0.0.1", port: 0)
    }

    /// Whether the server backend's network is one of socket paths (a Unix-domain
    /// network) rather than of hosts and ports: its local endpoint is a path.
    ///
    /// Scenarios about IP (IPv6, names, the wildcard, network namespaces) skip there.
    /// Connections are still told apart by their local address, so a backend of paths
    /// must give each client socket a name of its own (Linux's autobind does). And a
    /// Unix-domain socket has no reset: `Connection.reset()` is a close, which the peer
    /// sees as `unavailable`/`reset` only when data it sent was left unread, and
    /// otherwise as end of stream (a call: `unavailable`/`closed`).
    public var listensOnPaths: Bool { localEndpoint().path != nil }

    /// Listens on the server transport: on ``localEndpoint()`` by default; on `host`
    /// (`127.0.0.1` if only a port is given) and `port` when either is given.
    public func listen(host: String? = nil, port: Int = 0, file: String = #fileID, line: Int = #line) async throws -> any Listener {
        let endpoint = host == nil && port == 0 ? localEndpoint() : Endpoint(host: host ?? "127.0.0.1", port: port)
        return try await listen(on: endpoint, file: file, line: line)
    }

    /// Listens on `endpoint` on the server transport.
    public func listen(on endpoint: Endpoint, file: String = #fileID, line: Int = #line) async throws -> any Listener {
        let server = self.server
        do {
            return try await within(seconds: 10, "listen on \(endpoint)", file: file, line: line) {
                try await server.listen(on: endpoint)
            }
        } catch let error as TransportError {
            throw failure("listen on \(endpoint) failed: \(error)", file: file, line: line)
        }
    }

    /// Connects the client transport to `endpoint`.
    public func connect(to endpoint: Endpoint, file: String = #fileID, line: Int = #line) async throws -> any Connection {
        let client = self.client
        do {
            return try await within(seconds: 15, "connect to \(endpoint)", file: file, line: line) {
                try await client.connect(to: endpoint)
            }
        } catch let error as TransportError {
            throw failure("connect to \(endpoint) failed: \(error)", file: file, line: line)
        }
    }

    /// The next connection `listener` accepted.
    public func accept(from listener: any Listener, file: String = #fileID, line: Int = #line) async throws -> any Connection {
        let accepted: (any Connection)? = try await within(seconds: 10, "accept on \(listener.localAddress)", file: file, line: line) {
            var iterator = listener.connections.makeAsyncIterator()
            return await iterator.next()
        }
        guard let accepted else {
            throw failure("the listener on \(listener.localAddress) ended its connections before accepting one", file: file, line: line)
        }
        return accepted
    }

    /// The endpoint a client connects to for `listener`: `host` (the host listened on)
    /// and the listener's port; the listener's own address when it listens on a path.
    public func endpoint(of listener: any Listener, host: String = "127.0.0.1") -> Endpoint {
        target(of: listener.localAddress, host: host)
    }

    /// The endpoint a client connects to for a server listening on `address`: `host` and
    /// its port, or the path itself.
    public func target(of address: Endpoint, host: String = "127.0.0.1") -> Endpoint {
        address.path != nil ? address : Endpoint(host: host, port: address.port)
    }

    /// A connected pair of raw connections, neither reading yet, over ``localEndpoint()``
    /// (or `host`, when given). The listener is closed once the server side is accepted.
    public func connectedRawPair(
        host: String? = nil, file: String = #fileID, line: Int = #line
    ) async throws -> (client: any Connection, server: any Connection) {
        let listener = try await listen(host: host, file: file, line: line)
        defer { listener.close() }
        let client = try await connect(to: endpoint(of: listener, host: host ?? "127.0.0.1"), file: file, line: line)
        let server = try await accept(from: listener, file: file, line: line)
        return (client, server)
    }

    /// A connected pair with the async face on both ends; the server side is taken from
    /// the listener's `Listener.connections`. The listener is closed afterwards.
    public func connectedPair(
        host: String? = nil, file: String = #fileID, line: Int = #line
    ) async throws -> (client: AsyncConnection, server: AsyncConnection) {
        let (client, server) = try await connectedRawPair(host: host, file: file, line: line)
        return (AsyncConnection(client), AsyncConnection(server))
    }

    /// Writes `bytes` on a raw connection and waits for the completion; returns its error.
    public func write(
        _ bytes: [UInt8], on connection: any Connection, seconds: Double = 30,
        file: String = #fileID, line: Int = #line
    ) async throws -> TransportError? {
        try await within(seconds: seconds, "the completion of a \(bytes.count)-byte write", file: file, line: line) {
            await withCheckedContinuation { (continuation: CheckedContinuation<TransportError?, Never>) in
                connection.write(bytes) { error in continuation.resume(returning: error) }
            }
        }
    }

    /// Reads exactly `count` bytes, failing once none arrived for two seconds (the kit's
    /// quiet limit: bytes over loopback come in milliseconds) or after `seconds` in all; a
    /// failure says how many arrived and when the last did.
    public func read(
        exactly count: Int, from connection: AsyncConnection, seconds: Double = 30,
        file: String = #fileID, line: Int = #line
    ) async throws -> [UInt8] {
        let what = "reading \(count) bytes on \(Self.name(of: connection))"
        let progress = WaitProgress("0 of \(count) bytes arrived")
        do {
            return try await within(seconds: seconds, what, progress: progress, file: file, line: line) {
                var received: [UInt8] = []
                received.reserveCapacity(count)
                let started = KitClock.now
                while received.count < count {
                    guard let chunk = try await connection.read(upTo: count - received.count) else {
                        throw TransportError(
                            code: .unavailable, reason: .closed, message: "end of stream after \(received.count) of \(count) bytes")
                    }
                    received += chunk
                    progress.advance("\(received.count) of \(count) bytes arrived, the last \(milliseconds(KitClock.now - started)) after the read began")
                }
                return received
            }
        } catch let error as TransportError {
            throw failure("\(what) failed: \(error)", file: file, line: line)
        }
    }

    /// Reads until end of stream, failing once nothing arrived for two seconds or after
    /// `seconds` in all; a failure says how many bytes arrived.
    public func readToEnd(
        from connection: AsyncConnection, seconds: Double = 30, file: String = #fileID, line: Int = #line
    ) async throws -> [UInt8] {
        let what = "reading to end of stream on \(Self.name(of: connection))"
        let progress = WaitProgress("0 bytes arrived, no end of stream")
        do {
            return try await within(seconds: seconds, what, progress: progress, file: file, line: line) {
                var received: [UInt8] = []
                while let chunk = try await connection.read() {
                    received += chunk
                    progress.advance("\(received.count) bytes arrived, no end of stream")
                }
                return received
            }
        } catch let error as TransportError {
            throw failure("\(what) failed: \(error)", file: file, line: line)
        }
    }

    /// A connection as a failure names it: its backend and its two addresses, which say
    /// which side it is (the server's is the listener's port).
    static func name(of connection: AsyncConnection) -> String {
        let raw = connection.connection
        return "the \(raw.backendName) connection \(raw.localAddress) → \(raw.remoteAddress)"
    }
}
