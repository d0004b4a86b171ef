public import Logging
public import Switchyard

/// The policy between a call and its connection: when received messages are delivered
/// (and so when the connection reads), and whether each sent message's arrival in the
/// kernel is reported (`didWriteData`).
///
/// A flow controller is a small state machine owned by one call and driven on the call's
/// event loop: the call asks ``mayDeliver`` before it hands over each decoded message and
/// tells ``didDeliver(bytes:)`` after; the application's requests arrive through
/// ``request(_:)``. While ``mayDeliver`` is false the call reads only until one whole
/// frame waits, then stops reading the socket, so TCP pushes back on the sender and the
/// receiver holds at most one message plus one read buffer.
public protocol FlowController: Sendable {
    /// Whether each sent message's arrival in the kernel is reported as `didWriteData`.
    var reportsWrites: Bool { get }
    /// Whether one more received message may be delivered now.
    var mayDeliver: Bool { get }
    /// A message of `bytes` bytes was delivered.
    mutating func didDeliver(bytes: Int)
    /// The application asked for `count` more messages (`receiveNextMessages`).
    mutating func request(_ count: Int)
}

/// Flow control off: every message is delivered as it arrives, and no `didWriteData`
/// is reported. Memory is bounded only by how fast the application consumes.
public struct AutomaticFlowController: FlowController {
    public init() {}
    public var reportsWrites: Bool { false }
    public var mayDeliver: Bool { true }
    public mutating func didDeliver(bytes: Int) {}
    public mutating func request(_ count: Int) {}
}

/// Flow control on (the mobile RPC proposal's semantics): nothing is delivered until
/// the application asks (`receiveNextMessage()` / `receiveNextMessages(n)`); requests
/// stack; each sent message is reported with `didWriteData` once it is in the kernel.
public struct ManualFlowController: FlowController {
    /// Messages asked for and not yet delivered.
    public private(set) var demand = 0
    public init() {}
    public var reportsWrites: Bool { true }
    public var mayDeliver: Bool { demand > 0 }
    public mutating func didDeliver(bytes: Int) {
        // Programmer misuse only: the call delivers only when `mayDeliver` says so.
        precondition(demand > 0, "a message was delivered that nobody asked for (a bug in the caller of didDeliver)")
        demand -= 1
    }
    public mutating func request(_ count: Int) {
        precondition(count >= 0, "request(_:) was given \(count): a negative number of messages (a programming error)")
        demand = demand.addingReportingOverflow(count).overflow ? .max : demand + count
    }
}

/// A byte window: messages are delivered without asking while fewer than `window` bytes
/// were delivered and not yet acknowledged with `request(_:)` (which here means "this
/// many bytes were consumed"). Reports `didWriteData`.
public struct ByteWindowFlowController: FlowController {
    /// Bytes that may be delivered and unconsumed at once.
    public let window: Int
    /// Bytes delivered and not yet consumed.
    public private(set) var outstanding = 0
    public init(window: Int) {
        precondition(window > 0, "ByteWindowFlowController(window:) was given \(window): the window is 1 byte or more (a programming error; check a configured value before passing it)")
        self.window = window
    }
    public var reportsWrites: Bool { true }
    public var mayDeliver: Bool { outstanding < window }
    public mutating func didDeliver(bytes: Int) { outstanding += bytes }
    /// `count` bytes were consumed.
    public mutating func request(_ count: Int) { outstanding = max(0, outstanding - count) }
}

/// Options for one call.
public struct CallConfiguration: Sendable {
    /// Flow control (off by default): with it on, messages are delivered only when
    /// asked for and each sent message reports `didWriteData`.
    public var enableFlowControl: Bool
    /// The largest message accepted (default 4 MiB); a larger frame ends the call with
    /// `resourceExhausted`, reason `frame too large`.
    public var maximumMessageSize: Int
    /// The largest headers or trailers payload accepted (default 16 KiB): the client's
    /// method and request metadata on a server, the server's response or trailing
    /// metadata on a client. A larger metadata frame ends the call with
    /// `resourceExhausted`, reason `metadata too large`, as soon as its prefix arrives.
    public var maximumMetadataSize: Int = Frame.defaultMaximumMetadataSize
    /// A custom policy; when set it replaces what ``enableFlowControl`` chooses.
    public var flowController: (any FlowController)?
    /// The call's deadline, counted from when a channel is asked for it (its connect
    /// included); `nil` (the default) for none. A client call still open when it passes
    /// ends `deadlineExceeded`, reason `timed out` (`CallDeadline`), and the request
    /// carries it as `grpc-timeout`, which the server enforces too (`ServerDeadline`). A
    /// server's own configuration ignores it: its deadline is the client's.
    public var timeout: Duration?
    /// Whether a client call waits for the channel to be ready instead of failing while it
    /// cannot connect (gRPC's wait-for-ready; default false, fail fast). A fail-fast call
    /// fails at once, with the last attempt's error (`unavailable`/`refused`,
    /// `deadlineExceeded`/`connect timeout`, ...), when the channel is in
    /// `transientFailure` or its attempt fails; a wait-for-ready call waits through the
    /// channel's retries (``ChannelConfiguration/backoff``) until a connection is ready,
    /// its ``timeout`` passes (`deadlineExceeded`, reason `timed out`), its task is
    /// cancelled (`cancelled`), or the channel closes. Both fail at once when the name does
    /// not resolve (`unavailable`, reason `name resolution`: DESIGN behaviour 4). Without
    /// a ``timeout`` a wait-for-ready call may wait for ever. A server ignores it. (Set it
    /// on the value; the initializer keeps its parameters.)
    public var waitForReady: Bool = false
    /// Client, on a ``CallChannel``: how the call's requests are compressed (default
    /// ``CallCompression/none``: as they are, at no cost). With ``CallCompression/gzip``
    /// the request carries `grpc-encoding: gzip` and each message goes out compressed
    /// (compressed flag 1), except one that would not get smaller, which goes out as it
    /// is (flag 0). A server ignores it. (Set it on the value; the initializer keeps its
    /// parameters.)
    public var requestCompression: CallCompression = .none
    /// Client, on a ``CallChannel``: the algorithms the server may compress the call's
    /// responses with, sent as `grpc-accept-encoding` (with `identity`). Default empty:
    /// no `grpc-accept-encoding`, so gRPC servers respond uncompressed. A gzip response
    /// is read whatever this says. A server ignores it.
    public var acceptedResponseCompression: [CallCompression] = []
    /// Where the end of each call made with these options is logged (`call ended`, debug,
    /// see ``CallObserver``); by default nowhere.
    public var logger: Logger

    public init(
        enableFlowControl: Bool = false, maximumMessageSize: Int = Frame.defaultMaximumMessageSize,
        flowController: (any FlowController)? = nil, timeout: Duration? = nil,
        logger: Logger = TransportConfiguration.disabledLogger
    ) {
        self.enableFlowControl = enableFlowControl
        self.maximumMessageSize = maximumMessageSize
        self.flowController = flowController
        self.timeout = timeout
        self.logger = logger
    }

    /// The policy these options select.
    public func makeFlowController() -> any FlowController {
        if let flowController { return flowController }
        return enableFlowControl ? ManualFlowController() : AutomaticFlowController()
    }
}
