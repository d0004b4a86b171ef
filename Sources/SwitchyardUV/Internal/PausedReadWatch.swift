import CLibUV
import Glibc
import SwitchyardBackendKit
import SwitchyardPosix

/// How a libuv loop still hears a connection's errors while nobody reads it: a peer's
/// reset, or the kernel giving up (`ETIMEDOUT`), with reads stopped and no write pending.
///
/// libuv watches a stream only while it reads or writes: `uv_read_stop` with no write
/// pending takes the stream's watcher out of libuv's epoll set, so `EPOLLERR`/`EPOLLHUP`
/// are never seen, and a connection whose owner asks for nothing would learn of a reset
/// only at its next read or write. libuv has no public way to keep an error-only
/// interest on a stream (its `uv__io_start` is internal), and a `uv_poll_t` cannot share
/// the stream's descriptor (libuv keeps one watcher per descriptor, and `uv_poll_stop`
/// deletes the descriptor from epoll, the stream's registration with it).
///
/// So each loop keeps one epoll instance of its own, nested in libuv's: a `uv_poll_t`
/// watches it for readability, which epoll reports whenever one of its items is ready.
/// Every connection adds its socket once, when it is made, with an interest in no event
/// but `EPOLLONESHOT`, so epoll reports only what it always reports, `EPOLLERR` and
/// `EPOLLHUP`, and at most once. A socket that is merely readable, or whose peer
/// half-closed (a FIN, the reader's end of stream), is never reported here, so the watch
/// costs nothing while data waits unread, and a hang-up cannot wake the loop twice.
/// Stopping and starting reads touches nothing here: no system call per pause or resume.
///
/// What it costs: one epoll descriptor and one handle per loop, and one `epoll_ctl`
/// (`ADD`) per connection, when it is made. Nothing when it ends: closing the socket's
/// last descriptor removes it from the epoll set. If the socket outlives the connection
/// (another process or descriptor holds it), its item stays and may report once more;
/// each item carries a token besides the descriptor, so such a report is told from the
/// report of a new connection that took the same descriptor number, and ignored. No
/// descriptor per connection: a `dup` per connection would double the descriptors a
/// server needs, and fail first when they run out.
///
/// When the watch reports a connection (``UVConnection/pausedReadWatchFired(token:)``): a
/// connection that is reading leaves it to its read (which delivers what was sent before
/// the error, then the error); one that is not reading (never started, stopped, or past
/// its end of stream) reads `SO_ERROR` and ends with that error. With none (a hang-up
/// once both directions were shut down) there is nothing to report before its next read
/// does (the end of stream). Either way the item has fired and is not watched again: a
/// reset after a hang-up, or after an error seen while reading, is found as before, by
/// the next read or write.
///
/// If the epoll instance cannot be made (no descriptor left when the loop starts) or a
/// connection cannot be added, that connection (or the loop) goes without: it behaves as
/// before, learning of an error at its next read or write; nothing fails.
///
/// Safety: used only on the loop's thread (created before the thread starts, closed by
/// the loop's last task).
final class PausedReadWatch {
    /// The nested epoll instance; -1 when it could not be made or was closed.
    private var epoll: CInt = -1
    /// libuv's watch on ``epoll``; freed by its close callback.
    private var poll: UnsafeMutablePointer<uv_poll_t>?
    /// The ready list one ``takeReady(_:)`` fills (allocated once).
    private var ready = EpollReadyEvents(capacity: 16)

    /// Makes the epoll instance and starts libuv's watch on it; without either, the watch
    /// is off (``watch(_:)`` returns nil). `owner` is told when a watch reports.
    init(loop: UnsafeMutablePointer<uv_loop_t>, owner: UVEventLoop) {
        guard let epoll = try? Posix.epollCreate() else { return }
        let poll = UnsafeMutablePointer<uv_poll_t>.allocate(capacity: 1)
        guard uv_poll_init(loop, poll, epoll) == 0 else {
            poll.deallocate()
            try? Posix.close(epoll)
            return
        }
        // Unretained: the loop closes this handle before it goes.
        poll.pointee.data = Unmanaged.passUnretained(owner).toOpaque()
        let status = uv_poll_start(poll, CInt(UV_READABLE.rawValue)) { handle, status, _ in
            guard let handle, let data = handle.pointee.data else { return }
            Unmanaged<UVEventLoop>.fromOpaque(data).takeUnretainedValue().pausedReadWatchReady(status: status)
        }
        guard status == 0 else {
            uv_close(csy_uv_poll_handle(poll), uvFreeHandleOnClose)
            try? Posix.close(epoll)
            return
        }
        self.epoll = epoll
        self.poll = poll
    }

    /// The token of the next watch (never 0).
    private var nextToken: UInt32 = 1

    /// Watches `descriptor` for one error or hang-up; returns the watch's token, or nil
    /// when it cannot (the watch is off, or `epoll_ctl` failed): the connection then goes
    /// without. The watch ends by itself: it reports once, or the socket closes.
    func watch(_ descriptor: CInt) -> UInt32? {
        guard epoll >= 0 else { return nil }
        let token = nextToken
        nextToken = nextToken == .max ? 1 : nextToken + 1
        let data = UInt64(token) << 32 | UInt64(UInt32(bitPattern: descriptor))
        do {
            try Posix.epollControl(epoll, Posix.epollAdd, descriptor, events: Posix.Events.oneShot, data: data)
            return token
        } catch {
            return nil
        }
    }

    /// The watches that reported, each handed to `body` as its descriptor and token, until
    /// none is left (each reports once: `EPOLLONESHOT`).
    func takeReady(_ body: (CInt, UInt32) -> Void) {
        guard epoll >= 0 else { return }
        while true {
            guard let count = try? ready.wait(on: epoll, timeoutMilliseconds: 0) else { return }
            for index in 0..<count {
                let data = ready[index].data
                body(CInt(bitPattern: UInt32(truncatingIfNeeded: data)), UInt32(truncatingIfNeeded: data >> 32))
            }
            if count < ready.capacity { return }
        }
    }

    /// libuv stopped its watch on the epoll instance (an error it reported on it):
    /// closes the watch; connections go without from now on.
    func fail() {
        close()
    }

    /// Closes libuv's handle and the epoll instance (the descriptors it watched are
    /// untouched). Call on the loop before it stops.
    func close() {
        if let poll {
            self.poll = nil
            uv_close(csy_uv_poll_handle(poll), uvFreeHandleOnClose)
        }
        if epoll >= 0 {
            try? Posix.close(epoll)
            epoll = -1
        }
    }
}
