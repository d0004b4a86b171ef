// Every system call the unix backend makes is in this file and goes through one helper,
// `UnixSystem.call` (EINTR retried, would-block returned as nil, errno read at once, the
// toolkit's typed `SyscallError` thrown otherwise); no other file loops on EINTR or reads
// errno. The toolkit makes the rest: reading and writing a connection
// (`DescriptorStreamConnection`), accepting (`acceptAvailable`), `epoll_wait`
// (`EpollReadyEvents`) and the loop's epoll and wake-up descriptors
// (`epollCreateWithWakeup`).

import CUnixEpoll
import Glibc
import SwitchyardBackendKit

enum UnixSystem {
    // MARK: the one helper

    /// Runs `body` (a call that returns -1 and sets errno on failure), reading errno at
    /// once: EINTR is retried, EAGAIN/EWOULDBLOCK and a connect's EINPROGRESS come back as
    /// nil, any other errno is thrown.
    @inline(__always)
    static func call<T: FixedWidthInteger>(_ name: StaticString, _ body: () -> T) throws(SyscallError) -> T? {
        while true {
            let result = body()
            if result >= 0 { return result }
            let code = errno
            switch code {
            case EINTR: continue
            case EAGAIN, EWOULDBLOCK, EINPROGRESS: return nil
            default: throw SyscallError(call: name, errno: code)
            }
        }
    }

    /// ``call(_:_:)`` for a call that never legitimately blocks: would-block is an error.
    @inline(__always)
    @discardableResult
    static func callNonBlocking<T: FixedWidthInteger>(_ name: StaticString, _ body: () -> T) throws(SyscallError) -> T {
        guard let result = try call(name, body) else { throw SyscallError(call: name, errno: EAGAIN) }
        return result
    }

    // MARK: sockets

    /// A nonblocking, close-on-exec Unix-domain stream socket.
    static func socket() throws(SyscallError) -> CInt {
        try callNonBlocking("socket") {
            Glibc.socket(AF_UNIX, CInt(SOCK_STREAM.rawValue) | CInt(SOCK_NONBLOCK.rawValue) | CInt(SOCK_CLOEXEC.rawValue), 0)
        }
    }

    static func bind(_ fd: CInt, _ address: SystemSocketAddress) throws(SyscallError) {
        try callNonBlocking("bind") { address.withSockaddr { Glibc.bind(fd, $0, $1) } }
    }

    static func listen(_ fd: CInt, backlog: CInt) throws(SyscallError) {
        try callNonBlocking("listen") { Glibc.listen(fd, backlog) }
    }

    /// Starts connecting `fd`: true when it connected at once, false when the connect
    /// goes on (the socket becomes writable when it ends; `SO_ERROR` says how).
    static func connect(_ fd: CInt, _ address: SystemSocketAddress) throws(SyscallError) -> Bool {
        try call("connect") { address.withSockaddr { Glibc.connect(fd, $0, $1) } } != nil
    }

    /// The address `fd` is bound to.
    static func localAddress(_ fd: CInt) throws(SyscallError) -> SystemSocketAddress {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        try callNonBlocking("getsockname") {
            withUnsafeMutablePointer(to: &storage) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        }
        return SystemSocketAddress(storage: storage, length: length)
    }

    /// Shuts the receiving side: a listener's pending accept wakes up.
    static func shutdownRead(_ fd: CInt) throws(SyscallError) {
        try callNonBlocking("shutdown") { Glibc.shutdown(fd, CInt(SHUT_RD)) }
    }

    /// Closes `fd`. Never retried: on Linux the descriptor is gone even when close reports
    /// EINTR, and a retry could close a descriptor another thread just got. Errors of
    /// close are not actionable and are dropped.
    static func close(_ fd: CInt) {
        _ = Glibc.close(fd)
    }

    // MARK: epoll and the loop's wake-up

    /// epoll event bits.
    enum Events {
        static let input = EPOLLIN.rawValue
        static let output = EPOLLOUT.rawValue
        static let error = EPOLLERR.rawValue
        static let hangup = EPOLLHUP.rawValue
        static let readHangup = EPOLLRDHUP.rawValue
    }

    /// `epoll_ctl`: adds, changes (`EPOLL_CTL_MOD`) or removes `fd` with `events` and the
    /// data word `EpollReadyEvents` hands back.
    static func epollControl(_ epfd: CInt, _ operation: CInt, _ fd: CInt, events: UInt32, data: UInt64) throws(SyscallError) {
        var event = epoll_event()
        event.events = events
        event.data.u64 = data
        try callNonBlocking("epoll_ctl") { epoll_ctl(epfd, operation, fd, &event) }
    }

    /// Wakes the loop that waits on the eventfd `fd`.
    static func wake(_ fd: CInt) {
        _ = try? call("eventfd_write") { eventfd_write(fd, 1) }
    }

    /// Takes the wake-ups counted on the eventfd `fd`.
    static func drainWakeups(_ fd: CInt) {
        var value: eventfd_t = 0
        _ = try? call("eventfd_read") { eventfd_read(fd, &value) }
    }

    /// The processors online, at least 1.
    static func onlineCores() -> Int {
        max(1, Int(sysconf(CInt(_SC_NPROCESSORS_ONLN))))
    }

    // MARK: names in the file system and the abstract namespace

    /// Binds `fd` to a name the kernel picks in the abstract namespace (Linux's autobind:
    /// an address of the family alone), so the socket has a name of its own, as a TCP
    /// socket has its ephemeral port.
    static func autobind(_ fd: CInt) throws(SyscallError) {
        var family = sa_family_t(AF_UNIX)
        try callNonBlocking("bind") {
            withUnsafePointer(to: &family) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(fd, $0, socklen_t(MemoryLayout<sa_family_t>.size)) }
            }
        }
    }

    /// What is at `path`, without following a final symbolic link; nil when nothing is.
    static func fileIdentity(at path: String) throws(SyscallError) -> FileIdentity? {
        var status = stat()
        do throws(SyscallError) {
            try callNonBlocking("lstat") { lstat(path, &status) }
        } catch where error.errno == ENOENT {
            return nil
        }
        return FileIdentity(device: UInt64(status.st_dev), inode: UInt64(status.st_ino), isSocket: status.st_mode & S_IFMT == S_IFSOCK)
    }

    /// Removes the file at `path`. Nothing there is not an error.
    static func unlink(_ path: String) throws(SyscallError) {
        do throws(SyscallError) {
            try callNonBlocking("unlink") { Glibc.unlink(path) }
        } catch where error.errno == ENOENT {
            return
        }
    }
}

/// Which file a path names (device and inode), and whether it is a socket.
struct FileIdentity: Equatable {
    var device: UInt64
    var inode: UInt64
    var isSocket: Bool
}
