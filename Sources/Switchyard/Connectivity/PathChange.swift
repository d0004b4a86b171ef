/// What a change of the network path means to the connections on it (behaviour 2 of the
/// design): the one rule a ``CallChannel`` follows when its ``ConnectivityMonitor`` reports.
///
/// Given the path reported before and the path reported now:
///
/// | old → new | ``kind`` | ``reason`` | ends |
/// | --- | --- | --- | --- |
/// | another category (`wifi` → `cellular`, to or from `none`) | ``Kind/category`` | connectivity changed | every connection |
/// | the same category over another interface (`wlan0` → `wlan1`) | ``Kind/path`` | path changed | connections from an address of the old path |
/// | the same interface, an address of it gone | ``Kind/path`` | path changed | connections from an address that went away |
/// | the same interface, addresses only added (or nothing new) | ``Kind/none`` | none | nothing |
///
/// Why a connection from the old interface ends even when that interface keeps its
/// address: once the default route moved, the connection's packets leave over the new
/// interface with the old source address, which the new network does not route back (a
/// hotspot's NAT, another subnet). The socket sees no error and stalls, for minutes with
/// data in flight and for ever while idle (`shared/TESTING.md`), so it is ended now,
/// without waiting for a stall timeout.
///
/// A path change (not a category change) spares a connection that is not on the old
/// path:
/// - from a loopback address (`127.0.0.0/8`, `::1`): it never leaves over an interface,
///   so a channel to a loopback target survives `wlan0` moving;
/// - of a Unix-domain socket (a path endpoint);
/// - from an address the old path does not list: one of another interface reached by a
///   route of its own (a LAN peer over `eth0` while the default route moves between Wi-Fi
///   links), or one of the new interface (a connection made after the route moved, before
///   the monitor's report).
///
/// When the old path lists no addresses (a monitor that does not know them), a change of
/// interface ends every connection but loopback and Unix-domain ones. Addresses are
/// compared as addresses, not as text: `::ffff:10.0.0.2` is `10.0.0.2`, and an IPv6 zone
/// is ignored.
///
/// A path change of another interface than the default route's (an address removed from
/// `eth0` while Wi-Fi carries the default route) is not seen: a path is the default
/// route's interface only.
public struct PathChange: Sendable, Hashable, CustomStringConvertible {
    /// What kind of change it is. An open set of values, as ``TransportError/Code`` is.
    public struct Kind: Sendable, Hashable, CustomStringConvertible {
        private enum Value: Sendable, Hashable { case none, category, path }
        private let value: Value
        private init(_ value: Value) { self.value = value }
        /// Nothing that ends a connection: the same path, or only new addresses on it.
        public static let none = Kind(.none)
        /// The category changed: every connection ends (`connectivity changed`).
        public static let category = Kind(.category)
        /// The same category over another interface, or an address of the path gone: the
        /// connections on the old path end (`path changed`).
        public static let path = Kind(.path)
        public var description: String {
            switch value {
            case .none: "none"
            case .category: "category"
            case .path: "path"
            }
        }
    }

    /// The path before the change.
    public let old: ConnectivityPath
    /// The path after it.
    public let new: ConnectivityPath
    /// What kind of change it is.
    public let kind: Kind
    /// The old path's addresses that the new path does not have (for a change of
    /// interface, usually all of them).
    public let removedAddresses: Set<String>

    private let oldKeys: Set<AddressKey>
    private let removedKeys: Set<AddressKey>

    /// Classifies the change from `old` to `new`.
    public init(from old: ConnectivityPath, to new: ConnectivityPath) {
        self.old = old
        self.new = new
        let newKeys = Set(new.addresses.map(AddressKey.init))
        var removed: Set<String> = []
        var removedKeys: Set<AddressKey> = []
        var oldKeys: Set<AddressKey> = []
        for address in old.addresses {
            let key = AddressKey(address)
            oldKeys.insert(key)
            if !newKeys.contains(key) {
                removed.insert(address)
                removedKeys.insert(key)
            }
        }
        self.oldKeys = oldKeys
        self.removedKeys = removedKeys
        removedAddresses = removed
        if old.category != new.category {
            kind = .category
        } else if old.category == .none {
            kind = .none
        } else if old.interface != new.interface || !removed.isEmpty {
            kind = .path
        } else {
            kind = .none
        }
    }

    /// Why the connections this change ends end: `connectivity changed` for a category
    /// change, `path changed` for a path change, nil when it ends nothing.
    public var reason: TransportError.Reason? {
        if kind == .category { return .connectivityChanged }
        if kind == .path { return .pathChanged }
        return nil
    }

    /// The error the connections this change ends get: `unavailable` with ``reason``;
    /// nil when it ends nothing.
    public var error: TransportError? {
        if kind == .category {
            return TransportError(
                code: .unavailable, reason: .connectivityChanged, message: "the network changed to \(new) under the call")
        }
        if kind == .path {
            var message = "the network path changed from \(old) to \(new) under the call"
            if old.interface == new.interface {
                message += ": its address \(removedAddresses.sorted().joined(separator: ", ")) went away"
            }
            return TransportError(code: .unavailable, reason: .pathChanged, message: message)
        }
        return nil
    }

    /// Whether this change ends a connection whose local address (``Connection/localAddress``)
    /// is `localAddress`: always for a category change; for a path change, when the
    /// connection is on the old path (see the type's rules); never for ``Kind/none``.
    public func ends(connectionFrom localAddress: Endpoint) -> Bool {
        if kind == .category { return true }
        guard kind == .path, localAddress.path == nil else { return false }
        let key = AddressKey(localAddress.host)
        if key.isLoopback { return false }
        if old.interface != new.interface {
            return oldKeys.isEmpty || oldKeys.contains(key)
        }
        return removedKeys.contains(key)
    }

    public var description: String {
        switch kind {
        case .category: "category change: \(old) → \(new)"
        case .path where old.interface == new.interface:
            "path change: \(old) lost \(removedAddresses.sorted().joined(separator: ", "))"
        case .path: "path change: \(old) → \(new)"
        default: "no change that ends connections: \(old) → \(new)"
        }
    }

    public static func == (a: PathChange, b: PathChange) -> Bool { a.old == b.old && a.new == b.new }
    public func hash(into hasher: inout Hasher) {
        hasher.combine(old)
        hasher.combine(new)
    }
}

/// An address as bytes (IPv4-mapped IPv6 as IPv4, without a zone), or as text when it is
/// not an IP literal.
private enum AddressKey: Hashable, Sendable {
    case bytes([UInt8])
    case text(String)

    init(_ host: String) {
        if let v4 = IPAddress.parseIPv4(host) {
            self = .bytes(v4)
        } else if let v6 = IPAddress.parseIPv6(host)?.bytes {
            let mapped = v6[0..<10].allSatisfy { $0 == 0 } && v6[10] == 0xff && v6[11] == 0xff
            self = .bytes(mapped ? Array(v6[12..<16]) : v6)
        } else {
            self = .text(host)
        }
    }

    /// `127.0.0.0/8` or `::1`.
    var isLoopback: Bool {
        guard case .bytes(let bytes) = self else { return false }
        if bytes.count == 4 { return bytes[0] == 127 }
        return bytes == Array(repeating: 0, count: 15) + [1]
    }
}
