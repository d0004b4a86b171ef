// The system calls the unix backend makes beyond the toolkit's `Posix` wrappers, all in
// this file, each through the toolkit's `syscall` helper (EINTR retried, would-block
// returned as a value, errno read at once, a typed `SyscallError` thrown otherwise).
// Socket, bind, listen, accept, connect, send, receive, shutdown, close and epoll are
// the toolkit's (`Posix`, `EpollReadyEvents`).

import Glibc
import SwitchyardBackendKit

enum UnixSystem {
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
