import Glibc
import CSwitchyardPosix
public import Switchyard

/// The one table that maps `errno` to `TransportError` for the POSIX backends.
///
/// `docs/ERRORS.md` shows the same table; a test checks that the two agree row by row.
/// The libuv backend's table maps each `UV_E...` code to the same code and reason as the
/// errno it stands for, so a fault gives the same error on every backend.
public enum ErrnoTable {
    public struct Entry: Sendable {
        public let errno: CInt
        public let name: String
        public let code: TransportError.Code
        public let reason: TransportError.Reason
    }

    /// Every errno with a defined mapping. Anything else maps to `internal`/`i/o error`.
    public static let entries: [Entry] = [
        Entry(errno: ECONNREFUSED, name: "ECONNREFUSED", code: .unavailable, reason: .refused),
        Entry(errno: ECONNRESET, name: "ECONNRESET", code: .unavailable, reason: .reset),
        Entry(errno: ECONNABORTED, name: "ECONNABORTED", code: .unavailable, reason: .reclaimed),
        Entry(errno: EPIPE, name: "EPIPE", code: .unavailable, reason: .reset),
        Entry(errno: ETIMEDOUT, name: "ETIMEDOUT", code: .unavailable, reason: .timedOut),
        Entry(errno: EHOSTUNREACH, name: "EHOSTUNREACH", code: .unavailable, reason: .unreachable),
        Entry(errno: ENETUNREACH, name: "ENETUNREACH", code: .unavailable, reason: .unreachable),
        Entry(errno: ENETDOWN, name: "ENETDOWN", code: .unavailable, reason: .unreachable),
        Entry(errno: EHOSTDOWN, name: "EHOSTDOWN", code: .unavailable, reason: .unreachable),
        Entry(errno: ENOTCONN, name: "ENOTCONN", code: .unavailable, reason: .reclaimed),
        Entry(errno: EBADF, name: "EBADF", code: .unavailable, reason: .reclaimed),
        Entry(errno: ENOTSOCK, name: "ENOTSOCK", code: .unavailable, reason: .reclaimed),
        Entry(errno: EADDRINUSE, name: "EADDRINUSE", code: .unavailable, reason: .addressInUse),
        Entry(errno: EADDRNOTAVAIL, name: "EADDRNOTAVAIL", code: .invalidArgument, reason: .invalidAddress),
        Entry(errno: EAFNOSUPPORT, name: "EAFNOSUPPORT", code: .invalidArgument, reason: .invalidAddress),
        Entry(errno: EINVAL, name: "EINVAL", code: .invalidArgument, reason: .invalidAddress),
        Entry(errno: EACCES, name: "EACCES", code: .permissionDenied, reason: .permission),
        Entry(errno: EPERM, name: "EPERM", code: .permissionDenied, reason: .permission),
        Entry(errno: EMFILE, name: "EMFILE", code: .resourceExhausted, reason: .resourceLimit),
        Entry(errno: ENFILE, name: "ENFILE", code: .resourceExhausted, reason: .resourceLimit),
        Entry(errno: ENOBUFS, name: "ENOBUFS", code: .resourceExhausted, reason: .resourceLimit),
        Entry(errno: ENOMEM, name: "ENOMEM", code: .resourceExhausted, reason: .resourceLimit),
    ]

    private static let byErrno: [CInt: Entry] = Dictionary(uniqueKeysWithValues: entries.map { ($0.errno, $0) })

    /// Names of errnos with no row above (they map to `internal`/`i/o error` here; a
    /// backend maps them in its own table where they mean more, as the unix example's
    /// `ENOENT` at connect does), so that messages and ``SyscallError`` name them.
    private static let otherNames: [CInt: String] = [
        ENOENT: "ENOENT", ENOTDIR: "ENOTDIR", ENAMETOOLONG: "ENAMETOOLONG", ELOOP: "ELOOP",
        EROFS: "EROFS", EEXIST: "EEXIST", EPROTOTYPE: "EPROTOTYPE", EAGAIN: "EAGAIN",
        EINTR: "EINTR", EINPROGRESS: "EINPROGRESS", EALREADY: "EALREADY", EISCONN: "EISCONN",
    ]

    /// The symbolic name of an errno, for messages.
    public static func name(of code: CInt) -> String {
        byErrno[code]?.name ?? otherNames[code] ?? "errno \(code)"
    }

    /// The `TransportError` for a failed system call.
    public static func error(_ failure: SyscallError, while doing: String) -> TransportError {
        error(errno: failure.errno, message: "\(doing): \(failure.call) failed")
    }

    /// The `TransportError` for an errno.
    public static func error(errno code: CInt, message: String) -> TransportError {
        let native = TransportError.NativeError(domain: .errno, code: code, name: name(of: code))
        let text = "\(message): \(String(cString: strerror(code)))"
        if let entry = byErrno[code] {
            return TransportError(code: entry.code, reason: entry.reason, message: text, native: native)
        }
        return TransportError(code: .internal, reason: .ioError, message: text, native: native)
    }
}
