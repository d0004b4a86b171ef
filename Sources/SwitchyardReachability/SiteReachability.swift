import Synchronization
public import Switchyard

/// Whether a site is reachable, meaning a real request to it succeeded (behaviour 6 of
/// the design; the model is LFSiteReachability and NetworkManager's connectivity check).
///
/// "Connectivity exists" (``connectivityExists``) is the monitor's answer, at once: an
/// interface carries a default route. "Reachable" is more: an HTTP/1.1 `HEAD` to the
/// configured URL, sent over a Switchyard `Transport` (any backend), got an expected
/// status within the timeout.
///
/// ```swift
/// let reachability = try SiteReachability(
///     configuration: SiteReachabilityConfiguration(url: "http://example.com/generate_204"),
///     monitor: monitor, transport: transport)
/// reachability.start()
/// for await state in reachability.updates { print(state) }   // checking, reachable (12.345 ms), ...
/// ```
///
/// ## Contract
///
/// - **Lifetime.** ``start()`` begins (once; later calls do nothing); ``stop()`` ends it:
///   a running probe is cancelled and its connection closed, every ``updates`` sequence
///   finishes, and nothing runs after it returns (but a name lookup that has not
///   returned, whose connection, if any, is closed at once). A started instance lives
///   until ``stop()``: call it. The transport is the caller's, never shut down here.
/// - **States** (``ReachabilityState``), reported in ``current`` and to every
///   ``updates`` sequence, each only when it differs from the one before:
///   - `none` while the monitor's category is `ConnectivityCategory/none`; no probe
///     runs then;
///   - `checking` when a probe starts;
///   - then the probe's answer: `reachable` (with the probe's latency), `portal`, or
///     `unreachable` (with a ``ReachabilityFailure``).
///   Before ``start()``, ``current`` is `none` if the monitor's category was `none`
///   when this was made, else `checking`.
/// - **When a probe runs**: at ``start()``; on every change the monitor reports (a
///   category change, or a change of path within one), unless the category is `none`;
///   on ``check()``; and while unreachable or behind a portal, again after each wait of
///   the ``SiteReachabilityConfiguration/backoff`` (initial, times the factor each
///   time, at most the maximum; a `reachable` answer, a `none`, or a change the monitor
///   reports starts the waits over from the initial one; a ``check()`` does not).
/// - **One probe at a time.** A ``check()`` (or a backoff wait that ends) while a probe
///   runs is *coalesced*: the running probe's answer is the answer. A change the
///   monitor reports while a probe runs *restarts* it: the running probe is cancelled
///   (its answer would describe the old path) and a new one starts once it has ended;
///   its cancelled answer is never reported.
/// - **The probe** connects to the URL's host and port (for `https`, through the
///   `SecureTransport` given, so the handshake and the certificate's check for the
///   host are part of the connect, and a failed one is `unreachable`, reason
///   `connection failed`, with the verify result in the message), writes one request
///   (`HEAD <path> HTTP/1.1` with `Host`, `User-Agent`, `Accept` and
///   `Connection: close`), and reads the response head (`HTTPHeadResponseParser`: at
///   most 16 KiB, interim `1xx` heads skipped), then closes. The whole of it (name
///   resolution, connect, write, read) is bounded by
///   ``SiteReachabilityConfiguration/timeout``: past it the probe is `unreachable`,
///   reason `timeout`, whatever the server does (silent, slow, endless); a resolver that
///   does not return is abandoned, and a connection that arrives after the timeout is
///   closed at once.
/// - **The answer's rule**, written once (``SiteReachabilityConfiguration``):
///   1. a status in ``SiteReachabilityConfiguration/expectedStatuses`` (by default every
///      `2xx`) is `reachable`;
///   2. else a `2xx`, a `3xx` (a redirect) or `511` is `portal`, with the status and the
///      `Location` header if any: something answered for the site (a captive portal's
///      redirect, its login page, or its `511 Network Authentication Required`);
///   3. else (`1xx` such as `101`, `4xx`, `5xx` but 511) `unreachable`, reason
///      `unexpected status`, with the status: the site, or a proxy, answered but
///      refused.
///   An answer that is not an HTTP/1.x head, or longer than the bound, is
///   `unreachable`, reason `malformed response`; a connection ended before the head is
///   `closed`. Transport errors map as ``ReachabilityFailure/init(mapping:)`` says
///   (refused, reset, name resolution at once, no route, timeout).
public final class SiteReachability: Sendable {
    public let configuration: SiteReachabilityConfiguration
    public let monitor: any ConnectivityMonitor
    public let transport: any Transport

    private enum Lifecycle { case idle, running, stopped }

    private struct State {
        var lifecycle = Lifecycle.idle
        var current = ReachabilityState.checking
        var subscribers: [UInt64: AsyncStream<ReachabilityState>.Continuation] = [:]
        var nextSubscriber: UInt64 = 0
        /// A probe was asked for while the driver was busy.
        var triggered = false
        /// The monitor reported a change since the driver last looked: the backoff
        /// starts over.
        var pathChanged = false
        /// The driver took a trigger and has not ended its probe yet (the probe may not
        /// have started): a ``check()`` now is coalesced into it.
        var probing = false
        /// The driver, waiting for a trigger.
        var waiter: CheckedContinuation<Bool, Never>?
        /// The probe running now.
        var probe: Task<ReachabilityState?, Never>?
        /// The backoff wait running now.
        var timer: Task<Void, Never>?
        var driver: Task<Void, Never>?
        var observation: ConnectivityObservation?
    }
    private let state = Mutex(State())

    /// Makes a reachability checker; nothing runs until ``start()``.
    ///
    /// An `https` URL needs a `SecureTransport` (such as SwitchyardTLS's `TLSTransport`
    /// with a client configuration): the probe's connect then runs the TLS handshake,
    /// verifying the certificate for the URL's host, and the `HEAD` travels encrypted.
    /// - Throws: `invalidArgument`, reason `invalid option`, for settings that
    ///   ``SiteReachabilityConfiguration/validate()`` refuses, and for an `https` URL
    ///   with a transport that is not a `SecureTransport` (it would send plaintext).
    public init(
        configuration: SiteReachabilityConfiguration, monitor: any ConnectivityMonitor, transport: any Transport
    ) throws(TransportError) {
        try configuration.validate()
        if configuration.url.isSecure, !(transport is any SecureTransport) {
            throw TransportError(
                code: .invalidArgument, reason: .invalidOption,
                message: "\(configuration.url) needs a TLS transport (a SecureTransport, such as SwitchyardTLS's TLSTransport); '\(transport.name)' would send plaintext")
        }
        self.configuration = configuration
        self.monitor = monitor
        self.transport = transport
        if monitor.current.category == .none { state.withLock { $0.current = .none } }
    }

    /// Whether an interface carries a default route, from the monitor, at once.
    public var connectivityExists: Bool { monitor.current.category != .none }

    /// The state now.
    public var current: ReachabilityState { state.withLock { $0.current } }

    /// The state now, then every change, until ``stop()``. Each access makes a new
    /// sequence; the newest 64 changes are kept for a consumer that falls behind.
    public var updates: AsyncStream<ReachabilityState> {
        let (stream, continuation) = AsyncStream.makeStream(of: ReachabilityState.self, bufferingPolicy: .bufferingNewest(64))
        let id: UInt64? = state.withLock { state in
            continuation.yield(state.current)
            guard state.lifecycle != .stopped else { return nil }
            state.nextSubscriber += 1
            state.subscribers[state.nextSubscriber] = continuation
            return state.nextSubscriber
        }
        guard let id else {
            continuation.finish()
            return stream
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.subscribers.removeValue(forKey: id) }
        }
        return stream
    }

    /// Starts observing the monitor and runs the first probe. Later calls do nothing.
    public func start() {
        let started = state.withLock { state in
            guard state.lifecycle == .idle else { return false }
            state.lifecycle = .running
            state.triggered = true
            state.driver = Task { await self.drive() }
            return true
        }
        guard started else { return }
        // Registered outside the lock: a monitor may hold its own lock while it calls
        // observers, which take this one.
        let observation = monitor.observe { [weak self] _ in self?.trigger(restart: true) }
        let keep = state.withLock { state in
            guard state.lifecycle == .running else { return false }
            state.observation = observation
            return true
        }
        if !keep { observation.cancel() }
    }

    /// Asks for a probe now (coalesced with one that is running).
    public func check() {
        trigger(restart: false)
    }

    /// Stops: cancels a running probe (closing its connection) and waits for it, finishes
    /// every ``updates`` sequence. Idempotent.
    public func stop() async {
        let (driver, waiter, subscribers, observation): (Task<Void, Never>?, CheckedContinuation<Bool, Never>?, [AsyncStream<ReachabilityState>.Continuation], ConnectivityObservation?) = state.withLock { state in
            let driver = state.driver
            guard state.lifecycle != .stopped else { return (driver, nil, [], nil) }
            state.lifecycle = .stopped
            state.probe?.cancel()
            state.timer?.cancel()
            state.timer = nil
            let waiter = state.waiter
            state.waiter = nil
            let subscribers = Array(state.subscribers.values)
            state.subscribers = [:]
            let observation = state.observation
            state.observation = nil
            return (driver, waiter, subscribers, observation)
        }
        observation?.cancel()
        waiter?.resume(returning: false)
        for subscriber in subscribers { subscriber.finish() }
        await driver?.value
    }

    // MARK: the driver

    /// A probe is asked for: by the monitor (`restart`: a running probe is cancelled and
    /// a new one follows), by ``check()`` or by the backoff timer (coalesced).
    private func trigger(restart: Bool) {
        let waiter: CheckedContinuation<Bool, Never>? = state.withLock { state in
            guard state.lifecycle == .running else { return nil }
            if restart { state.pathChanged = true }
            state.timer?.cancel()
            state.timer = nil
            if let waiter = state.waiter {
                state.waiter = nil
                state.probing = true
                return waiter
            }
            if state.probing {
                guard restart else { return nil }  // coalesced into the probe under way
                state.probe?.cancel()
            }
            state.triggered = true
            return nil
        }
        waiter?.resume(returning: true)
    }

    /// Waits for a trigger; false once stopped.
    private func nextTrigger() async -> Bool {
        await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            let now: Bool? = state.withLock { state in
                if state.lifecycle == .stopped { return false }
                if state.triggered {
                    state.triggered = false
                    state.probing = true
                    return true
                }
                state.waiter = continuation
                return nil
            }
            if let now { continuation.resume(returning: now) }
        }
    }

    private func drive() async {
        var attempt = 0
        while await nextTrigger() {
            if state.withLock({ state in defer { state.pathChanged = false }; return state.pathChanged }) {
                attempt = 0
            }
            if monitor.current.category == .none {
                state.withLock { $0.probing = false }
                attempt = 0
                publish(.none)
                continue
            }
            publish(.checking)
            enum Start { case stopped, superseded, started(Task<ReachabilityState?, Never>) }
            let start: Start = state.withLock { state in
                guard state.lifecycle == .running else { return .stopped }
                if state.triggered {
                    // A change came before the probe started: probe the new path instead.
                    state.probing = false
                    return .superseded
                }
                let probe = Task { await self.probe() }
                state.probe = probe
                return .started(probe)
            }
            guard case .started(let started) = start else {
                if case .stopped = start { break }
                continue
            }
            let answer = await started.value
            // A restart (or stop) during the probe cancelled it: its answer is not reported.
            let superseded = state.withLock { state in
                state.probe = nil
                state.probing = false
                return state.triggered || state.lifecycle != .running
            }
            guard !superseded, let answer else { continue }
            publish(answer)
            switch answer {
            case .unreachable, .portal:
                let delay = configuration.backoff.delay(attempt: attempt)
                attempt += 1
                state.withLock { state in
                    guard state.lifecycle == .running, state.waiter == nil, !state.triggered else { return }
                    state.timer = Task { [weak self] in
                        guard (try? await Task.sleep(for: delay)) != nil else { return }
                        self?.trigger(restart: false)
                    }
                }
            default:
                attempt = 0
            }
        }
    }

    private func publish(_ new: ReachabilityState) {
        state.withLock { state in
            guard state.lifecycle == .running, state.current != new else { return }
            state.current = new
            for subscriber in state.subscribers.values { subscriber.yield(new) }
        }
    }

    // MARK: the probe

    /// One probe, bounded by the timeout; nil when it was cancelled.
    private func probe() async -> ReachabilityState? {
        let start = ContinuousClock.now
        let configuration = configuration
        let transport = transport
        let race = ProbeRace()
        return await withTaskCancellationHandler {
            await race.run(
                exchange: {
                    await Self.exchange(configuration: configuration, transport: transport, start: start, race: race)
                },
                deadline: start + configuration.timeout,
                timeout: .unreachable(ReachabilityFailure(
                    reason: .timeout, message: "no answer from \(configuration.url) within \(configuration.timeout)")))
        } onCancel: {
            race.finish(nil)
        }
    }

    /// Connect, write the request, read the response head.
    private static func exchange(
        configuration: SiteReachabilityConfiguration, transport: any Transport, start: ContinuousClock.Instant,
        race: ProbeRace
    ) async -> ReachabilityState {
        let connection: AsyncConnection
        do {
            let raw = try await transport.connect(
                to: configuration.url.endpoint, options: ConnectOptions(timeout: configuration.timeout))
            connection = AsyncConnection(raw, highWatermark: 4096)
        } catch let error as TransportError {
            return .unreachable(ReachabilityFailure(mapping: error))
        } catch {
            return .unreachable(ReachabilityFailure(reason: .connectionFailed, message: "\(error)"))
        }
        guard race.adopt(connection) else { return .unreachable(ReachabilityFailure(reason: .timeout, message: "abandoned")) }
        defer { connection.close() }
        var parser = HTTPHeadResponseParser()
        do {
            try await connection.write(configuration.request)
            while true {
                let outcome: HTTPHeadResponseParser.Outcome
                if let chunk = try await connection.read() {
                    outcome = parser.append(chunk)
                } else {
                    outcome = parser.finish()
                }
                switch outcome {
                case .needMore:
                    continue
                case .complete(let head):
                    return configuration.state(
                        status: head.status, location: head.value(of: "Location"), latency: ContinuousClock.now - start)
                case .failed(let failure):
                    let reason: ReachabilityFailure.Reason = failure.endedEarly ? .closed : .malformedResponse
                    return .unreachable(ReachabilityFailure(reason: reason, message: "\(configuration.url): \(failure.message)"))
                }
            }
        } catch let error as TransportError {
            return .unreachable(ReachabilityFailure(mapping: error))
        } catch {
            return .unreachable(ReachabilityFailure(reason: .connectionFailed, message: "\(error)"))
        }
    }
}

/// One probe's race between its exchange and its deadline: the first to finish gives
/// the answer; the other is cancelled, and the exchange's connection is closed, also
/// one that arrives later. The caller never waits for the loser (a resolver thread that
/// does not return cannot hold the probe past its deadline).
private final class ProbeRace: Sendable {
    private struct State {
        var done = false
        var answer: ReachabilityState?
        var continuation: CheckedContinuation<ReachabilityState?, Never>?
        var tasks: [Task<Void, Never>] = []
        var connection: AsyncConnection?
    }
    private let state = Mutex(State())

    func run(
        exchange: @escaping @Sendable () async -> ReachabilityState, deadline: ContinuousClock.Instant,
        timeout: ReachabilityState
    ) async -> ReachabilityState? {
        await withCheckedContinuation { (continuation: CheckedContinuation<ReachabilityState?, Never>) in
            let finished: (Bool, ReachabilityState?) = state.withLock { state in
                if state.done { return (true, state.answer) }
                state.continuation = continuation
                return (false, nil)
            }
            if finished.0 {
                continuation.resume(returning: finished.1)
                return
            }
            let work = Task { self.finish(await exchange()) }
            let timer = Task {
                guard (try? await Task.sleep(until: deadline, clock: .continuous)) != nil else { return }
                self.finish(timeout)
            }
            let late = state.withLock { state in
                if state.done { return true }
                state.tasks = [work, timer]
                return false
            }
            if late {
                work.cancel()
                timer.cancel()
            }
        }
    }

    /// Gives the answer (nil: cancelled) if none was given yet.
    func finish(_ answer: ReachabilityState?) {
        let taken: (CheckedContinuation<ReachabilityState?, Never>?, [Task<Void, Never>], AsyncConnection?)? = state.withLock { state in
            guard !state.done else { return nil }
            state.done = true
            state.answer = answer
            defer {
                state.continuation = nil
                state.tasks = []
                state.connection = nil
            }
            return (state.continuation, state.tasks, state.connection)
        }
        guard let (continuation, tasks, connection) = taken else { return }
        for task in tasks { task.cancel() }
        connection?.close()
        continuation?.resume(returning: answer)
    }

    /// Keeps the exchange's connection to close it when the race ends; false (and the
    /// connection closed) when it has ended already.
    func adopt(_ connection: AsyncConnection) -> Bool {
        let adopted = state.withLock { state in
            guard !state.done else { return false }
            state.connection = connection
            return true
        }
        if !adopted { connection.close() }
        return adopted
    }
}
