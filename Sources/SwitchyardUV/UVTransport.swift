import CLibUV
import CSwitchyardPosix
import Glibc
public import Switchyard
public import SwitchyardBackendKit
import Synchronization

/// The libuv backend (`"libuv"`): `uv_tcp` connections and listeners on libuv loops, one
/// thread per loop (one per core by default), `uv_async` wake-ups, each connection pinned
/// to one loop. See ``Transport`` for the contract it keeps.
///
/// Errors arrive through libuv's own callbacks and map through one table, ``UVErrorTable``
/// (the `libuv` column of `docs/ERRORS.md`), to the same codes and reasons the BSD
/// backend gives for the same fault. With a stall timeout
/// (``TransportConfiguration/stallTimeout``), the
/// kernel is configured (keepalive and `TCP_USER_TIMEOUT`) so that a stalled connection
/// fails by itself, natively: `UV_ETIMEDOUT` (or `UV_EHOSTUNREACH` after the link under
/// it went down) arrives in libuv's read or write callback and ends the connection with
/// `unavailable`, reason `stalled` (the code kept in `native`).
///
/// ```swift
/// let transport = try UVTransport(configuration: .init(stallTimeout: .seconds(10)))
/// let listener = try await transport.listen(on: Endpoint(host: "127.0.0.1", port: 0))
/// ```
///
/// After shutdown, ``loopCloseResults`` holds what `uv_loop_close` returned for each
/// loop: all 0 when every handle was closed.
public final class UVTransport: LifecycleTransport {
    /// The registry entry for this backend. Making it also sets up libuv's process-wide
    /// state (see `UVProcess`), so that a leak check that counts descriptors around a
    /// first transport does not count libuv's own.
    public static let backend: TransportBackend = {
        _ = UVProcess.prepared
        return TransportBackend(
            name: "libuv", summary: "libuv streams (uv_tcp) on libuv loops", usesSockets: true,
            make: { try UVTransport(configuration: $0) })
    }()

    /// Settings of a libuv transport: the backend-neutral ones. With a stall timeout,
    /// every connection gets keepalive after 1 s idle, with the probe interval and count
    /// chosen so the keepalive budget is about that timeout, and `TCP_USER_TIMEOUT` equal
    /// to it; a stalled connection then ends with `unavailable`, reason `stalled`,
    /// whether it was reading or writing. Without one, the kernel's own `ETIMEDOUT`
    /// (after its budget of about 15 minutes) maps as the table says: `unavailable`,
    /// reason `timed out`. libuv detects stalls only through the kernel: it has no
    /// monitor of its own, so a stall timeout with
    /// ``TransportConfiguration/kernelStallDetection`` off is refused.
    public typealias Configuration = TransportConfiguration

    public var name: String { "libuv" }

    /// The settings this transport was made with.
    public let configuration: Configuration

    private let group: UVEventLoopGroup
    private let lifecycle: TransportLifecycle<UVEventLoop>
    private let settings: UVSocketSettings

    /// Starts the transport's event loops, with the configuration's stall timeout (or
    /// the kernel's stall defaults when it has none).
    /// - Throws: ``TransportError`` when a loop or its thread cannot be made;
    ///   `invalidArgument`/`invalid option` for settings out of range
    ///   (``TransportConfiguration/validate()``, ``StallSettings/of(_:)``: a stall timeout
    ///   that is not positive or over 3 days), and for a stall timeout with
    ///   ``TransportConfiguration/kernelStallDetection`` off (libuv has no stall monitor of
    ///   its own: nothing would meet the bound).
    public init(configuration: TransportConfiguration = TransportConfiguration()) throws(TransportError) {
        try configuration.validate()
        let stall = try StallSettings.of(configuration)
        if let stall, !stall.kernelDetection {
            throw TransportError(
                code: .invalidArgument, reason: .invalidOption,
                message: "libuv detects stalls only through the kernel (keepalive and TCP_USER_TIMEOUT); it cannot meet a stall timeout of \(stall.timeout) with kernelStallDetection off")
        }
        _ = UVProcess.prepared
        self.configuration = configuration
        self.settings = UVSocketSettings(stall: stall)
        // Before the loop threads exist: with fewer threads sharing the table, growing it
        // waits for fewer (or no) RCU grace periods.
        _ = csy_reserve_descriptors(CInt(clamping: configuration.reservedDescriptors))
        group = try UVEventLoopGroup(count: configuration.eventLoopCount, name: "sy-uv")
        lifecycle = TransportLifecycle(group: group, observer: TransportObserver(backend: "libuv", logger: configuration.logger))
    }

    /// The number of event loops (threads).
    public var eventLoopCount: Int { group.loops.count }

    /// What `uv_loop_close` returned for each loop once the transport shut down (`nil`
    /// before): 0 for a loop whose handles were all closed, `UV_EBUSY` (negative) for one
    /// that still had a handle open (a leak).
    public var loopCloseResults: [Int32]? { group.closeResults }

    /// The libuv handles open on each loop (`uv_walk`, handles already closing not
    /// counted), for leak checks such as `Benchmarks/churn` and the churn tests: two per
    /// loop (its wake-up, and its paused-read watch) when no connection, listener or connect is open, plus one per
    /// open connection, listener and connect in progress (and its timer, if any). Hops to
    /// each loop and waits for it; `nil` for a loop that has stopped.
    public func openHandleCounts() async -> [Int?] {
        var counts: [Int?] = []
        for loop in group.loops {
            let count = await withCheckedContinuation { (continuation: CheckedContinuation<Int?, Never>) in
                loop.submit({
                    continuation.resume(returning: loop.openHandleCount())
                }, otherwise: {
                    continuation.resume(returning: nil)
                })
            }
            counts.append(count)
        }
        return counts
    }

    /// Resolves `endpoint` and connects to its addresses the toolkit's way
    /// (``HappyEyeballs``: IPv6 first, families alternating, a new attempt every 250 ms
    /// while earlier ones are pending, the next one at once when one fails).
    public func connect(to endpoint: Endpoint, options: ConnectOptions) async throws -> any Connection {
        let group = self.group
        let lifecycle = self.lifecycle
        let settings = self.settings
        return try await lifecycle.observingConnect(to: endpoint) {
            try lifecycle.ensureAccepting()
            try NameResolution.checkHostAndPort(endpoint)
            return try await HappyEyeballs.connect(
                to: endpoint, timeout: options.timeout, discard: { $0.close() },
                attempt: { address, timeout in
                    try await UVConnector(loop: group.next(), address: address, timeout: timeout, registry: lifecycle, settings: settings)
                        .connected()
                })
        }
    }

    public func listen(on endpoint: Endpoint, options: ListenOptions) async throws -> any Listener {
        try lifecycle.ensureAccepting()
        try NameResolution.checkHostAndPort(endpoint)
        let loop = group.next()
        let address = try await HostResolver.listenAddress(for: endpoint)
        let group = self.group
        let lifecycle = self.lifecycle
        let settings = self.settings
        let backlog = options.backlog
        let listener = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<UVListener, any Error>) in
            loop.submit({
                do {
                    continuation.resume(returning: try UVListener.open(
                        address: address, backlog: backlog, loop: loop, group: group, registry: lifecycle,
                        settings: settings))
                } catch {
                    continuation.resume(throwing: error)
                }
            }, otherwise: {
                continuation.resume(throwing: TransportError.transportShutdown())
            })
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
