import Switchyard
import SwitchyardNetlink

/// The part of the Linux kernel the state machine listens to, with the behaviour measured
/// here: taking a link down flushes its IPv4 routes silently and its IPv6 routes with
/// `RTM_DELROUTE`; losing the carrier keeps the routes; deleting a link deletes its
/// routes. Each change returns the notifications the kernel would send.
struct FakeKernel {
    private(set) var interfaces: [Int32: NetworkInterface] = [:]
    private(set) var routes: [DefaultRoute] = []
    private(set) var addresses: [InterfaceAddress] = []

    var snapshot: NetworkSnapshot {
        NetworkSnapshot(interfaces: interfaces.values.sorted { $0.index < $1.index }, addresses: addresses, defaultRoutes: routes)
    }

    mutating func addAddress(_ address: InterfaceAddress) -> [NetworkEvent] {
        addresses.append(address)
        return [.addressAdded(address)]
    }

    /// `ip addr del`: when it was the interface's last IPv4 address, the kernel flushes
    /// the interface's IPv4 routes without a notification (as for a link taken down).
    mutating func removeAddress(_ address: InterfaceAddress) -> [NetworkEvent] {
        guard addresses.contains(address) else { return [] }
        addresses.removeAll { $0 == address }
        if address.family == .ipv4, !addresses.contains(where: { $0.interfaceIndex == address.interfaceIndex && $0.family == .ipv4 }) {
            routes.removeAll { $0.interfaceIndex == address.interfaceIndex && $0.family == .ipv4 }
        }
        return [.addressRemoved(address)]
    }

    mutating func addLink(_ index: Int32, _ name: String) -> [NetworkEvent] {
        interfaces[index] = NetworkInterface(index: index, name: name)
        return [.interfaceChanged(interfaces[index]!)]
    }

    mutating func setLink(_ index: Int32, up: Bool) -> [NetworkEvent] {
        guard var interface = interfaces[index] else { return [] }
        interface.isUp = up
        interface.hasCarrier = up
        interfaces[index] = interface
        var events: [NetworkEvent] = [.interfaceChanged(interface)]
        if !up {
            let flushed = routes.filter { $0.interfaceIndex == index }
            routes.removeAll { $0.interfaceIndex == index }
            events += flushed.filter { $0.family == .ipv6 }.map { .defaultRouteRemoved($0) }
        }
        return events
    }

    mutating func setCarrier(_ index: Int32, _ carrier: Bool) -> [NetworkEvent] {
        guard var interface = interfaces[index] else { return [] }
        interface.hasCarrier = carrier
        interfaces[index] = interface
        return [.interfaceChanged(interface)]
    }

    mutating func deleteLink(_ index: Int32) -> [NetworkEvent] {
        interfaces[index] = nil
        addresses.removeAll { $0.interfaceIndex == index }
        routes.removeAll { $0.interfaceIndex == index }
        return [.interfaceRemoved(index: index)]
    }

    mutating func addRoute(_ route: DefaultRoute) -> [NetworkEvent] {
        routes.append(route)
        return [.defaultRouteAdded(route)]
    }

    /// `ip route replace default ...`: one RTM_NEWROUTE with NLM_F_REPLACE, no DELROUTE.
    mutating func replaceRoute(_ route: DefaultRoute) -> [NetworkEvent] {
        routes.removeAll { $0.family == route.family && $0.metric == route.metric }
        routes.append(route)
        return [.defaultRouteReplaced(route)]
    }

    mutating func deleteRoute(_ route: DefaultRoute) -> [NetworkEvent] {
        routes.removeAll { $0 == route }
        return [.defaultRouteRemoved(route)]
    }
}

/// Drives a state machine the way the monitor's thread does, against a manual clock:
/// one timer, resynchronizations answered from a ``FakeKernel``, reports recorded.
struct Harness {
    var machine: ConnectivityStateMachine
    var kernel: FakeKernel
    private(set) var now: Duration = .zero
    private(set) var deadline: Duration?
    private(set) var reports: [(at: Duration, path: ConnectivityPath)] = []
    private(set) var resynchronizations = 0
    /// When set, the next resynchronization fails.
    var failNextResynchronization = false

    init(
        kernel: FakeKernel, debounce: Duration = .milliseconds(50), maximumDelay: Duration = .milliseconds(500),
        classify: @escaping @Sendable (String) -> ConnectivityCategory = { InterfaceClassifier.category(name: $0) }
    ) {
        self.kernel = kernel
        machine = ConnectivityStateMachine(
            configuration: .init(debounce: debounce, maximumDelay: maximumDelay), classify: classify)
        _ = machine.load(kernel.snapshot)
    }

    var reported: ConnectivityPath { machine.reported }
    var paths: [ConnectivityPath] { reports.map(\.path) }

    /// Moves the clock to `time`, firing the timer on the way if it is due.
    mutating func advance(to time: Duration) {
        precondition(time >= now, "time goes forward")
        while let due = deadline, due <= time {
            now = due
            deadline = nil
            perform(machine.timerFired(at: now))
        }
        now = time
    }

    mutating func advance(by duration: Duration) { advance(to: now + duration) }

    /// Applies a kernel change at `time` and delivers its notifications.
    mutating func at(_ time: Duration, _ change: (inout FakeKernel) -> [NetworkEvent]) {
        advance(to: time)
        for event in change(&kernel) { perform(machine.receive(event, at: now)) }
    }

    /// Lets the tables settle: runs the clock well past any pending timer.
    mutating func settle() { advance(by: .seconds(5)) }

    private mutating func perform(_ action: ConnectivityStateMachine.Action) {
        switch action {
        case .none:
            break
        case .armTimer(let deadline):
            self.deadline = deadline
        case .resynchronize:
            resynchronizations += 1
            if failNextResynchronization {
                failNextResynchronization = false
                perform(machine.resynchronizationFailed(at: now))
            } else {
                perform(machine.resynchronized(kernel.snapshot, at: now))
            }
        case .report(let path):
            reports.append((now, path))
        }
    }
}

extension DefaultRoute {
    static func v4(_ index: Int32, metric: UInt32 = 0, via gateway: [UInt8] = [10, 0, 0, 1]) -> DefaultRoute {
        DefaultRoute(family: .ipv4, interfaceIndex: index, metric: metric, gateway: gateway)
    }
    static func v6(_ index: Int32, metric: UInt32 = 1024) -> DefaultRoute {
        DefaultRoute(family: .ipv6, interfaceIndex: index, metric: metric, gateway: [0xfe, 0x80] + Array(repeating: 0, count: 13) + [1])
    }
}

/// Interface indices used by the tests.
enum Link {
    static let wlan: Int32 = 3
    static let wwan: Int32 = 4
    static let eth: Int32 = 2
    static let wlan1: Int32 = 5
}

extension InterfaceAddress {
    static func v4(_ index: Int32, _ bytes: [UInt8], prefix: UInt8 = 24) -> InterfaceAddress {
        InterfaceAddress(interfaceIndex: index, family: .ipv4, bytes: bytes, prefixLength: prefix)
    }
    static func v6(_ index: Int32, _ bytes: [UInt8], prefix: UInt8 = 64) -> InterfaceAddress {
        InterfaceAddress(interfaceIndex: index, family: .ipv6, bytes: bytes, prefixLength: prefix)
    }
}

extension FakeKernel {
    /// lo, eth0, wlan0 and wwan0, all up, no routes.
    static var laptop: FakeKernel {
        var kernel = FakeKernel()
        _ = kernel.addLink(1, "lo")
        _ = kernel.addLink(Link.eth, "eth0")
        _ = kernel.addLink(Link.wlan, "wlan0")
        _ = kernel.addLink(Link.wwan, "wwan0")
        return kernel
    }
}
