import Switchyard

/// A network interface as rtnetlink describes it (`RTM_NEWLINK`).
public struct NetworkInterface: Sendable, Hashable {
    /// The kernel's interface index (`ifi_index`).
    public var index: Int32
    /// The interface name (`IFLA_IFNAME`); empty when a message did not carry it, in
    /// which case the name already known for `index` is kept.
    public var name: String
    /// Administratively up (`IFF_UP`).
    public var isUp: Bool
    /// Has a carrier and is operationally up (`IFF_LOWER_UP` and `IFF_RUNNING`).
    public var hasCarrier: Bool

    public init(index: Int32, name: String, isUp: Bool = true, hasCarrier: Bool = true) {
        self.index = index
        self.name = name
        self.isUp = isUp
        self.hasCarrier = hasCarrier
    }

    /// Whether a default route over this interface counts: up and with a carrier.
    public var isUsable: Bool { isUp && hasCarrier }
}

/// An IP family.
public enum AddressFamily: Sendable, Hashable {
    case ipv4, ipv6
}

/// An address of an interface (`RTM_NEWADDR`, `RTM_DELADDR`).
public struct InterfaceAddress: Sendable, Hashable {
    public var interfaceIndex: Int32
    public var family: AddressFamily
    /// The address bytes, network order (4 or 16 of them).
    public var bytes: [UInt8]
    public var prefixLength: UInt8

    public init(interfaceIndex: Int32, family: AddressFamily, bytes: [UInt8], prefixLength: UInt8) {
        self.interfaceIndex = interfaceIndex
        self.family = family
        self.bytes = bytes
        self.prefixLength = prefixLength
    }
}

/// A default route (destination prefix length 0, unicast) of the main table, over one
/// interface. A multipath route is one `DefaultRoute` per next hop.
public struct DefaultRoute: Sendable, Hashable {
    public var family: AddressFamily
    /// The output interface (`RTA_OIF`, or the next hop's `rtnh_ifindex`).
    public var interfaceIndex: Int32
    /// The metric (`RTA_PRIORITY`; the kernel's default is 0 for IPv4, 1024 for IPv6).
    public var metric: UInt32
    /// The gateway's bytes (`RTA_GATEWAY`), empty for a route without one. Part of the
    /// identity: two default routes that differ only in gateway are two routes.
    public var gateway: [UInt8]

    public init(family: AddressFamily, interfaceIndex: Int32, metric: UInt32 = 0, gateway: [UInt8] = []) {
        self.family = family
        self.interfaceIndex = interfaceIndex
        self.metric = metric
        self.gateway = gateway
    }
}

/// A complete reading of the kernel's tables: the answer to a dump of links, addresses
/// and routes.
public struct NetworkSnapshot: Sendable, Hashable {
    public var interfaces: [NetworkInterface]
    public var addresses: [InterfaceAddress]
    public var defaultRoutes: [DefaultRoute]

    public init(interfaces: [NetworkInterface] = [], addresses: [InterfaceAddress] = [], defaultRoutes: [DefaultRoute] = []) {
        self.interfaces = interfaces
        self.addresses = addresses
        self.defaultRoutes = defaultRoutes
    }
}

/// One rtnetlink notification, reduced to what the connectivity category depends on.
public enum NetworkEvent: Sendable, Hashable {
    /// `RTM_NEWLINK`: an interface appeared or changed.
    case interfaceChanged(NetworkInterface)
    /// `RTM_DELLINK`: an interface is gone (deleted, or moved to another namespace),
    /// and with it its addresses and routes.
    case interfaceRemoved(index: Int32)
    /// `RTM_NEWADDR`.
    case addressAdded(InterfaceAddress)
    /// `RTM_DELADDR`.
    case addressRemoved(InterfaceAddress)
    /// `RTM_NEWROUTE` of a default route in the main table.
    case defaultRouteAdded(DefaultRoute)
    /// `RTM_NEWROUTE` with `NLM_F_REPLACE` (`ip route replace`): the route takes the place
    /// of the default route of the same family and metric, whose removal the kernel does
    /// not announce.
    case defaultRouteReplaced(DefaultRoute)
    /// `RTM_DELROUTE` of a default route in the main table.
    case defaultRouteRemoved(DefaultRoute)
    /// Notifications were lost (the socket reported `ENOBUFS`): the tables must be read
    /// again.
    case overrun
}

/// The tables a monitor keeps: interfaces, their addresses, the default routes.
struct NetworkTables: Sendable, Hashable {
    /// What applying an event did to the tables.
    enum Change: Equatable {
        /// Nothing that the path depends on.
        case none
        /// The tables changed.
        case changed
        /// The tables changed, or may have, in a way the kernel does not fully announce:
        /// read them again before trusting them. (Taking a link down or removing an
        /// address flushes the IPv4 routes over it without any `RTM_DELROUTE`; measured
        /// with `ip monitor route` on this project's kernel.)
        case needsResynchronization
    }

    var interfaces: [Int32: NetworkInterface] = [:]
    var addresses: [Int32: Set<InterfaceAddress>] = [:]
    var defaultRoutes: Set<DefaultRoute> = []

    init() {}

    init(_ snapshot: NetworkSnapshot) {
        for interface in snapshot.interfaces { interfaces[interface.index] = interface }
        for address in snapshot.addresses { addresses[address.interfaceIndex, default: []].insert(address) }
        defaultRoutes = Set(snapshot.defaultRoutes)
    }

    mutating func apply(_ event: NetworkEvent) -> Change {
        switch event {
        case .interfaceChanged(var interface):
            let old = interfaces[interface.index]
            if interface.name.isEmpty { interface.name = old?.name ?? "" }
            guard old != interface else { return .none }
            interfaces[interface.index] = interface
            if let old, old.isUsable, !interface.isUsable { return .needsResynchronization }
            return .changed
        case .interfaceRemoved(let index):
            let hadInterface = interfaces.removeValue(forKey: index) != nil
            addresses.removeValue(forKey: index)
            let routeCount = defaultRoutes.count
            defaultRoutes = defaultRoutes.filter { $0.interfaceIndex != index }
            return hadInterface || routeCount != defaultRoutes.count ? .changed : .none
        case .addressAdded(let address):
            // A new address changes no default route by itself, but it is part of the
            // path when its interface carries a default route.
            let inserted = addresses[address.interfaceIndex, default: []].insert(address).inserted
            let routed = defaultRoutes.contains { $0.interfaceIndex == address.interfaceIndex }
            return inserted && routed ? .changed : .none
        case .addressRemoved(let address):
            guard addresses[address.interfaceIndex]?.remove(address) != nil else { return .none }
            return .needsResynchronization
        case .defaultRouteAdded(let route):
            return defaultRoutes.insert(route).inserted ? .changed : .none
        case .defaultRouteReplaced(let route):
            let before = defaultRoutes
            defaultRoutes = defaultRoutes.filter { $0.family != route.family || $0.metric != route.metric }
            defaultRoutes.insert(route)
            return before != defaultRoutes ? .changed : .none
        case .defaultRouteRemoved(let route):
            return defaultRoutes.remove(route) != nil ? .changed : .none
        case .overrun:
            return .needsResynchronization
        }
    }

    /// The path the tables describe: the interface of the usable default route with the
    /// lowest metric (ties: IPv4 first, then the lower interface index), classified, with
    /// its addresses (IPv6 link-local ones left out: a connection over the default route
    /// never has one as its source).
    func path(classify: (String) -> ConnectivityCategory) -> ConnectivityPath {
        var best: (route: DefaultRoute, interface: NetworkInterface)?
        for route in defaultRoutes {
            guard let interface = interfaces[route.interfaceIndex], interface.isUsable else { continue }
            if let current = best, !Self.precedes(route, current.route) { continue }
            best = (route, interface)
        }
        guard let best else { return .none }
        var local: Set<String> = []
        for address in addresses[best.interface.index] ?? [] {
            if let text = address.pathAddress { local.insert(text) }
        }
        return ConnectivityPath(category: classify(best.interface.name), interface: best.interface.name, addresses: local)
    }

    private static func precedes(_ a: DefaultRoute, _ b: DefaultRoute) -> Bool {
        if a.metric != b.metric { return a.metric < b.metric }
        if a.family != b.family { return a.family == .ipv4 }
        if a.interfaceIndex != b.interfaceIndex { return a.interfaceIndex < b.interfaceIndex }
        return a.gateway.lexicographicallyPrecedes(b.gateway)
    }
}

extension InterfaceAddress {
    /// The address as a path lists it (an IP literal, as ``Endpoint/host`` is written),
    /// or nil for an IPv6 link-local address (`fe80::/10`) or malformed bytes.
    var pathAddress: String? {
        switch family {
        case .ipv4:
            return bytes.count == 4 ? IPAddress.formatIPv4(bytes) : nil
        case .ipv6:
            guard bytes.count == 16, !(bytes[0] == 0xfe && bytes[1] & 0xc0 == 0x80) else { return nil }
            return IPAddress.formatIPv6(bytes)
        }
    }
}
