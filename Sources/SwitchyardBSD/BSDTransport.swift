public import Switchyard
public import SwitchyardBackendKit
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
/// With ``TransportConfiguration/kernelStallDetection`` off, sockets get no keepalive and
/// no `TCP_USER_TIMEOUT`: the TCP_INFO monitor alone ends a stall with data in flight
/// (a silent peer under an idle connection is then not detected).
///
/// ```swift
/// let transport = try BSDTransport()
/// let listener = try await transport.listen(on: Endpoint(host: "127.0.0.1", port: 0))
/// ```
public final class BSDTransport: LifecycleTransport {
    /// The registry entry for this backend.
    public static let backend = TransportBackend(
        name: "bsd", summary: "BSD sockets on epoll event loops", usesSockets: true,
        make: { try BSDTransport(configuration: $0) })

    public var name: String { "bsd" }

    private let group: EpollEventLoopGroup
    private let lifecycle: TransportLifecycle<EpollEventLoop>
    /// With a stall timeout: the settings and each loop's stall monitor.
    private let stall: StallMonitors?

    /// Starts the transport's event loops.
    /// - Throws: `invalidArgument`/`invalid option` for settings out of range
    ///   (``TransportConfiguration/validate()``, ``StallSettings/of(_:)``: a stall timeout
    ///   that is not positive or over 3 days); a ``TransportError`` when a loop or its
    ///   thread cannot be made.
    public init(configuration: TransportConfiguration = TransportConfiguration()) throws(TransportError) {
        try configuration.validate()
        let settings = try StallSettings.of(configuration)
        // Before the loop threads exist: with fewer threads sharing the table, growing it
        // waits for fewer (or no) RCU grace periods.
        _ = csy_reserve_descriptors(CInt(clamping: configuration.reservedDescriptors))
        let group = try EpollEventLoopGroup(count: configuration.eventLoopCount, name: "sy-bsd")
        self.group = group
        lifecycle = TransportLifecycle(group: group, observer: TransportObserver(backend: "bsd", logger: configuration.logger))
        stall = settings.map { StallMonitors(settings: $0, group: group) }
    }

    /// The stall timeout connections are held to, if any.
    public var stallTimeout: Duration? { stall?.settings.timeout }

    /// The number of event loops (threads).
    public var eventLoopCount: Int { group.loops.count }

    /// Resolves `endpoint` and connects to its addresses the toolkit's way
    /// (``HappyEyeballs``: IPv6 first, families alternating, a new attempt every 250 ms
    /// while earlier ones are pending, the next one at once when one fails).
    public func connect(to endpoint: Endpoint, options: ConnectOptions) async throws -> any Connection {
        try await lifecycle.observingConnect(to: endpoint) {
            try lifecycle.ensureAccepting()
            try NameResolution.checkHostAndPort(endpoint)
            return try await HappyEyeballs.connect(
                to: endpoint, timeout: options.timeout, discard: { $0.close() },
                attempt: { address, timeout in try await self.connect(to: address, timeout: timeout) })
        }
    }

    private func connect(to address: SystemSocketAddress, timeout: Duration) async throws -> BSDConnection {
        try await BSDConnector(loop: group.next(), address: address, timeout: timeout, registry: lifecycle, stall: stall)
            .connected()
    }

    public func listen(on endpoint: Endpoint, options: ListenOptions) async throws -> any Listener {
        try lifecycle.ensureAccepting()
        try NameResolution.checkHostAndPort(endpoint)
        let address = try await HostResolver.listenAddress(for: endpoint)
        let loop = group.next()
        let group = self.group
        let lifecycle = self.lifecycle
        let stall = self.stall
        let backlog = options.backlog
        // Made and started on its loop, so its socket lives where the loops live (a
        // transport made inside a network namespace listens inside it).
        let listener = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<BSDListener, any Error>) in
            let started = loop.submit {
                let listener: BSDListener
                do {
                    listener = try BSDListener(
                        address: address, backlog: backlog, loop: loop, group: group, registry: lifecycle,
                        stall: stall)
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
        try lifecycle.admit(listener)
        return listener
    }

    /// Its lifecycle runs ``Transport/shutdown(gracePeriod:)`` and ``Transport/shutdownNow()``.
    public var shutdownSequence: any TransportShutdownSequence { lifecycle }

    deinit {
        // Dropped without a shutdown: end everything the same way, synchronously.
        lifecycle.shutdownFromDeinit()
    }
}
