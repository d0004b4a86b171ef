import Switchyard
import SwitchyardBackendKit

/// The BSD backend's stall-detection workaround (DESIGN.md, behaviour 3), for one event
/// loop: with a stall timeout (``TransportConfiguration/stallTimeout``), it ends a
/// connection that makes no progress while it should with `unavailable`, reason
/// `stalled`.
///
/// A BSD socket can stall with no error when the path under it goes away: a blocked
/// read waits for minutes, and data in flight is retransmitted for about 15 minutes.
/// Two mechanisms, one per kind of stall, each held to the one stall timeout:
///
/// - **Bytes in flight that do not drain** (this monitor). Every sweep interval
///   (a quarter of the stall timeout, clamped to 100 ms ... 1 s) one timer on the loop
///   walks the loop's connections; for each one that may hold data (it wrote since the
///   last sweep, or the last sweep saw data outstanding) it reads TCP_INFO and feeds
///   it to the connection's ``StallDetector``, which decides. No timer per write and no
///   system call on the message path: a write only sets a flag. So detection does not
///   depend on the kernel's exponential retransmission timing: it comes at most one
///   sweep interval after the bound.
/// - **An idle connection awaiting a reply** (a call waiting for the peer to speak:
///   nothing is outstanding, so TCP_INFO has nothing to say, and the backend cannot
///   know about calls). The socket gets kernel keepalive and `TCP_USER_TIMEOUT`
///   (``StallSettings``), the same native mechanism the libuv backend uses; the kernel
///   fails the silent connection with `ETIMEDOUT` (or `EHOSTUNREACH` after a link went
///   down), which the connection maps to `stalled`
///   (``ErrnoTable/connectionError(errno:message:stallDetection:)``). `TCP_USER_TIMEOUT`
///   also covers data in flight, so whichever of the two sees a stall first ends it.
///   With ``StallSettings/kernelDetection`` off (``TransportConfiguration/kernelStallDetection``)
///   the socket gets neither, and this monitor alone ends a stall with data in flight.
///
/// The error's message names the detector that fired: ``detectorNote`` for this monitor,
/// ``ErrnoTable/kernelDetectorNote`` for the kernel (whose error also keeps its errno in
/// `native`; this monitor's has none).
///
/// A stalled connection is aborted (linger 0, so its descriptor and kernel state go at
/// once), its pending writes complete with the error, and its handler hears
/// `connectionDidClose(error:)`.
///
/// Connectivity changes are the channel's business (it follows its
/// ``ConnectivityMonitor``); this monitor only watches progress.
///
/// Safety of `@unchecked Sendable`: every stored `var` is touched only on `loop`.
final class StallMonitor: @unchecked Sendable {
    let loop: EpollEventLoop
    let settings: StallSettings
    /// How often the loop's connections are swept.
    let interval: Duration
    private var connections: [ObjectIdentifier: BSDConnection] = [:]
    private var timer: LoopTimer?

    init(loop: EpollEventLoop, settings: StallSettings) {
        self.loop = loop
        self.settings = settings
        self.interval = Self.sweepInterval(for: settings.timeout)
    }

    /// What the message of a stall this monitor detected ends with.
    static let detectorNote = "stall detected by the TCP_INFO monitor"

    /// A quarter of the stall timeout, clamped to 100 ms ... 1 s.
    static func sweepInterval(for timeout: Duration) -> Duration {
        min(max(timeout / 4, .milliseconds(100)), .seconds(1))
    }

    /// Starts watching `connection`. Call on the loop.
    func add(_ connection: BSDConnection) {
        loop.assertInLoop()
        connections[ObjectIdentifier(connection)] = connection
        if timer == nil { scheduleSweep() }
    }

    /// Stops watching `connection`. Call on the loop.
    func remove(_ connection: BSDConnection) {
        loop.assertInLoop()
        connections.removeValue(forKey: ObjectIdentifier(connection))
        if connections.isEmpty {
            timer?.cancel()
            timer = nil
        }
    }

    private func scheduleSweep() {
        timer = loop.schedule(after: interval) { [self] in
            timer = nil
            sweep()
        }
    }

    private func sweep() {
        let now = ContinuousClock.now
        var stalled: [(BSDConnection, Duration)] = []
        for connection in connections.values {
            if let waited = connection.checkProgress(at: now) { stalled.append((connection, waited)) }
        }
        for (connection, waited) in stalled { connection.endStalled(waited: waited, timeout: settings.timeout) }
        if !connections.isEmpty && timer == nil { scheduleSweep() }
    }
}

/// The stall settings and one ``StallMonitor`` per loop of a transport.
final class StallMonitors: Sendable {
    let settings: StallSettings
    private let monitors: [StallMonitor]

    init(settings: StallSettings, group: EpollEventLoopGroup) {
        self.settings = settings
        self.monitors = group.loops.map { StallMonitor(loop: $0, settings: settings) }
    }

    /// The monitor of `loop`.
    func monitor(for loop: EpollEventLoop) -> StallMonitor {
        monitors[loop.index]
    }
}
