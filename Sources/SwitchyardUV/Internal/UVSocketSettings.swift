import CLibUV
import Switchyard
import SwitchyardBackendKit

/// The socket options every connection of a libuv transport gets, connected or accepted.
///
/// Always `TCP_NODELAY`. With a stall timeout, the kernel is set up to fail a stalled
/// connection by itself, so the error arrives natively through libuv's callbacks
/// (`UV_ETIMEDOUT` in the read or write callback):
/// keepalive and `TCP_USER_TIMEOUT` with the toolkit's ``StallSettings`` timing, set
/// through libuv (`uv_tcp_keepalive`) and on the handle's descriptor.
struct UVSocketSettings: Sendable, Hashable {
    /// The stall timeout's kernel settings, if the transport has one.
    var stall: StallSettings?

    /// Applies the options to a connected TCP handle. Call on its loop. Returns the
    /// first libuv error (the connection still works, without the option).
    @discardableResult
    func apply(to tcp: UnsafeMutablePointer<uv_tcp_t>) -> Int32 {
        var first: Int32 = 0
        func note(_ status: Int32) { if first == 0 && status < 0 { first = status } }
        note(uv_tcp_nodelay(tcp, 1))
        guard let timing = stall else { return first }
        note(uv_tcp_keepalive(tcp, 1, UInt32(timing.keepaliveIdle)))
        let fd = csy_uv_tcp_fileno(tcp)
        guard fd >= 0 else {
            note(fd)
            return first
        }
        note(csy_uv_set_keepalive_probes(fd, timing.keepaliveInterval, timing.keepaliveCount))
        note(csy_uv_set_user_timeout(fd, timing.userTimeoutMilliseconds))
        return first
    }
}
