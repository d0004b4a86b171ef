import Switchyard
import SwitchyardPosix

/// A peer's reset, or the kernel giving up, ends a connection whose owner reads nothing
/// (reads never started, stopped, or past the end of stream) and writes nothing: the
/// contract of ``Connection/stopReading()``. A connection that waits for nothing must
/// therefore still be watched.
///
/// epoll reports `EPOLLERR` and `EPOLLHUP` whatever the interest, even none, and never
/// reports plain readability or a peer's half-close (`EPOLLRDHUP`) without being asked:
/// so a backend keeps such a connection in its epoll set with an interest of 0 (an
/// `EPOLL_CTL_MOD`, no more costly than taking it out), and, when one of the two arrives
/// while the connection does not read and has no write queued (a flush would find the
/// error itself), calls ``endWithPendingError()``. Without an error it was a hang-up
/// (both directions shut; on a Unix-domain socket, a peer that closed): epoll reports it
/// again at every wait, so the backend takes the descriptor out until reading or writing
/// needs it; the next read reports what is left (the bytes sent before it, then end of
/// stream). A peer's plain close over TCP raises neither: nothing is reported before
/// the owner reads again, and nothing spins.
extension DescriptorStreamConnection {
    /// Reads the socket's pending error (`SO_ERROR`, one `getsockopt`) and, if there is
    /// one, ends the connection with it (callbacks at once: call from a loop event) and
    /// returns true. Returns false when there is none (a hang-up): stop watching the
    /// descriptor until reading or writing needs it. Call on the loop, for `EPOLLERR` or
    /// `EPOLLHUP` while the connection does not read.
    @discardableResult
    public func endWithPendingError() -> Bool {
        let code: CInt
        do {
            code = try Posix.socketError(descriptor)
        } catch {
            code = error.errno
        }
        guard code != 0 else { return false }
        terminate(transportError(SyscallError(call: "SO_ERROR", errno: code), while: "connection to \(remoteAddress)"), deferCallbacks: false)
        return true
    }
}
