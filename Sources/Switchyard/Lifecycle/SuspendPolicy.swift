/// What a ``Lifecycle`` does to a registered connection when the process suspends.
///
/// A struct, not an enum: more policies may be added without breaking a `switch`.
public struct SuspendPolicy: Sendable, Hashable, CustomStringConvertible {
    private enum Value: UInt8, Sendable, Hashable { case close, keep }
    private let value: Value
    private init(_ value: Value) { self.value = value }

    /// Closed once the suspend's background work has ended (or its grace period ran
    /// out), without waiting on the network: queued writes complete with
    /// `cancelled`/`closed`, the handler hears `connectionDidClose(error: nil)`, and the
    /// registration ends. Whoever needs the peer again connects afresh after resume.
    public static let close = SuspendPolicy(.close)
    /// Kept open across the suspension. The lifecycle does not touch the connection; it
    /// calls the registration's `willSuspend` hook when the suspend begins and its
    /// `didResume` hook when the resume ends, so the protocol above can go quiet (stop
    /// reading, stop sending, tell its peer) and come back.
    public static let keep = SuspendPolicy(.keep)

    /// Whether this is ``close``.
    package var closes: Bool { value == .close }

    public var description: String {
        switch value {
        case .close: "close"
        case .keep: "keep"
        }
    }
}

/// The phases of a ``Lifecycle``.
public struct LifecycleState: Sendable, Hashable, CustomStringConvertible {
    private enum Value: UInt8, Sendable, Hashable { case active, suspending, suspended, resuming }
    private let value: Value
    private init(_ value: Value) { self.value = value }

    /// Running: listeners accept, channels make calls. The initial state.
    public static let active = LifecycleState(.active)
    /// ``Lifecycle/suspend()`` is under way: listeners are closed, background work is
    /// finishing within the grace period; channels still make calls.
    public static let suspending = LifecycleState(.suspending)
    /// Suspended: listeners closed, `.close` connections closed, channels refuse calls.
    public static let suspended = LifecycleState(.suspended)
    /// ``Lifecycle/resume()`` is under way: listeners are reopening.
    public static let resuming = LifecycleState(.resuming)

    public var description: String {
        switch value {
        case .active: "active"
        case .suspending: "suspending"
        case .suspended: "suspended"
        case .resuming: "resuming"
        }
    }
}
