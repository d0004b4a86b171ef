public import Logging

/// A backend: it makes connections and listeners and owns the event loops they run on.
///
/// ## Contract
///
/// - **Lifetime.** A transport starts its event loops when it is made and stops them in
///   ``shutdown(gracePeriod:)`` or ``shutdownNow()``; one of the two must be called, and
///   from outside the transport's own loops (they wait for the loop threads to end).
///   After shutdown, every descriptor and handle the transport opened is closed.
/// - **connect(to:options:)** resolves a host name off the event loops, then connects.
///   A name with several addresses is tried as RFC 8305 (Happy Eyeballs) says: IPv6
///   first, the families alternating; a new attempt every 250 ms while the earlier ones
///   are pending, and at once when one fails; the first to connect wins and the others
///   are abandoned, their descriptors closed. (`localhost` is `127.0.0.1` and `::1`,
///   RFC 6761.) It returns a connection that is connected and not yet reading, or throws
///   a ``TransportError`` (for a name whose every address failed, the last failure):
///   - nothing listens there: `unavailable`, reason `refused`, at once;
///   - the name does not resolve: `unavailable`, reason `name resolution`, at once
///     (never after a timeout);
///   - no route: `unavailable`, reason `unreachable`;
///   - ``ConnectOptions/timeout`` passed first: `deadlineExceeded`, reason `connect timeout`;
///   - the calling task was cancelled: `cancelled`, reason `task cancelled` (the pending
///     connect is abandoned and its descriptor closed);
///   - the transport is shut down: `cancelled`, reason `shutdown`;
///   - a malformed endpoint, or one of another network (a socket path at a backend of
///     hosts and ports): `invalidArgument`, reason `invalid address`, naming it;
///   - out of descriptors: `resourceExhausted`, reason `resource limit`.
/// - **listen(on:options:)** binds and listens before it returns; port 0 picks a free
///   port (read it from ``Listener/localAddress``). Errors: `unavailable`/`address in
///   use`, `unavailable`/`name resolution` (a host name that does not resolve),
///   `invalidArgument`/`invalid address`, `permissionDenied`/`permission`,
///   `cancelled`/`shutdown`.
/// - **Shutdown.** ``shutdown(gracePeriod:)`` closes every listener at once, lets open
///   connections finish for up to the grace period, then closes what is left as
///   ``shutdownNow()`` does: each open connection ends with `cancelled`, reason
///   `shutdown`, its pending writes complete with that error, and its handler's
///   ``ConnectionHandler/connectionDidClose(error:)`` runs. Both are idempotent; a
///   second call returns once the first has finished.
public protocol Transport: AnyObject, Sendable {
    /// The name this backend is registered under, for example `"bsd"`.
    var name: String { get }

    /// Connects to `endpoint`. See the contract for the errors.
    func connect(to endpoint: Endpoint, options: ConnectOptions) async throws -> any Connection

    /// Listens on `endpoint`. See the contract for the errors.
    func listen(on endpoint: Endpoint, options: ListenOptions) async throws -> any Listener

    /// Stops accepting, waits up to `gracePeriod` for open connections to close, then
    /// closes the rest and stops the event loops.
    func shutdown(gracePeriod: Duration) async

    /// Closes every listener and connection now and stops the event loops.
    func shutdownNow() async

    /// The time, chance and executor of the code above the transport (``TransportClock``):
    /// by default the system's; a simulated network's transports have its virtual clock.
    /// A transport that wraps another has the wrapped one's.
    var clock: any TransportClock { get }
}

extension Transport {
    /// Connects with default options.
    public func connect(to endpoint: Endpoint) async throws -> any Connection {
        try await connect(to: endpoint, options: ConnectOptions())
    }

    /// Listens with default options.
    public func listen(on endpoint: Endpoint) async throws -> any Listener {
        try await listen(on: endpoint, options: ListenOptions())
    }
}

/// Options for one connect.
public struct ConnectOptions: Sendable, Hashable {
    /// How long the connect may take, name resolution included.
    public var timeout: Duration = .seconds(10)
    public init(timeout: Duration = .seconds(10)) { self.timeout = timeout }
}

/// Options for one listener.
public struct ListenOptions: Sendable, Hashable {
    /// The accept backlog handed to the kernel.
    public var backlog: Int = 1024
    public init(backlog: Int = 1024) { self.backlog = backlog }
}

/// Settings a backend is made with.
///
/// Equality and hashing compare the settings that change how the backend behaves, and
/// ignore ``logger``: two configurations that differ only in where they log are equal
/// (a `Logger` has no meaningful equality, and logging changes no behaviour).
public struct TransportConfiguration: Sendable, Hashable {
    /// How many event loops (threads) to run; `nil` means one per core.
    public var eventLoopCount: Int?
    /// How long a connection may make no progress while it should (bytes in flight that
    /// do not drain, a peer gone silent under a call awaiting a reply) before it ends
    /// with `unavailable`, reason `stalled`. `nil` leaves it to the kernel (about 15
    /// minutes of retransmissions). Each backend meets the bound its own way: `libuv`
    /// natively (keepalive plus `TCP_USER_TIMEOUT`), `bsd` the same plus its stall
    /// monitor (TCP_INFO: unacknowledged data that does not drain).
    ///
    /// The kernel applies `TCP_USER_TIMEOUT` to zero-window probes too (measured on
    /// Linux 6.x): with a stall timeout, a peer that keeps its receive window closed
    /// (stops reading, for example with flow control and nothing asked for) for longer
    /// than the timeout ends the writer's connection as `stalled`. Choose a stall
    /// timeout longer than the longest pause a reader may take.
    public var stallTimeout: Duration?
    /// Whether the kernel helps meet ``stallTimeout``: keepalive and `TCP_USER_TIMEOUT` on
    /// every connection (`true`, the default). `false` turns both off, so a backend must
    /// meet the stall bound by its own monitor alone: `bsd` by its TCP_INFO monitor (data
    /// in flight that does not drain); a backend without such a monitor (`libuv`, which
    /// detects stalls only through the kernel) refuses to be made so, with
    /// `invalidArgument`, reason `invalid option`. Without keepalive nothing detects a
    /// silent peer under an idle connection (a call awaiting a reply): this switch exists
    /// to prove a backend's own monitor, and for paths where the kernel's timers cannot be
    /// set. Ignored without a ``stallTimeout``.
    public var kernelStallDetection: Bool = true
    /// How many descriptors the process's descriptor table is grown to hold when a socket
    /// backend starts (clamped to the soft `RLIMIT_NOFILE`; 0 leaves the table alone).
    ///
    /// Linux grows the table by doubling as descriptors are opened, and in a process with
    /// more than one thread every growth waits for an RCU grace period: the thread that
    /// accepts or connects sleeps for milliseconds (measured here: 4 to 8 ms each, five
    /// of them on the way from 64 to 1,000 connections, in the middle of a burst of
    /// accepts). Growing it once at start moves that wait out of the traffic. The table
    /// never shrinks; it costs the kernel about 8 bytes per slot (128 KiB for the
    /// default's 16,384). Best effort: when it cannot be grown, it is left as it is.
    public var reservedDescriptors: Int
    /// Where the transport logs its connections' lives: connects and their failures,
    /// accepts, closes with their reason, stalls (naming the detector), resets and
    /// reclaimed descriptors (`SwitchyardBackendKit`'s `TransportObserver` lists every
    /// message and its level). Routine opens and closes are `debug`; a stall, a reset
    /// or a reclaimed descriptor is `warning`. Nothing is logged per message. The
    /// default logs nowhere (``disabledLogger``): give a logger of your
    /// bootstrapped logging system to see them. Ignored by `==` and `hash(into:)`.
    public var logger: Logger
    public init(
        eventLoopCount: Int? = nil, stallTimeout: Duration? = nil, reservedDescriptors: Int = 16_384,
        kernelStallDetection: Bool = true, logger: Logger = TransportConfiguration.disabledLogger
    ) {
        self.eventLoopCount = eventLoopCount
        self.stallTimeout = stallTimeout
        self.reservedDescriptors = reservedDescriptors
        self.kernelStallDetection = kernelStallDetection
        self.logger = logger
    }

    /// A logger that logs nothing, whatever the process bootstrapped: the default.
    public static let disabledLogger = Logger(label: "switchyard", factory: { _ in SwiftLogNoOpLogHandler() })

    /// Compares every setting but ``logger``.
    public static func == (lhs: TransportConfiguration, rhs: TransportConfiguration) -> Bool {
        lhs.eventLoopCount == rhs.eventLoopCount && lhs.stallTimeout == rhs.stallTimeout
            && lhs.kernelStallDetection == rhs.kernelStallDetection
            && lhs.reservedDescriptors == rhs.reservedDescriptors
    }

    /// Hashes every setting but ``logger``.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(eventLoopCount)
        hasher.combine(stallTimeout)
        hasher.combine(kernelStallDetection)
        hasher.combine(reservedDescriptors)
    }
}
