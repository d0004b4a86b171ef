import CLibUV
import Switchyard

/// The socket options every connection of a libuv transport gets, connected or accepted.
///
/// Always `TCP_NODELAY`. With a stall timeout, the kernel is set up to fail a stalled
/// connection by itself, so the error arrives natively through libuv's callbacks
/// (`UV_ETIMEDOUT` in the read or write callback):
/// - keepalive (`uv_tcp_keepalive`) after 1 s idle, with the probe interval and count
///   chosen so that idle + interval × count ≈ the stall timeout (an idle reader is only
///   woken by keepalive: `TCP_USER_TIMEOUT` alone never fires without data in flight);
/// - `TCP_USER_TIMEOUT` = the stall timeout, which bounds unacknowledged data and, once
///   probes are out, unanswered keepalive.
struct UVSocketSettings: Sendable, Hashable {
    var stallTimeout: Duration?

    /// Keepalive timing for a stall timeout: (idle, interval, count), whole seconds.
    static func keepaliveTiming(for stallTimeout: Duration) -> (idle: Int32, interval: Int32, count: Int32) {
        let total = max(2, Self.wholeSeconds(stallTimeout))
        let idle: Int64 = 1
        let remaining = total - idle
        let interval = max(1, (remaining + 8) / 9)  // at most nine probes
        let count = max(1, remaining / interval)
        return (Int32(idle), Int32(clamping: interval), Int32(clamping: count))
    }

    /// The stall timeout in milliseconds, rounded up, at least 1.
    static func milliseconds(_ duration: Duration) -> UInt32 {
        let (seconds, attoseconds) = duration.components
        let ms = seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000
        return UInt32(clamping: max(1, ms))
    }

    private static func wholeSeconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        return seconds + (attoseconds > 0 ? 1 : 0)
    }

    /// Applies the options to a connected TCP handle. Call on its loop. Returns the
    /// first libuv error (the connection still works, without the option).
    @discardableResult
    func apply(to tcp: UnsafeMutablePointer<uv_tcp_t>) -> Int32 {
        var first: Int32 = 0
        func note(_ status: Int32) { if first == 0 && status < 0 { first = status } }
        note(uv_tcp_nodelay(tcp, 1))
        guard let stallTimeout else { return first }
        let timing = Self.keepaliveTiming(for: stallTimeout)
        note(uv_tcp_keepalive(tcp, 1, UInt32(timing.idle)))
        let fd = csy_uv_tcp_fileno(tcp)
        guard fd >= 0 else {
            note(fd)
            return first
        }
        note(csy_uv_set_keepalive_probes(fd, timing.interval, timing.count))
        note(csy_uv_set_user_timeout(fd, Self.milliseconds(stallTimeout)))
        return first
    }
}
