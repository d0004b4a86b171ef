import Synchronization

/// What kind of network the device is on: the category of the interface that carries
/// the default route.
public struct ConnectivityCategory: Sendable, Hashable, CustomStringConvertible {
    private let name: String
    private init(_ name: String) { self.name = name }
    /// No default route: nothing can be reached.
    public static let none = ConnectivityCategory("none")
    /// A wireless LAN (sysfs `wireless`/`phy80211`, `DEVTYPE=wlan`, names `wlan*`/`wl*`).
    public static let wifi = ConnectivityCategory("wifi")
    /// A mobile network (`DEVTYPE=wwan`, names `wwan*`, `rmnet*`, `ccmni*`).
    public static let cellular = ConnectivityCategory("cellular")
    /// A wired network (names `eth*`/`en*`).
    public static let wired = ConnectivityCategory("wired")
    /// Anything else that carries a default route.
    public static let other = ConnectivityCategory("other")
    public var description: String { name }
}

/// The network path as a monitor sees it: the category and the interface that carries
/// the default route (nil for ``ConnectivityCategory/none``), and that interface's local
/// addresses.
///
/// Two paths of one category can still be two networks: Wi-Fi that moved to another
/// hotspot (the default route on another interface), or the same interface with a new
/// address. A `CallChannel` (SwitchyardCalls) tells them apart with ``PathChange``.
public struct ConnectivityPath: Sendable, Hashable, CustomStringConvertible {
    public var category: ConnectivityCategory
    public var interface: String?
    /// The local addresses of ``interface`` that connections over the default route can
    /// have as their source, as IP literals (`10.0.0.2`, `2001:db8::2`; IPv6 link-local
    /// addresses are left out). Empty when the monitor does not know them (a
    /// ``ManualConnectivityMonitor`` fed without them), and for
    /// ``ConnectivityCategory/none``. Not part of ``description``.
    public var addresses: Set<String>
    public init(category: ConnectivityCategory, interface: String? = nil, addresses: Set<String> = []) {
        self.category = category
        self.interface = interface
        self.addresses = addresses
    }
    public static let none = ConnectivityPath(category: .none)
    public var description: String { interface.map { "\(category) (\($0))" } ?? "\(category)" }
}

/// Reports the network path and every change to it.
///
/// ## Contract
/// - ``current`` answers at once, without waiting for an event.
/// - ``observe(_:)`` registers an observer that is called with each change (a new
///   path that differs from the previous one), in order, never concurrently with
///   itself, on a thread of the monitor's choosing; it returns a token whose
///   ``ConnectivityObservation/cancel()`` stops the calls.
/// - A burst of underlying events (netlink messages) is one change: implementations
///   debounce.
/// - What a change means to open calls is the business of SwitchyardCalls' `CallChannel` (the rule is
///   ``PathChange``): a category change ends them with `unavailable`, reason
///   `connectivity changed`; a change of interface, or an address of the path gone,
///   within one category ends those on the old path with `unavailable`, reason `path
///   changed`; new addresses alone end nothing.
///
/// Implementations: the Linux rtnetlink monitor (`SwitchyardNetlink`), the
/// ``ManualConnectivityMonitor`` (tests, and platforms that deliver their own events).
public protocol ConnectivityMonitor: AnyObject, Sendable {
    /// The path now.
    var current: ConnectivityPath { get }
    /// Calls `observer` with each change until the observation is cancelled.
    func observe(_ observer: @escaping @Sendable (ConnectivityPath) -> Void) -> ConnectivityObservation
}

extension ConnectivityMonitor {
    /// The changes as an async sequence (buffering the newest ones).
    public var changes: AsyncStream<ConnectivityPath> {
        AsyncStream { continuation in
            let observation = observe { continuation.yield($0) }
            continuation.onTermination = { _ in observation.cancel() }
        }
    }
}

/// A registration with a monitor; cancel it to stop the calls.
public final class ConnectivityObservation: Sendable {
    private let onCancel: Mutex<(@Sendable () -> Void)?>
    public init(onCancel: @escaping @Sendable () -> Void) { self.onCancel = Mutex(onCancel) }
    /// Stops the observer's calls. Idempotent.
    public func cancel() {
        let action = onCancel.withLock { action in
            defer { action = nil }
            return action
        }
        action?()
    }
}

/// Observers of a monitor, and delivery of changes to them in order. Monitors embed
/// one; it suppresses reports equal to the current path.
public final class ConnectivityObservers: Sendable {
    private struct State {
        var current: ConnectivityPath
        var observers: [UInt64: @Sendable (ConnectivityPath) -> Void] = [:]
        var nextID: UInt64 = 0
    }
    private let state: Mutex<State>
    /// Serializes delivery so observers see changes in order, one at a time.
    private let delivery = Mutex<Void>(())

    public init(initial: ConnectivityPath) {
        state = Mutex(State(current: initial))
    }

    public var current: ConnectivityPath { state.withLock { $0.current } }

    public func observe(_ observer: @escaping @Sendable (ConnectivityPath) -> Void) -> ConnectivityObservation {
        let id = state.withLock { state -> UInt64 in
            state.nextID += 1
            state.observers[state.nextID] = observer
            return state.nextID
        }
        return ConnectivityObservation { [weak self] in
            _ = self?.state.withLock { $0.observers.removeValue(forKey: id) }
        }
    }

    /// Makes `path` current and tells every observer, if it differs from the current one;
    /// `changed` runs first, with the path it replaced (the monitor's log line and metric,
    /// in the order the observers hear the changes). Returns whether it was a change.
    @discardableResult
    public func update(_ path: ConnectivityPath, changed: ((_ previous: ConnectivityPath) -> Void)? = nil) -> Bool {
        delivery.withLock { _ in
            let change: (previous: ConnectivityPath, observers: [@Sendable (ConnectivityPath) -> Void])? = state.withLock { state in
                guard state.current != path else { return nil }
                defer { state.current = path }
                // In the order they registered, so a replayed run calls them in the same one.
                return (state.current, state.observers.sorted { $0.key < $1.key }.map(\.value))
            }
            guard let change else { return false }
            changed?(change.previous)
            for observer in change.observers { observer(path) }
            return true
        }
    }
}
