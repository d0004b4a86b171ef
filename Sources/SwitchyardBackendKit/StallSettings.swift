import Glibc
public import Switchyard
import SwitchyardPosix

/// How the POSIX backends set the kernel up to meet a stall timeout
/// (`TransportConfiguration.stallTimeout`), and how they name what the kernel reports.
///
/// - Keepalive after 1 s idle, with the probe interval and count chosen so that
///   idle + interval × count ≈ the stall timeout. An idle reader (a call awaiting a
///   reply) is woken only by keepalive: `TCP_USER_TIMEOUT` alone never fires without
///   data in flight (measured, `TESTING.md`).
/// - `TCP_USER_TIMEOUT` = the stall timeout: it bounds unacknowledged data, and once a
///   probe is out it replaces the keepalive count (the kernel fails the connection when
///   the peer was silent for that long).
///
/// The kernel then fails a stalled connection with `ETIMEDOUT`, or with the last soft
/// error it met while retransmitting (`EHOSTUNREACH`/`ENETUNREACH` after the link went
/// down). With a stall timeout those mean "stalled": see `ErrnoTable/connectionError(errno:message:stallDetection:)`.
///
/// With ``kernelDetection`` off (`TransportConfiguration.kernelStallDetection`), none of
/// this is set: ``apply(to:)`` leaves the socket alone, and the backend's own monitor must
/// meet the bound.
public struct StallSettings: Sendable, Hashable {
    /// The stall timeout.
    public let timeout: Duration
    /// Whether the kernel helps (keepalive and `TCP_USER_TIMEOUT`, set by ``apply(to:)``).
    public let kernelDetection: Bool
    /// Keepalive timing, whole seconds.
    public let keepaliveIdle: CInt
    public let keepaliveInterval: CInt
    public let keepaliveCount: CInt
    /// `TCP_USER_TIMEOUT`, milliseconds.
    public let userTimeoutMilliseconds: UInt32

    /// The longest stall timeout: 3 days. The kernel takes a keepalive interval of at
    /// most 32,767 s, and nine probes of that interval cover 3.4 days; a longer timeout
    /// would fail every connect with `EINVAL` from `setsockopt`.
    public static let maximumTimeout = Duration.seconds(3 * 86_400)

    /// The settings `configuration` asks for: nil without a stall timeout.
    /// - Throws: `invalidArgument`, reason `invalid option`, naming the value, for a stall
    ///   timeout that is not positive or is over ``maximumTimeout``.
    public static func of(_ configuration: TransportConfiguration) throws(TransportError) -> StallSettings? {
        guard let timeout = configuration.stallTimeout else { return nil }
        guard timeout > .zero, timeout <= maximumTimeout else {
            throw TransportError(
                code: .invalidArgument, reason: .invalidOption,
                message: "invalid stall timeout \(timeout): it must be positive and at most \(maximumTimeout) (3 days)")
        }
        return StallSettings(timeout: timeout, kernelDetection: configuration.kernelStallDetection)
    }

    /// Settings for `timeout`, which must be positive (longer than ``maximumTimeout`` is
    /// clamped to it); `kernelDetection` says whether ``apply(to:)`` sets keepalive and
    /// `TCP_USER_TIMEOUT`.
    public init(timeout: Duration, kernelDetection: Bool = true) {
        self.timeout = timeout
        self.kernelDetection = kernelDetection
        let total = max(2, Self.wholeSeconds(min(timeout, Self.maximumTimeout)))
        let idle: Int64 = 1
        let remaining = total - idle
        let interval = max(1, (remaining + 8) / 9)  // at most nine probes
        keepaliveIdle = CInt(idle)
        keepaliveInterval = CInt(clamping: interval)
        keepaliveCount = CInt(clamping: max(1, remaining / interval))
        userTimeoutMilliseconds = Self.milliseconds(min(timeout, Self.maximumTimeout))
    }

    /// Applies keepalive and `TCP_USER_TIMEOUT` to a connected socket; nothing when
    /// ``kernelDetection`` is off.
    public func apply(to fd: CInt) throws(SyscallError) {
        guard kernelDetection else { return }
        try Posix.setKeepalive(fd, idle: keepaliveIdle, interval: keepaliveInterval, count: keepaliveCount)
        try Posix.setUserTimeout(fd, milliseconds: userTimeoutMilliseconds)
    }

    /// `duration` in milliseconds, rounded up, at least 1, at most `UInt32.max` (a
    /// duration of centuries, such as a connect timeout meant as "never", clamps to it).
    public static func milliseconds(_ duration: Duration) -> UInt32 {
        let (seconds, attoseconds) = duration.components
        if seconds >= Int64(UInt32.max / 1000) { return UInt32.max }
        let ms = seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000
        return UInt32(clamping: max(1, ms))
    }

    private static func wholeSeconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        return seconds + (attoseconds > 0 ? 1 : 0)
    }
}

extension ErrnoTable {
    /// The errnos by which the kernel ends a connection whose keepalive or
    /// `TCP_USER_TIMEOUT` ran out: `ETIMEDOUT`, or the soft error of the last
    /// retransmission (`EHOSTUNREACH`, `ENETUNREACH` once the link under it went down).
    public static let stallErrnos: Set<CInt> = [ETIMEDOUT, EHOSTUNREACH, ENETUNREACH]

    /// The `TransportError` for an errno that ended an established connection. With
    /// the kernel's stall detection on (a stall timeout is set and
    /// ``StallSettings/kernelDetection``), the errnos of ``stallErrnos`` are the stall
    /// bound running out: `unavailable`, reason `stalled`, the errno kept in `native`,
    /// and the message says the kernel detected it (``kernelDetectorNote``). Otherwise,
    /// and for every other errno, the table's mapping.
    public static func connectionError(errno code: CInt, message: String, stallDetection: Bool) -> TransportError {
        var error = error(errno: code, message: message)
        if stallDetection && stallErrnos.contains(code) {
            error.code = .unavailable
            error.reason = .stalled
            error.message += kernelDetectorNote
        }
        return error
    }

    /// What the message of a stall the kernel detected ends with, naming the detector
    /// (a backend's own monitor names itself instead).
    public static let kernelDetectorNote =
        " (no progress within the stall timeout: stall detected by the kernel, TCP_USER_TIMEOUT or keepalive)"
}
