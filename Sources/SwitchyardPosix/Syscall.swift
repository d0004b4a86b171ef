// Every system call the POSIX backends make lives in this file and goes through one
// helper, `syscall(_:_:)`: it retries EINTR, returns would-block as a value, reads errno
// at once, and throws a typed `SyscallError` otherwise. No other file loops on EINTR or
// reads errno.
//
// `package`, as SwiftNIO keeps its `Posix` internal: Switchyard's own modules share these
// wrappers, users never see them. `@usableFromInline` because the toolkit's inlinable I/O
// paths (`DescriptorStreamConnection`'s sends and reads, `acceptAvailable`) call them.

import Glibc
public import CSwitchyardPosix
public import Switchyard

/// A failed system call: its name and errno.
public struct SyscallError: Error, Sendable, CustomStringConvertible {
    public let call: StaticString
    public let errno: CInt
    public init(call: StaticString, errno: CInt) {
        self.call = call
        self.errno = errno
    }
    public var description: String { "\(call): \(ErrnoTable.name(of: errno)) (\(errno))" }
}

/// The part of the kernel's `tcp_info` the stall detection reads. The ages are in
/// milliseconds before the moment it was read.
@usableFromInline package struct TCPInfo: Sendable, Hashable {
    /// Segments sent and not yet acknowledged (`tcpi_unacked`).
    @usableFromInline package var unackedSegments: UInt32
    /// Bytes in the send buffer not yet sent (`tcpi_notsent_bytes`).
    @usableFromInline package var notSentBytes: UInt32
    /// Since new data was last sent (`tcpi_last_data_sent`).
    @usableFromInline package var millisecondsSinceDataSent: UInt32
    /// Since data last arrived (`tcpi_last_data_recv`).
    @usableFromInline package var millisecondsSinceDataReceived: UInt32
    /// Since an acknowledgement last arrived (`tcpi_last_ack_recv`; window probes' and
    /// keepalive's answers count).
    @usableFromInline package var millisecondsSinceAckReceived: UInt32
    /// The peer's receive window in bytes (`tcpi_snd_wnd`), or nil where the kernel does
    /// not report it (before Linux 5.4).
    @usableFromInline package var peerWindow: UInt32?

    @usableFromInline package init(
        unackedSegments: UInt32, notSentBytes: UInt32, millisecondsSinceDataSent: UInt32,
        millisecondsSinceDataReceived: UInt32, millisecondsSinceAckReceived: UInt32, peerWindow: UInt32?
    ) {
        self.unackedSegments = unackedSegments
        self.notSentBytes = notSentBytes
        self.millisecondsSinceDataSent = millisecondsSinceDataSent
        self.millisecondsSinceDataReceived = millisecondsSinceDataReceived
        self.millisecondsSinceAckReceived = millisecondsSinceAckReceived
        self.peerWindow = peerWindow
    }
}

/// What `fstat` says a descriptor refers to (``Posix/fileStatus(_:)``).
public struct FileStatus: Sendable, Hashable {
    /// `st_dev`.
    public var device: UInt64
    /// `st_ino`.
    public var inode: UInt64
    /// `st_mode`: the file type (`S_IFMT` bits) and permissions.
    public var mode: UInt32

    public init(device: UInt64, inode: UInt64, mode: UInt32) {
        self.device = device
        self.inode = inode
        self.mode = mode
    }

    /// Whether it is a socket (`S_IFSOCK`).
    public var isSocket: Bool { mode & UInt32(S_IFMT) == UInt32(S_IFSOCK) }
}

/// The outcome of a nonblocking call: done with a value, or it would have blocked.
@usableFromInline package enum IOResult<Value> {
    case done(Value)
    case wouldBlock
}

/// What an EINTR means to a call.
@usableFromInline package enum InterruptPolicy {
    /// Call again (almost every call).
    case retry
    /// Report it as `.wouldBlock` and let the caller decide: `close` (on Linux the
    /// descriptor is gone even when close reports EINTR, and a retry could close a
    /// descriptor another thread just got) and `epoll_wait` (the caller recomputes its
    /// timeout).
    case wouldBlock
}

/// Runs `body` (a call that returns -1 and sets errno on failure), reading errno at once.
/// EINTR is retried (or returned as would-block, per `onInterrupt`); EAGAIN/EWOULDBLOCK,
/// and EINPROGRESS from `connect`, come back as `.wouldBlock`; any other errno is thrown.
@inline(__always)
@usableFromInline package func syscall<T: FixedWidthInteger>(
    _ call: StaticString, onInterrupt: InterruptPolicy = .retry, _ body: () -> T
) throws(SyscallError) -> IOResult<T> {
    while true {
        let result = body()
        if result >= 0 { return .done(result) }
        let code = errno
        switch code {
        case EINTR:
            if case .retry = onInterrupt { continue }
            return .wouldBlock
        case EAGAIN, EWOULDBLOCK, EINPROGRESS: return .wouldBlock
        default: throw SyscallError(call: call, errno: code)
        }
    }
}

/// Like `syscall`, for calls that never legitimately block.
@inline(__always)
@usableFromInline package func syscallNonBlocking<T: FixedWidthInteger>(_ call: StaticString, _ body: () -> T) throws(SyscallError) -> T {
    switch try syscall(call, body) {
    case .done(let value): return value
    case .wouldBlock: throw SyscallError(call: call, errno: EAGAIN)
    }
}

/// The system calls, one thin wrapper each.
@usableFromInline package enum Posix {
    /// epoll event bits, as `UInt32`.
    @usableFromInline package enum Events {
        @usableFromInline package static let input = EPOLLIN.rawValue
        @usableFromInline package static let output = EPOLLOUT.rawValue
        @usableFromInline package static let error = EPOLLERR.rawValue
        @usableFromInline package static let hangup = EPOLLHUP.rawValue
        @usableFromInline package static let readHangup = EPOLLRDHUP.rawValue
        /// A flag, not an event: the registration reports once, then waits for a `MOD`.
        @usableFromInline package static let oneShot = EPOLLONESHOT.rawValue
    }

    // MARK: sockets

    @usableFromInline package static func socket(family: CInt, type: CInt) throws(SyscallError) -> CInt {
        try syscallNonBlocking("socket") { Glibc.socket(family, type | CInt(SOCK_NONBLOCK.rawValue) | CInt(SOCK_CLOEXEC.rawValue), 0) }
    }

    @usableFromInline package static func setOption<T: BitwiseCopyable>(_ fd: CInt, level: CInt, name: CInt, value: T) throws(SyscallError) {
        _ = try syscallNonBlocking("setsockopt") {
            withUnsafeBytes(of: value) { Glibc.setsockopt(fd, level, name, $0.baseAddress, socklen_t($0.count)) }
        }
    }

    @usableFromInline package static func getOption<T: BitwiseCopyable>(_ fd: CInt, level: CInt, name: CInt, as: T.Type, initial: T) throws(SyscallError) -> T {
        var value = initial
        var length = socklen_t(MemoryLayout<T>.size)
        _ = try syscallNonBlocking("getsockopt") {
            withUnsafeMutableBytes(of: &value) { Glibc.getsockopt(fd, level, name, $0.baseAddress, &length) }
        }
        return value
    }

    @usableFromInline package static func bind(_ fd: CInt, _ address: SystemSocketAddress) throws(SyscallError) {
        _ = try syscallNonBlocking("bind") { address.withSockaddr { Glibc.bind(fd, $0, $1) } }
    }

    @usableFromInline package static func listen(_ fd: CInt, backlog: CInt) throws(SyscallError) {
        _ = try syscallNonBlocking("listen") { Glibc.listen(fd, backlog) }
    }

    /// Accepts one connection, nonblocking and close-on-exec; `.wouldBlock` when none waits.
    @usableFromInline package static func accept(_ fd: CInt) throws(SyscallError) -> IOResult<(CInt, SystemSocketAddress)> {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let result = try syscall("accept4") {
            withUnsafeMutablePointer(to: &storage) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    csy_accept4(fd, $0, &length, CInt(SOCK_NONBLOCK.rawValue) | CInt(SOCK_CLOEXEC.rawValue))
                }
            }
        }
        switch result {
        case .done(let client): return .done((client, SystemSocketAddress(storage: storage, length: length)))
        case .wouldBlock: return .wouldBlock
        }
    }

    /// Starts a nonblocking connect: `.done` when it connected at once, `.wouldBlock`
    /// while in progress (wait for writability, then `socketError`).
    @usableFromInline package static func connect(_ fd: CInt, _ address: SystemSocketAddress) throws(SyscallError) -> IOResult<Void> {
        switch try syscall("connect", { address.withSockaddr { Glibc.connect(fd, $0, $1) } }) {
        case .done: return .done(())
        case .wouldBlock: return .wouldBlock
        }
    }

    /// The pending error of a socket (SO_ERROR), 0 if none.
    @usableFromInline package static func socketError(_ fd: CInt) throws(SyscallError) -> CInt {
        try getOption(fd, level: SOL_SOCKET, name: SO_ERROR, as: CInt.self, initial: 0)
    }

    /// Receives what is there, never blocking (`MSG_DONTWAIT`, also on a descriptor that
    /// was reclaimed and replaced by a blocking one: see ``SocketIdentity``).
    @usableFromInline package static func receive(_ fd: CInt, into buffer: UnsafeMutableRawBufferPointer) throws(SyscallError) -> IOResult<Int> {
        try syscall("recv") { Glibc.recv(fd, buffer.baseAddress, buffer.count, CInt(MSG_DONTWAIT)) }
    }

    /// The flags of every send: never a SIGPIPE (`MSG_NOSIGNAL`), never blocking
    /// (`MSG_DONTWAIT`, also on a reclaimed descriptor replaced by a blocking socket).
    /// Unlike `write`/`writev`, a send fails with `ENOTSOCK` on anything that is not a
    /// socket, so bytes are never reported sent into `/dev/null`, a file or a pipe.
    static let sendFlags = CInt(MSG_NOSIGNAL) | CInt(MSG_DONTWAIT)

    /// Sends without ever raising SIGPIPE or blocking (`sendFlags`).
    @usableFromInline package static func send(_ fd: CInt, _ buffer: UnsafeRawBufferPointer) throws(SyscallError) -> IOResult<Int> {
        try syscall("send") { Glibc.send(fd, buffer.baseAddress, buffer.count, sendFlags) }
    }

    /// Gathers `count` iovecs into one send, without ever raising SIGPIPE or blocking
    /// (`sendFlags`; `sendmsg` rather than `writev`, which takes no flags).
    @usableFromInline package static func sendGathered(_ fd: CInt, _ iovecs: UnsafeMutablePointer<iovec>, count: Int) throws(SyscallError) -> IOResult<Int> {
        var message = msghdr()
        message.msg_iov = iovecs
        message.msg_iovlen = count
        return try syscall("sendmsg") { Glibc.sendmsg(fd, &message, sendFlags) }
    }

    @usableFromInline package static func shutdown(_ fd: CInt, how: CInt) throws(SyscallError) {
        _ = try syscallNonBlocking("shutdown") { Glibc.shutdown(fd, how) }
    }

    /// Closes a descriptor. Never retried (see ``InterruptPolicy/wouldBlock``).
    @usableFromInline package static func close(_ fd: CInt) throws(SyscallError) {
        _ = try syscall("close", onInterrupt: .wouldBlock) { Glibc.close(fd) }
    }

    /// `fstat`: what `fd` refers to now (its device, inode and file type). See
    /// ``SocketIdentity``.
    @usableFromInline package static func fileStatus(_ fd: CInt) throws(SyscallError) -> FileStatus {
        var status = stat()
        _ = try syscallNonBlocking("fstat") { Glibc.fstat(fd, &status) }
        return FileStatus(device: UInt64(status.st_dev), inode: UInt64(status.st_ino), mode: UInt32(status.st_mode))
    }

    @usableFromInline package static func localAddress(_ fd: CInt) throws(SyscallError) -> SystemSocketAddress {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        _ = try syscallNonBlocking("getsockname") {
            withUnsafeMutablePointer(to: &storage) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.getsockname(fd, $0, &length) } }
        }
        return SystemSocketAddress(storage: storage, length: length)
    }

    @usableFromInline package static func remoteAddress(_ fd: CInt) throws(SyscallError) -> SystemSocketAddress {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        _ = try syscallNonBlocking("getpeername") {
            withUnsafeMutablePointer(to: &storage) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.getpeername(fd, $0, &length) } }
        }
        return SystemSocketAddress(storage: storage, length: length)
    }

    /// Disables Nagle's algorithm, so small writes leave at once (request/response).
    @usableFromInline package static func setNoDelay(_ fd: CInt) throws(SyscallError) {
        try setOption(fd, level: CInt(IPPROTO_TCP), name: TCP_NODELAY, value: CInt(1))
    }

    /// Lets a listener rebind a port whose old connections are in TIME_WAIT.
    @usableFromInline package static func setReuseAddress(_ fd: CInt) throws(SyscallError) {
        try setOption(fd, level: SOL_SOCKET, name: SO_REUSEADDR, value: CInt(1))
    }

    /// Makes the next close send a TCP reset instead of a FIN.
    @usableFromInline package static func setLingerZero(_ fd: CInt) throws(SyscallError) {
        try setOption(fd, level: SOL_SOCKET, name: SO_LINGER, value: linger(l_onoff: 1, l_linger: 0))
    }

    /// Turns kernel keepalive on: the first probe after `idle` seconds without traffic,
    /// then one every `interval` seconds, `count` of them.
    @usableFromInline package static func setKeepalive(_ fd: CInt, idle: CInt, interval: CInt, count: CInt) throws(SyscallError) {
        try setOption(fd, level: SOL_SOCKET, name: SO_KEEPALIVE, value: CInt(1))
        try setOption(fd, level: CInt(IPPROTO_TCP), name: TCP_KEEPIDLE, value: idle)
        try setOption(fd, level: CInt(IPPROTO_TCP), name: TCP_KEEPINTVL, value: interval)
        try setOption(fd, level: CInt(IPPROTO_TCP), name: TCP_KEEPCNT, value: count)
    }

    /// TCP_USER_TIMEOUT: how long sent data (or, once probes are out, keepalive) may go
    /// unacknowledged before the kernel fails the connection (ETIMEDOUT, or the last soft
    /// error such as EHOSTUNREACH).
    @usableFromInline package static func setUserTimeout(_ fd: CInt, milliseconds: UInt32) throws(SyscallError) {
        try setOption(fd, level: CInt(IPPROTO_TCP), name: TCP_USER_TIMEOUT, value: milliseconds)
    }

    /// What the kernel knows about a TCP connection's progress (getsockopt TCP_INFO).
    @usableFromInline package static func tcpInfo(_ fd: CInt) throws(SyscallError) -> TCPInfo {
        var raw = csy_tcp_info()
        var length = socklen_t(MemoryLayout<csy_tcp_info>.size)
        _ = try syscallNonBlocking("getsockopt") {
            withUnsafeMutableBytes(of: &raw) { Glibc.getsockopt(fd, CInt(IPPROTO_TCP), TCP_INFO, $0.baseAddress, &length) }
        }
        // A kernel older than the field copies less: the window is then unknown.
        let windowEnd = MemoryLayout<csy_tcp_info>.offset(of: \csy_tcp_info.tcpi_snd_wnd)! + MemoryLayout<UInt32>.size
        return TCPInfo(
            unackedSegments: raw.tcpi_unacked, notSentBytes: raw.tcpi_notsent_bytes,
            millisecondsSinceDataSent: raw.tcpi_last_data_sent,
            millisecondsSinceDataReceived: raw.tcpi_last_data_recv,
            millisecondsSinceAckReceived: raw.tcpi_last_ack_recv,
            peerWindow: Int(length) >= windowEnd ? raw.tcpi_snd_wnd : nil)
    }

    @usableFromInline package static let shutdownWrite = CInt(SHUT_WR)
    @usableFromInline package static let shutdownRead = CInt(SHUT_RD)
    @usableFromInline package static let streamSocket = CInt(SOCK_STREAM.rawValue)

    // MARK: epoll and eventfd

    @usableFromInline package static func epollCreate() throws(SyscallError) -> CInt {
        try syscallNonBlocking("epoll_create1") { epoll_create1(CInt(EPOLL_CLOEXEC)) }
    }

    /// `epoll_ctl`'s operations, for ``epollControl(_:_:_:events:data:)``.
    @usableFromInline package static let epollAdd = CInt(EPOLL_CTL_ADD)
    @usableFromInline package static let epollModify = CInt(EPOLL_CTL_MOD)
    @usableFromInline package static let epollDelete = CInt(EPOLL_CTL_DEL)

    /// `epoll_ctl`: `op` (``epollAdd``, ``epollModify``, ``epollDelete``) `fd` with the
    /// event bits (``Events``) and the data word that ``EpollReadyEvents`` hands back.
    @usableFromInline package static func epollControl(_ epfd: CInt, _ op: CInt, _ fd: CInt, events: UInt32, data: UInt64) throws(SyscallError) {
        var event = epoll_event()
        event.events = events
        event.data.u64 = data
        _ = try syscallNonBlocking("epoll_ctl") { epoll_ctl(epfd, op, fd, &event) }
    }

    /// Waits for events; an interrupted wait returns 0 events instead of retrying, so the
    /// caller recomputes its timeout.
    @usableFromInline package static func epollWait(_ epfd: CInt, _ events: UnsafeMutablePointer<epoll_event>, capacity: CInt, timeoutMilliseconds: CInt) throws(SyscallError) -> Int {
        switch try syscall("epoll_wait", onInterrupt: .wouldBlock, { epoll_wait(epfd, events, capacity, timeoutMilliseconds) }) {
        case .done(let n): return Int(n)
        case .wouldBlock: return 0
        }
    }

    @usableFromInline package static func eventfdCreate() throws(SyscallError) -> CInt {
        try syscallNonBlocking("eventfd") { eventfd(0, CInt(EFD_CLOEXEC) | CInt(EFD_NONBLOCK)) }
    }

    @usableFromInline package static func eventfdSignal(_ fd: CInt) throws(SyscallError) {
        _ = try syscall("eventfd_write") { eventfd_write(fd, 1) }
    }

    @usableFromInline package static func eventfdDrain(_ fd: CInt) throws(SyscallError) {
        var value: eventfd_t = 0
        _ = try syscall("eventfd_read") { eventfd_read(fd, &value) }
    }

    // MARK: threads and the process

    @usableFromInline package static func onlineCores() -> Int {
        max(1, Int(sysconf(CInt(_SC_NPROCESSORS_ONLN))))
    }

    // MARK: name resolution (getaddrinfo reports through its return value, not errno)

    /// Resolves `host` for TCP with `getaddrinfo`. Blocking: call it off the event loops.
    @usableFromInline package static func resolve(host: String, port: Int) -> Result<[SystemSocketAddress], TransportError> {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = CInt(SOCK_STREAM.rawValue)
        hints.ai_flags = AI_ADDRCONFIG
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &list)
        guard status == 0, let first = list else {
            let native = TransportError.NativeError(domain: .addrinfo, code: status, name: eaiName(status))
            let detail = String(cString: gai_strerror(status))
            return .failure(.nameResolution(host, detail: detail, native: native))
        }
        defer { freeaddrinfo(first) }
        var addresses: [SystemSocketAddress] = []
        var cursor: UnsafeMutablePointer<addrinfo>? = first
        while let entry = cursor {
            if let address = entry.pointee.ai_addr {
                addresses.append(SystemSocketAddress(address, length: entry.pointee.ai_addrlen))
            }
            cursor = entry.pointee.ai_next
        }
        if addresses.isEmpty {
            return .failure(.nameResolution(host, detail: "no addresses", native: nil))
        }
        return .success(addresses)
    }

    private static func eaiName(_ code: CInt) -> String {
        switch code {
        case EAI_NONAME: "EAI_NONAME"
        case EAI_AGAIN: "EAI_AGAIN"
        case EAI_FAIL: "EAI_FAIL"
        case EAI_FAMILY: "EAI_FAMILY"
        case EAI_MEMORY: "EAI_MEMORY"
        case EAI_SERVICE: "EAI_SERVICE"
        case EAI_SYSTEM: "EAI_SYSTEM"
        default: "EAI_\(code)"
        }
    }
}
