import CLibUV
import Glibc
import SwitchyardBackendKit

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
/// at all, so epoll reports only what it always reports: `EPOLLERR` and `EPOLLHUP`. A
/// socket that is merely readable, or whose peer half-closed (a FIN, the reader's end of
/// stream), is never reported here, so the watch costs nothing while data waits unread.
/// Stopping and starting reads touches nothing here: no system call per pause or resume.
/// What it costs: one epoll descriptor and one handle per loop, and per connection one
/// `epoll_ctl` (`ADD`) when it is made and one (`DEL`) when it ends (closing the socket
/// would remove it too, but not while another process holds the socket, and a stale item
/// would report under a descriptor number a new connection may have taken). No
/// descriptor per connection (a `dup` per connection would double the descriptors a
/// server needs, and fail first when they run out).
///
/// When the watch reports a connection (``UVConnection/pausedReadWatchFired()``): a
/// connection that is reading leaves it to its read (which delivers what was sent before
/// the error, then the error) and stops being watched; one that is not reading reads
/// `SO_ERROR` and ends with that error, or, with none (a hang-up after both directions
/// were shut down), stops being watched, since epoll would report it again at every turn
/// and what is left to learn is the end of stream its next read reports.
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
    /// is off (``watch(_:)`` returns false). `owner` is told of each ready descriptor.
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

    /// Watches `descriptor` for errors and hang-ups; false when it cannot (the watch is
    /// off, or `epoll_ctl` failed): the connection then goes without.
    func watch(_ descriptor: CInt) -> Bool {
        guard epoll >= 0 else { return false }
        do {
            try Posix.epollControl(epoll, Posix.epollAdd, descriptor, events: 0, data: UInt64(UInt32(bitPattern: descriptor)))
            return true
        } catch {
            return false
        }
    }

    /// Stops watching `descriptor` (a failure means it is not watched anyway: its socket
    /// was closed or replaced underneath).
    func unwatch(_ descriptor: CInt) {
        guard epoll >= 0 else { return }
        try? Posix.epollControl(epoll, Posix.epollDelete, descriptor, events: 0, data: 0)
    }

    /// The descriptors that are ready, handed to `body` one at a time, until none is.
    /// Each must stop being watched, or end, in `body` (the loop is level-triggered).
    func takeReady(_ body: (CInt) -> Void) {
        guard epoll >= 0 else { return }
        while true {
            guard let count = try? ready.wait(on: epoll, timeoutMilliseconds: 0) else { return }
            for index in 0..<count { body(CInt(bitPattern: UInt32(truncatingIfNeeded: ready[index].data))) }
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
