public import Switchyard
import SwitchyardBackendKit
import CSwitchyardPosix
import Synchronization

/// The BSD sockets backend (`"bsd"`): nonblocking TCP sockets on epoll event loops, one
/// thread per loop (one per core by default), eventfd wake-ups, each connection pinned
/// to one loop. See ``Transport`` for the contract it keeps.
///
/// With a ``TransportConfiguration/stallTimeout``, every connection is watched by its
/// loop's ``StallMonitor`` (TCP_INFO progress for data in flight; kernel keepalive and
/// `TCP_USER_TIMEOUT` for a silent peer), and a stalled connection ends with
/// `unavailable`, reason `stalled`, within the stall timeout plus one sweep interval.
///
/// ```swift
/// let transport = try BSDTransport()
/// let listener = try await transport.listen(on: Endpoint(host: "127.0.0.1", port: 0))
/// ```
public final class BSDTransport: Transport {
    /// The registry entry for this backend.
    public static let backend = TransportBackend(
        name: "bsd", summary: "BSD sockets on epoll event loops", usesSockets: true,
        make: { try BSDTransport(configuration: $0) })

    public var name: String { "bsd" }

    private let group: EpollEventLoopGroup
    private let resources = ResourceRegistry()
    /// With a stall timeout: the settings and each loop's stall monitor.
    private let stall: StallMonitors?

    private struct State {
        var accepting = true
        var stopped = false
        var listeners: [ObjectIdentifier: BSDListener] = [:]
    }
    private let state = Mutex(State())
    private let stopped = Atomic<Bool>(false)

    /// Starts the transport's event loops.
    /// - Throws: `invalidArgument` for a stall timeout that is not positive; a
    ///   ``TransportError`` when a loop or its thread cannot be made.
    public init(configuration: TransportConfiguration = TransportConfiguration()) throws(TransportError) {
        if let timeout = configuration.stallTimeout, timeout <= .zero {
            throw TransportError(code: .invalidArgument, reason: .invalidAddress, message: "the stall timeout must be positive, not \(timeout)")
        }
        // Before the loop threads exist: with fewer threads sharing the table, growing it
        // waits for fewer (or no) RCU grace periods.
        _ = csy_reserve_descriptors(CInt(clamping: configuration.reservedDescriptors))
        let group = try EpollEventLoopGroup(count: configuration.eventLoopCount, name: "sy-bsd")
        self.group = group
        stall = configuration.stallTimeout.map { StallMonitors(settings: StallSettings(timeout: $0), group: group) }
    }

    /// The stall timeout connections are held to, if any.
    public var stallTimeout: Duration? { stall?.settings.timeout }

    /// The number of event loops (threads).
    public var eventLoopCount: Int { group.loops.count }

    public func connect(to endpoint: Endpoint, options: ConnectOptions) async throws -> any Connection {
        guard state.withLock({ $0.accepting }) else { throw TransportError.transportShutdown() }
        try Endpoint.validate(host: endpoint.host)
        let start = ContinuousClock.now
        let addresses = try await Resolver.resolve(endpoint)
        var lastError: TransportError?
        for address in addresses {
            let remaining = options.timeout - start.duration(to: .now)
            if remaining <= .zero {
                throw TransportError(code: .deadlineExceeded, reason: .connectTimeout, message: "connecting to \(endpoint) took longer than \(options.timeout)")
            }
            do {
                return try await connect(to: address, timeout: remaining)
            } catch let error as TransportError {
                // Try the next address only when this one was not there.
                guard error.code == .unavailable, error.reason == .refused || error.reason == .unreachable else { throw error }
                lastError = error
            }
        }
        throw lastError ?? TransportError.nameResolution(endpoint.host, detail: "no addresses")
    }

    private func connect(to address: SocketAddress, timeout: Duration) async throws -> BSDConnection {
        let connector = BSDConnector(loop: group.next(), address: address, timeout: timeout, registry: resources, stall: stall)
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                connector.start(continuation)
            }
        } onCancel: {
            connector.cancel()
        }
    }

    public func listen(on endpoint: Endpoint, options: ListenOptions) async throws -> any Listener {
        guard state.withLock({ $0.accepting }) else { throw TransportError.transportShutdown() }
        try Endpoint.validate(host: endpoint.host)
        let address: SocketAddress
        if let literal = try SocketAddress(literal: endpoint) {
            address = literal
        } else {
            guard let first = try await Resolver.resolve(endpoint).first else {
                throw TransportError.nameResolution(endpoint.host, detail: "no addresses")
            }
            address = first
        }
        let loop = group.next()
        let group = self.group
        let resources = self.resources
        let stall = self.stall
        let backlog = options.backlog
        let onClose: @Sendable (BSDListener) -> Void = { [weak self] listener in
            _ = self?.state.withLock { $0.listeners.removeValue(forKey: ObjectIdentifier(listener)) }
        }
        // Made and started on its loop, so its socket lives where the loops live (a
        // transport made inside a network namespace listens inside it).
        let listener = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<BSDListener, any Error>) in
            let started = loop.submit {
                let listener: BSDListener
                do {
                    listener = try BSDListener(
                        address: address, backlog: backlog, loop: loop, group: group, registry: resources,
                        stall: stall, onClose: onClose)
                } catch {
                    continuation.resume(throwing: error)
                    return
                }
                do {
                    try listener.start()
                    continuation.resume(returning: listener)
                } catch {
                    listener.close()
                    continuation.resume(throwing: error)
                }
            }
            if !started { continuation.resume(throwing: TransportError.transportShutdown()) }
        }
        let admitted = state.withLock { state -> Bool in
            guard state.accepting else { return false }
            state.listeners[ObjectIdentifier(listener)] = listener
            return true
        }
        guard admitted else {
            listener.close()
            throw TransportError.transportShutdown()
        }
        return listener
    }

    /// Stops accepting new work and closes every listener.
    private func stopAccepting() -> Bool {
        let (listeners, first) = state.withLock { state -> ([BSDListener], Bool) in
            let first = state.accepting
            state.accepting = false
            let listeners = Array(state.listeners.values)
            state.listeners.removeAll()
            return (listeners, first)
        }
        for listener in listeners { listener.close() }
        return first
    }

    public func shutdown(gracePeriod: Duration) async {
        _ = stopAccepting()
        let deadline = ContinuousClock.now + gracePeriod
        while resources.count > 0, ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(5))
        }
        await shutdownNow()
    }

    public func shutdownNow() async {
        guard let resources = beginStop() else {
            // A second caller returns once the first has finished.
            while !stopped.load(ordering: .acquiring) { try? await Task.sleep(for: .milliseconds(1)) }
            return
        }
        for resource in resources {
            resource.loop.execute { resource.terminate(with: .transportShutdown()) }
        }
        // A barrier: every terminate above has run once each loop has run this.
        await group.onEveryLoop { _ in }
        group.stop()
        stopped.store(true, ordering: .releasing)
    }

    /// Closes listeners and marks the transport stopped; the resources to end, or nil if
    /// it was already stopped.
    private func beginStop() -> [any LoopResource]? {
        _ = stopAccepting()
        let first = state.withLock { state in
            defer { state.stopped = true }
            return !state.stopped
        }
        return first ? resources.close() : nil
    }

    deinit {
        // Dropped without a shutdown: end everything the same way, synchronously. Work
        // queued on a loop runs before the loop stops, so each terminate runs first.
        guard let resources = beginStop() else { return }
        for resource in resources {
            resource.loop.execute { resource.terminate(with: .transportShutdown()) }
        }
        let group = self.group
        if group.loops.contains(where: { $0.inEventLoop }) {
            // A loop cannot join itself.
            _ = runOnNewThread(name: "sy-bsd-stop") { group.stop() }
        } else {
            group.stop()
        }
    }
}
