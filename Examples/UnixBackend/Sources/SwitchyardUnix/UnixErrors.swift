import Glibc
import Switchyard
import SwitchyardBackendKit

/// How the unix backend names what the kernel reports. On an open connection, the
/// toolkit's ``ErrnoTable`` as for TCP (`EPIPE`, `ECONNRESET` are `unavailable`/`reset`);
/// at connect and listen, the rows below first, because a socket path fails in ways a
/// host and port do not.
///
/// | when | errno | code (reason) |
/// |---|---|---|
/// | connect | `ECONNREFUSED` (no listener on the socket, or the file is not a socket), `ENOENT` (no file), `EPROTOTYPE` (not a stream socket) | `unavailable` (refused) |
/// | connect | `EAGAIN` (the listener's backlog is full) | retried until the connect timeout: `deadlineExceeded` (connect timeout) |
/// | connect, listen | `ENOTDIR`, `ENAMETOOLONG`, `ELOOP` | `invalidArgument` (invalid address) |
/// | listen | `ENOENT` (the folder does not exist) | `invalidArgument` (invalid address) |
/// | listen | `EADDRINUSE` (a live socket, or a file that is not a socket, is at the path) | `unavailable` (address in use) |
/// | connect, listen | `EACCES`, `EPERM`, `EROFS` | `permissionDenied` (permission) |
enum UnixErrors {
    private struct Row {
        let errno: CInt
        let name: String
        let code: TransportError.Code
        let reason: TransportError.Reason
    }

    private static let connectRows: [Row] = [
        Row(errno: ECONNREFUSED, name: "ECONNREFUSED", code: .unavailable, reason: .refused),
        Row(errno: ENOENT, name: "ENOENT", code: .unavailable, reason: .refused),
        Row(errno: EPROTOTYPE, name: "EPROTOTYPE", code: .unavailable, reason: .refused),
    ] + pathRows

    private static let listenRows: [Row] = [
        Row(errno: ENOENT, name: "ENOENT", code: .invalidArgument, reason: .invalidAddress),
    ] + pathRows

    private static let pathRows: [Row] = [
        Row(errno: ENOTDIR, name: "ENOTDIR", code: .invalidArgument, reason: .invalidAddress),
        Row(errno: ENAMETOOLONG, name: "ENAMETOOLONG", code: .invalidArgument, reason: .invalidAddress),
        Row(errno: ELOOP, name: "ELOOP", code: .invalidArgument, reason: .invalidAddress),
        Row(errno: EROFS, name: "EROFS", code: .permissionDenied, reason: .permission),
    ]

    /// The error of a failed connect to `endpoint`.
    static func connect(_ failure: SyscallError, to endpoint: Endpoint) -> TransportError {
        map(failure, rows: connectRows, while: "connecting to \(endpoint)")
    }

    /// The error of a failed listen on `endpoint`.
    static func listen(_ failure: SyscallError, on endpoint: Endpoint) -> TransportError {
        map(failure, rows: listenRows, while: "listening on \(endpoint)")
    }

    private static func map(_ failure: SyscallError, rows: [Row], while doing: String) -> TransportError {
        guard let row = rows.first(where: { $0.errno == failure.errno }) else {
            return ErrnoTable.error(failure, while: doing)
        }
        return TransportError(
            code: row.code, reason: row.reason,
            message: "\(doing): \(failure.call) failed: \(String(cString: strerror(row.errno)))",
            native: TransportError.NativeError(domain: .errno, code: row.errno, name: row.name))
    }
}
