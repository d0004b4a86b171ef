import CLibUV
package import Switchyard
import SwitchyardBackendKit

/// The one table that maps libuv error codes to ``TransportError`` for the libuv backend.
///
/// `docs/ERRORS.md` shows it, as the `libuv` column, beside the BSD backend's errno
/// table: each `UV_E...` code gives the same code and reason as the errno it stands for
/// (on Linux `UV_EXXX == -EXXX`), so a fault gives the same error on either backend. A
/// test parses the document and checks it against ``entries`` row by row.
///
/// Not in the table, by design: `UV_EOF` is end of stream, not an error (the handler's
/// `connectionDidReadEnd()` runs); `UV_EAGAIN` is "would block" and never surfaces;
/// `UV_EAI_*` (from `uv_getaddrinfo`) always means `unavailable`/`name resolution` (see
/// ``nameResolution(_:host:)``); `UV_ECANCELED` only reaches requests this backend
/// cancelled itself, whose callbacks ignore it. Any other code maps to `internal` /
/// `i/o error`, with the code kept in ``TransportError/native``.
package enum UVErrorTable {
    package struct Entry: Sendable {
        /// The libuv code (negative).
        package let code: Int32
        /// Its symbolic name, `UV_E...`.
        package let name: String
        package let transportCode: TransportError.Code
        package let reason: TransportError.Reason
    }

    /// Every libuv code with a defined mapping. Anything else maps to `internal`/`i/o error`.
    package static let entries: [Entry] = [
        Entry(code: UV_ECONNREFUSED.rawValue, name: "UV_ECONNREFUSED", transportCode: .unavailable, reason: .refused),
        Entry(code: UV_ECONNRESET.rawValue, name: "UV_ECONNRESET", transportCode: .unavailable, reason: .reset),
        Entry(code: UV_ECONNABORTED.rawValue, name: "UV_ECONNABORTED", transportCode: .unavailable, reason: .reclaimed),
        Entry(code: UV_EPIPE.rawValue, name: "UV_EPIPE", transportCode: .unavailable, reason: .reset),
        Entry(code: UV_ETIMEDOUT.rawValue, name: "UV_ETIMEDOUT", transportCode: .unavailable, reason: .timedOut),
        Entry(code: UV_EHOSTUNREACH.rawValue, name: "UV_EHOSTUNREACH", transportCode: .unavailable, reason: .unreachable),
        Entry(code: UV_ENETUNREACH.rawValue, name: "UV_ENETUNREACH", transportCode: .unavailable, reason: .unreachable),
        Entry(code: UV_ENETDOWN.rawValue, name: "UV_ENETDOWN", transportCode: .unavailable, reason: .unreachable),
        Entry(code: UV_EHOSTDOWN.rawValue, name: "UV_EHOSTDOWN", transportCode: .unavailable, reason: .unreachable),
        Entry(code: UV_ENOTCONN.rawValue, name: "UV_ENOTCONN", transportCode: .unavailable, reason: .reclaimed),
        Entry(code: UV_EBADF.rawValue, name: "UV_EBADF", transportCode: .unavailable, reason: .reclaimed),
        Entry(code: UV_ENOTSOCK.rawValue, name: "UV_ENOTSOCK", transportCode: .unavailable, reason: .reclaimed),
        Entry(code: UV_EADDRINUSE.rawValue, name: "UV_EADDRINUSE", transportCode: .unavailable, reason: .addressInUse),
        Entry(code: UV_EADDRNOTAVAIL.rawValue, name: "UV_EADDRNOTAVAIL", transportCode: .invalidArgument, reason: .invalidAddress),
        Entry(code: UV_EAFNOSUPPORT.rawValue, name: "UV_EAFNOSUPPORT", transportCode: .invalidArgument, reason: .invalidAddress),
        Entry(code: UV_EINVAL.rawValue, name: "UV_EINVAL", transportCode: .invalidArgument, reason: .invalidAddress),
        Entry(code: UV_EACCES.rawValue, name: "UV_EACCES", transportCode: .permissionDenied, reason: .permission),
        Entry(code: UV_EPERM.rawValue, name: "UV_EPERM", transportCode: .permissionDenied, reason: .permission),
        Entry(code: UV_EMFILE.rawValue, name: "UV_EMFILE", transportCode: .resourceExhausted, reason: .resourceLimit),
        Entry(code: UV_ENFILE.rawValue, name: "UV_ENFILE", transportCode: .resourceExhausted, reason: .resourceLimit),
        Entry(code: UV_ENOBUFS.rawValue, name: "UV_ENOBUFS", transportCode: .resourceExhausted, reason: .resourceLimit),
        Entry(code: UV_ENOMEM.rawValue, name: "UV_ENOMEM", transportCode: .resourceExhausted, reason: .resourceLimit),
    ]

    private static let byCode: [Int32: Entry] = Dictionary(uniqueKeysWithValues: entries.map { ($0.code, $0) })

    /// The symbolic name of a libuv code (`UV_ECONNRESET`), for messages and ``TransportError/native``.
    package static func name(of code: Int32) -> String {
        if let entry = byCode[code] { return entry.name }
        var buffer = [CChar](repeating: 0, count: 64)
        let name = buffer.withUnsafeMutableBufferPointer { pointer in
            String(cString: uv_err_name_r(code, pointer.baseAddress, pointer.count))
        }
        return "UV_" + name
    }

    /// The ``TransportError`` for a libuv error `code` met while doing `what`.
    package static func error(_ code: Int32, _ what: String) -> TransportError {
        let native = TransportError.NativeError(domain: .libuv, code: code, name: name(of: code))
        let text = "\(what): \(describe(code))"
        if let entry = byCode[code] {
            return TransportError(code: entry.transportCode, reason: entry.reason, message: text, native: native)
        }
        return TransportError(code: .internal, reason: .ioError, message: text, native: native)
    }

    /// The codes by which the kernel ends a connection whose keepalive or
    /// `TCP_USER_TIMEOUT` ran out: `UV_ETIMEDOUT`, or the soft error of the last
    /// retransmission (`UV_EHOSTUNREACH`, `UV_ENETUNREACH` once the link went down).
    package static let stallCodes: Set<Int32> = [UV_ETIMEDOUT.rawValue, UV_EHOSTUNREACH.rawValue, UV_ENETUNREACH.rawValue]

    /// The ``TransportError`` for a libuv code that ended an established connection.
    /// With stall detection on (the transport has a stall timeout, so the kernel was
    /// configured to fail a stalled connection), the codes of ``stallCodes`` are that
    /// bound running out: `unavailable`, reason `stalled`, the code kept in `native`.
    /// Otherwise, and for every other code, the table's mapping (``error(_:_:)``).
    package static func connectionError(_ code: Int32, _ what: String, stallDetection: Bool) -> TransportError {
        var error = error(code, what)
        if stallDetection && stallCodes.contains(code) {
            error.code = .unavailable
            error.reason = .stalled
            error.message += ErrnoTable.kernelDetectorNote
        }
        return error
    }

    /// The error for a failed `uv_getaddrinfo` (`UV_EAI_*`, or any other code it gave).
    package static func nameResolution(_ code: Int32, host: String) -> TransportError {
        let native = TransportError.NativeError(domain: .libuv, code: code, name: name(of: code))
        return .nameResolution(host, detail: describe(code), native: native)
    }

    private static func describe(_ code: Int32) -> String {
        var buffer = [CChar](repeating: 0, count: 128)
        return buffer.withUnsafeMutableBufferPointer { pointer in
            String(cString: uv_strerror_r(code, pointer.baseAddress, pointer.count))
        }
    }
}
