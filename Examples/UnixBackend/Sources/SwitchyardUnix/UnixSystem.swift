// The system calls the unix backend makes beyond the toolkit's `Posix` wrappers, all in
// this file, each through the toolkit's `syscall` helper (EINTR retried, would-block
// returned as a value, errno read at once, a typed `SyscallError` thrown otherwise).
// Socket, bind, listen, accept, connect, send, receive, shutdown and close are the
// toolkit's (`Posix`).

import CSwitchyardUnix
import Glibc
import SwitchyardBackendKit

enum UnixSystem {
    // MARK: epoll

    static func epollCreate() throws(SyscallError) -> CInt {
        try syscallNonBlocking("epoll_create1") { csu_epoll_create() }
    }

    static func epollAdd(_ epfd: CInt, _ fd: CInt, events: UInt32, data: UInt64) throws(SyscallError) {
        _ = try syscallNonBlocking("epoll_ctl") { csu_epoll_add(epfd, fd, events, data) }
    }

    static func epollModify(_ epfd: CInt, _ fd: CInt, events: UInt32, data: UInt64) throws(SyscallError) {
        _ = try syscallNonBlocking("epoll_ctl") { csu_epoll_modify(epfd, fd, events, data) }
    }

    static func epollDelete(_ epfd: CInt, _ fd: CInt) throws(SyscallError) {
        _ = try syscallNonBlocking("epoll_ctl") { csu_epoll_delete(epfd, fd) }
    }

    /// Waits for ready descriptors; an interrupted wait returns none (the caller loops).
    static func epollWait(_ epfd: CInt, into ready: UnsafeMutablePointer<csu_ready>, capacity: CInt, timeoutMilliseconds: CInt) throws(SyscallError) -> Int {
        switch try syscall("epoll_wait", onInterrupt: .wouldBlock, { csu_epoll_wait(epfd, ready, capacity, timeoutMilliseconds) }) {
        case .done(let count): return Int(count)
        case .wouldBlock: return 0
        }
    }

    // MARK: names in the file system and the abstract namespace

    /// Binds `fd` to a name the kernel picks in the abstract namespace (Linux's autobind:
    /// an address of the family alone), so the socket has a name of its own, as a TCP
    /// socket has its ephemeral port.
    static func autobind(_ fd: CInt) throws(SyscallError) {
        var family = sa_family_t(AF_UNIX)
        _ = try syscallNonBlocking("bind") {
            withUnsafePointer(to: &family) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(fd, $0, socklen_t(MemoryLayout<sa_family_t>.size)) }
            }
        }
    }

    /// What is at `path`, without following a final symbolic link; nil when nothing is.
    static func fileIdentity(at path: String) throws(SyscallError) -> FileIdentity? {
        var status = stat()
        do throws(SyscallError) {
            _ = try syscallNonBlocking("lstat") { lstat(path, &status) }
        } catch where error.errno == ENOENT {
            return nil
        }
        return FileIdentity(device: UInt64(status.st_dev), inode: UInt64(status.st_ino), isSocket: status.st_mode & S_IFMT == S_IFSOCK)
    }

    /// Removes the file at `path`. Nothing there is not an error.
    static func unlink(_ path: String) throws(SyscallError) {
        do throws(SyscallError) {
            _ = try syscallNonBlocking("unlink") { Glibc.unlink(path) }
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
