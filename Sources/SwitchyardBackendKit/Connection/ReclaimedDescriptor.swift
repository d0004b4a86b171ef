import Glibc
public import Switchyard
import SwitchyardPosix

/// Which socket a connection was made with: the device and inode of its descriptor
/// (`fstat`'s `st_dev`, `st_ino`), read once when the connection is made, so that an
/// error later can tell a broken connection from a **reclaimed descriptor**.
///
/// A descriptor can be taken away underneath a connection: code elsewhere in the process
/// closes it and the number is reused, or `dup2`s something else over it (a fresh
/// socket, `/dev/null`, a file, a pipe). The connection keeps the number, so every later
/// call on it reaches the replacement, and what the kernel answers depends on what that
/// is: `ENOTSOCK` from `send` on `/dev/null`, a file or a pipe; `EPIPE` (which alone
/// would read as a reset) or `ENOTCONN` on a fresh socket; `ENOENT` or `EPERM` from
/// `epoll_ctl`, since the old registration vanished with the old socket and a file or
/// `/dev/null` cannot be polled at all. Comparing the identity tells them apart for
/// every kind of replacement with one `fstat`.
///
/// **Cost.** One `fstat` when the connection is made (``init(descriptor:)``) and one
/// when an error is about to end it (``connectionError(_:descriptor:)``); none per
/// message, so the write and read paths are unchanged. A healthy connection never pays
/// for the check after it was made.
///
/// **What ends a connection `reclaimed`.** Any error on the connection's descriptor
/// (a send, a receive, an `epoll_ctl`, a libuv callback) is checked: if the number no
/// longer holds the socket (``DescriptorCheck/replaced(by:)``) or holds nothing
/// (``DescriptorCheck/closed``), the connection ends `unavailable`/`reclaimed`, the
/// native error kept. `ECONNABORTED` (the socket destroyed by the kernel, `ss -K`) and
/// `EBADF`, `ENOTSOCK`, `ENOTCONN` are `reclaimed` in the errno table already.
///
/// **What it does not do.** A connection that makes no system call on its descriptor
/// does not notice the replacement, and nothing reports it (the old socket's epoll
/// registration went away with the socket): an idle one, or one whose writes wait for
/// the kernel (a later write joins the queue without a system call). It notices at its
/// next send with nothing queued, its next change of read demand (the backend's
/// `epoll_ctl` fails, or the replacement reports an error), or never; its close then
/// closes the descriptor number it owns, which is the replacement, so nothing leaks.
/// Nothing is reported sent meanwhile: sends fail on anything but a socket
/// (`Posix/send(_:_:)`). A replacement that is itself a connected socket of someone
/// else's would be written to without an error: telling that apart would cost a check
/// per write.
public struct SocketIdentity: Sendable, Hashable, CustomStringConvertible {
    /// `st_dev` of the socket (the socket file system's device).
    public let device: UInt64
    /// `st_ino` of the socket: unique among the sockets open on the machine.
    public let inode: UInt64

    public init(device: UInt64, inode: UInt64) {
        self.device = device
        self.inode = inode
    }

    /// The identity of what `descriptor` holds now (one `fstat`), or nil when it holds
    /// nothing or is not a socket.
    public init?(descriptor: CInt) {
        guard let status = try? Posix.fileStatus(descriptor), status.isSocket else { return nil }
        self.init(device: status.device, inode: status.inode)
    }

    public var description: String { "socket:[\(inode)]" }

    /// What `descriptor` holds now, compared with this socket (one `fstat`).
    public func check(_ descriptor: CInt) -> DescriptorCheck {
        do {
            return check(try Posix.fileStatus(descriptor))
        } catch {
            // EBADF: the number holds nothing. Any other failure of fstat on a number
            // that held a socket is not the socket either.
            return error.errno == EBADF ? .closed : .replaced(by: "a descriptor fstat refuses (\(ErrnoTable.name(of: error.errno)))")
        }
    }

    /// What a descriptor whose `fstat` gave `status` holds, compared with this socket.
    public func check(_ status: FileStatus) -> DescriptorCheck {
        if status.device == device, status.inode == inode { return .same }
        return .replaced(by: Self.describe(mode: status.mode))
    }

    /// The error to end the connection with, for `error` met on `descriptor`: `error`
    /// itself while the descriptor still holds this socket (or it is `reclaimed`
    /// already); otherwise `unavailable`/`reclaimed`, saying what took the socket's place,
    /// with `error`'s native code kept. One `fstat`; call it once, when an error is about
    /// to end the connection.
    public func connectionError(_ error: TransportError, descriptor: CInt) -> TransportError {
        if error.code == .unavailable, error.reason == .reclaimed { return error }
        let now: String
        switch check(descriptor) {
        case .same: return error
        case .closed: now = "holds nothing (closed)"
        case .replaced(let what): now = "now holds \(what)"
        }
        var reclaimed = error
        reclaimed.code = .unavailable
        reclaimed.reason = .reclaimed
        reclaimed.message = "\(error.message) (descriptor \(descriptor) was reclaimed: it no longer holds the connection's \(self) but \(now))"
        return reclaimed
    }

    /// What a file of `mode` (`st_mode`) is, for messages.
    static func describe(mode: UInt32) -> String {
        switch mode_t(mode) & S_IFMT {
        case S_IFSOCK: "another socket"
        case S_IFCHR: "a character device"
        case S_IFREG: "a regular file"
        case S_IFIFO: "a pipe"
        case S_IFDIR: "a directory"
        case S_IFBLK: "a block device"
        default: "another kind of file"
        }
    }
}

/// What a connection's descriptor number holds now (`SocketIdentity.check(_:)`).
public enum DescriptorCheck: Sendable, Hashable {
    /// Still the connection's socket.
    case same
    /// Something else, described (`"a pipe"`, `"another socket"`).
    case replaced(by: String)
    /// Nothing: the number is closed.
    case closed
}
