// Every system call of the netlink monitor lives in this file, and each goes through the
// shared `syscall` helper of SwitchyardBackendKit (EINTR retried, would-block as a value,
// errno read at once). Calls SwitchyardBackendKit already wraps (`socket`, `setsockopt`,
// `send`, `close`, eventfd) are used from `Posix`; the rest are here.

import CSwitchyardPosix
import Glibc
import SwitchyardPosix

enum NetlinkSystem {
    // MARK: netlink sockets

    /// A nonblocking, close-on-exec NETLINK_ROUTE socket, bound to the multicast
    /// `groups` (0: none, for requests only). It belongs to the network namespace of the
    /// calling thread.
    static func openRouteSocket(groups: UInt32) throws(SyscallError) -> CInt {
        // Posix.socket passes protocol 0, which is NETLINK_ROUTE.
        let fd = try Posix.socket(family: AF_NETLINK, type: CInt(SOCK_RAW.rawValue))
        do {
            // struct sockaddr_nl { sa_family_t nl_family; u16 nl_pad; u32 nl_pid; u32 nl_groups; }
            var address: (UInt16, UInt16, UInt32, UInt32) = (RT.familyNetlink, 0, 0, groups)
            _ = try syscallNonBlocking("bind") {
                withUnsafeBytes(of: &address) { raw in
                    Glibc.bind(fd, raw.baseAddress!.assumingMemoryBound(to: sockaddr.self), socklen_t(12))
                }
            }
            return fd
        } catch {
            try? Posix.close(fd)
            throw error
        }
    }

    /// Asks for a larger receive buffer, so a burst does not overrun it; best effort.
    static func enlargeReceiveBuffer(_ fd: CInt, bytes: CInt) {
        // SO_RCVBUFFORCE passes the rmem_max limit (needs CAP_NET_ADMIN); else SO_RCVBUF.
        if (try? Posix.setOption(fd, level: SOL_SOCKET, name: SO_RCVBUFFORCE, value: bytes)) == nil {
            try? Posix.setOption(fd, level: SOL_SOCKET, name: SO_RCVBUF, value: bytes)
        }
    }

    static func send(_ fd: CInt, _ bytes: [UInt8]) throws(SyscallError) {
        let result = bytes.withUnsafeBytes { raw in Result { () throws(SyscallError) in try Posix.send(fd, raw) } }
        guard case .done(let sent) = try result.get(), sent == bytes.count else { throw SyscallError(call: "send", errno: EAGAIN) }
    }

    /// Receives one datagram. A datagram larger than `buffer` throws `EMSGSIZE` (it is
    /// lost: the caller reads the tables again). `ENOBUFS` means notifications were lost.
    static func receive(_ fd: CInt, into buffer: UnsafeMutableRawBufferPointer) throws(SyscallError) -> IOResult<Int> {
        let result = try syscall("recv") { Glibc.recv(fd, buffer.baseAddress, buffer.count, CInt(MSG_TRUNC)) }
        if case .done(let length) = result, length > buffer.count { throw SyscallError(call: "recv", errno: EMSGSIZE) }
        return result
    }

    /// Waits until one of `fds` is readable, or `timeoutMilliseconds` pass (-1: no
    /// limit). Returns which are readable (or have an error or hang-up pending); all false
    /// on timeout or EINTR (the caller recomputes its timeout).
    static func waitReadable(_ fds: [CInt], timeoutMilliseconds: CInt) throws(SyscallError) -> [Bool] {
        var entries = fds.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
        let result = try entries.withUnsafeMutableBufferPointer { buffer throws(SyscallError) in
            try syscall("poll", onInterrupt: .wouldBlock) { Glibc.poll(buffer.baseAddress, nfds_t(buffer.count), timeoutMilliseconds) }
        }
        guard case .done(let count) = result, count > 0 else { return fds.map { _ in false } }
        return entries.map { $0.revents != 0 }
    }

    // MARK: sysfs

    /// Whether `path` exists (any failure counts as no).
    static func exists(_ path: String) -> Bool {
        (try? syscallNonBlocking("access") { Glibc.access(path, F_OK) }) != nil
    }

    /// The first 4 KiB of a small file such as a sysfs `uevent`, or nil if it cannot be read.
    static func readSmallFile(_ path: String) -> String? {
        guard let fd = try? syscallNonBlocking("open", { Glibc.open(path, O_RDONLY | O_CLOEXEC) }) else { return nil }
        defer { try? Posix.close(fd) }
        var bytes = [UInt8](repeating: 0, count: 4096)
        let result = try? bytes.withUnsafeMutableBytes { raw throws(SyscallError) in
            try syscall("read") { Glibc.read(fd, raw.baseAddress, raw.count) }
        }
        guard case .done(let count) = result else { return nil }
        return String(decoding: bytes[..<count], as: UTF8.self)
    }

    // MARK: threads

    /// Starts a thread named `name` (15 characters are kept) that runs `body`. The new
    /// thread starts in the calling thread's network namespace.
    static func startThread(name: String, _ body: @escaping () -> Void) throws(SyscallError) -> pthread_t {
        let box = Unmanaged.passRetained(ThreadBody(name: String(name.prefix(15)), body))
        var handle = pthread_t()
        let status = pthread_create(&handle, nil, { raw in
            let start = Unmanaged<ThreadBody>.fromOpaque(raw!).takeRetainedValue()
            _ = csy_pthread_setname(start.name)
            start.body()
            return nil
        }, box.toOpaque())
        guard status == 0 else {
            box.release()
            // pthread_create reports through its result, not errno.
            throw SyscallError(call: "pthread_create", errno: status)
        }
        return handle
    }

    static func isCurrentThread(_ thread: pthread_t) -> Bool {
        pthread_equal(thread, pthread_self()) != 0
    }

    /// Waits for `thread` to end.
    static func join(_ thread: pthread_t) {
        pthread_join(thread, nil)
    }

    /// Lets `thread` end on its own (used when a thread would have to join itself).
    static func detach(_ thread: pthread_t) {
        pthread_detach(thread)
    }

    private final class ThreadBody {
        let name: String
        let body: () -> Void
        init(name: String, _ body: @escaping () -> Void) {
            self.name = name
            self.body = body
        }
    }
}
