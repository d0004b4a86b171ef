/// The one error type every Switchyard API throws or reports.
///
/// A `TransportError` says *what kind* of failure happened (``code``, a small
/// gRPC-style vocabulary a caller can switch on), *why* (``reason``, an open-ended
/// set such as ``Reason/refused`` or ``Reason/nameResolution``), a human-readable
/// ``message``, and, when the failure came from the operating system or a C library,
/// the ``native`` error it was mapped from.
///
/// Both ``Code`` and ``Reason`` are structs, not enums: new codes and reasons can be
/// added without breaking anyone's `switch`. Backends map their native errors through
/// one documented table each (see `docs/ERRORS.md`), so the same fault gives the same
/// code and reason whichever backend saw it.
public struct TransportError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What kind of failure this is.
    public var code: Code
    /// Why it happened.
    public var reason: Reason
    /// A message for people; not stable, do not parse it.
    public var message: String
    /// The native error this was mapped from, if any (an errno, a libuv code, an EAI code).
    public var native: NativeError?

    public init(code: Code, reason: Reason, message: String, native: NativeError? = nil) {
        self.code = code
        self.reason = reason
        self.message = message
        self.native = native
    }

    public var description: String {
        var text = "\(code) (\(reason)): \(message)"
        if let native { text += " [\(native)]" }
        return text
    }
}

extension TransportError {
    /// The kind of failure. Modelled on gRPC's status codes, so a call's status and a
    /// transport's error speak the same language.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        private enum Value: UInt8, Sendable, Hashable {
            case cancelled, unknown, invalidArgument, deadlineExceeded, notFound
            case permissionDenied, resourceExhausted, failedPrecondition, aborted
            case unimplemented, `internal`, unavailable
        }
        private let value: Value
        private init(_ value: Value) { self.value = value }

        /// The operation was cancelled, usually by the caller (a close, a shutdown, a
        /// cancelled task).
        public static let cancelled = Code(.cancelled)
        /// An error with no better code.
        public static let unknown = Code(.unknown)
        /// The caller passed something that can never work (a bad endpoint, an unknown
        /// backend name, an out-of-range option).
        public static let invalidArgument = Code(.invalidArgument)
        /// A deadline (for example the connect timeout) passed first.
        public static let deadlineExceeded = Code(.deadlineExceeded)
        /// Something named does not exist.
        public static let notFound = Code(.notFound)
        /// The system refused the operation for lack of privilege.
        public static let permissionDenied = Code(.permissionDenied)
        /// A resource ran out (descriptors, memory, buffers).
        public static let resourceExhausted = Code(.resourceExhausted)
        /// The object is not in a state that allows the operation (for example a write
        /// after ``Connection/shutdownOutput(completion:)``).
        public static let failedPrecondition = Code(.failedPrecondition)
        /// The operation was aborted.
        public static let aborted = Code(.aborted)
        /// The operation is not implemented by this backend.
        public static let unimplemented = Code(.unimplemented)
        /// A bug or an invariant broken inside Switchyard or the system.
        public static let `internal` = Code(.internal)
        /// The peer or the path to it is not there now; trying again later (on a fresh
        /// connection) may work. Refused, reset, unreachable, stalled, name resolution,
        /// connectivity changed all use this code.
        public static let unavailable = Code(.unavailable)

        public var description: String {
            switch value {
            case .cancelled: "cancelled"
            case .unknown: "unknown"
            case .invalidArgument: "invalidArgument"
            case .deadlineExceeded: "deadlineExceeded"
            case .notFound: "notFound"
            case .permissionDenied: "permissionDenied"
            case .resourceExhausted: "resourceExhausted"
            case .failedPrecondition: "failedPrecondition"
            case .aborted: "aborted"
            case .unimplemented: "unimplemented"
            case .internal: "internal"
            case .unavailable: "unavailable"
            }
        }
    }

    /// Why a failure happened. An open set: backends and applications may define more
    /// with ``init(_:)``; two reasons are equal when their names are.
    public struct Reason: Sendable, Hashable, CustomStringConvertible {
        /// A short, stable, lower-case name such as `"refused"`.
        public let name: String
        public init(_ name: String) { self.name = name }
        public var description: String { name }

        /// The peer refused the connection (nothing listens there).
        public static let refused = Reason("refused")
        /// The peer (or a middlebox) reset the connection, or the pipe broke.
        public static let reset = Reason("reset")
        /// A host name did not resolve.
        public static let nameResolution = Reason("name resolution")
        /// No route to the host or network.
        public static let unreachable = Reason("unreachable")
        /// The kernel gave up on the connection (its retransmission or keepalive budget).
        public static let timedOut = Reason("timed out")
        /// The connection made no progress within the stall timeout.
        public static let stalled = Reason("stalled")
        /// The connectivity category changed under the connection.
        public static let connectivityChanged = Reason("connectivity changed")
        /// The network path under the connection changed within one category: the
        /// default route moved to another interface, or the local address the connection
        /// uses went away (Wi-Fi that moved to another hotspot). The old socket would
        /// stall without an error, so a ``CallChannel`` ends its calls on the old path at once
        /// (see ``PathChange``).
        public static let pathChanged = Reason("path changed")
        /// No interface carries a default route (the category is `none`).
        public static let noConnectivity = Reason("no connectivity")
        /// The descriptor under the connection was reclaimed or broken (EBADF, ENOTSOCK,
        /// ENOTCONN on a connection that was connected).
        public static let reclaimed = Reason("reclaimed")
        /// The process is suspended (``Lifecycle/suspend()``): a call open when it
        /// suspended, a call or a listen started while it is suspended.
        public static let suspended = Reason("suspended")
        /// The peer broke the protocol (a bad frame).
        public static let protocolViolation = Reason("protocol violation")
        /// The connection was closed locally (a write or read after ``Connection/close()``).
        public static let closed = Reason("closed")
        /// The output side was shut down locally (a write after
        /// ``Connection/shutdownOutput(completion:)``).
        public static let outputShutdown = Reason("output shut down")
        /// The transport was shut down while the operation was open.
        public static let shutdown = Reason("shutdown")
        /// The connect timeout passed before the connection was made.
        public static let connectTimeout = Reason("connect timeout")
        /// The local address is in use.
        public static let addressInUse = Reason("address in use")
        /// The address is not valid here (not local, wrong family, malformed).
        public static let invalidAddress = Reason("invalid address")
        /// An option or setting out of its range (for example a stall timeout that is not
        /// positive).
        public static let invalidOption = Reason("invalid option")
        /// A backend name that is not registered.
        public static let unknownBackend = Reason("unknown backend")
        /// A system resource ran out (descriptors, memory, buffers).
        public static let resourceLimit = Reason("resource limit")
        /// The system denied the operation.
        public static let permission = Reason("permission")
        /// The task waiting on the operation was cancelled.
        public static let taskCancelled = Reason("task cancelled")
        /// The operation was used in a way its contract forbids (for example a second
        /// reader on one connection).
        public static let misuse = Reason("misuse")
        /// An I/O error with no more specific reason.
        public static let ioError = Reason("i/o error")
    }

    /// A native error code and where it came from.
    public struct NativeError: Sendable, Hashable, CustomStringConvertible {
        /// The namespace of a native code.
        public struct Domain: Sendable, Hashable, CustomStringConvertible {
            public let name: String
            public init(_ name: String) { self.name = name }
            public var description: String { name }
            /// POSIX `errno`.
            public static let errno = Domain("errno")
            /// A libuv error code (negative, `UV_E...`).
            public static let libuv = Domain("libuv")
            /// A `getaddrinfo` error (`EAI_...`).
            public static let addrinfo = Domain("addrinfo")
        }
        public var domain: Domain
        /// The numeric code as the domain gives it.
        public var code: Int32
        /// The symbolic name, for example `"ECONNREFUSED"` or `"UV_ECONNREFUSED"`.
        public var name: String

        public init(domain: Domain, code: Int32, name: String) {
            self.domain = domain
            self.code = code
            self.name = name
        }
        public var description: String { "\(domain) \(name) (\(code))" }
    }
}

extension TransportError {
    /// A write or read on a connection that was closed locally.
    public static func closedLocally(_ what: String = "the connection is closed") -> TransportError {
        TransportError(code: .cancelled, reason: .closed, message: what)
    }

    /// An operation that was open when its transport was shut down.
    public static func transportShutdown(_ what: String = "the transport was shut down") -> TransportError {
        TransportError(code: .cancelled, reason: .shutdown, message: what)
    }

    /// A write after the output side was shut down.
    public static func outputShutdown() -> TransportError {
        TransportError(
            code: .failedPrecondition, reason: .outputShutdown,
            message: "write after shutdownOutput: the output side is closed")
    }

    /// A name that did not resolve.
    public static func nameResolution(_ host: String, detail: String, native: NativeError? = nil) -> TransportError {
        TransportError(
            code: .unavailable, reason: .nameResolution,
            message: "could not resolve '\(host)': \(detail)", native: native)
    }
}
