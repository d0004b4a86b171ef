import Switchyard
import SwitchyardNetlink
import Testing

/// Path changes within one category: the state machine reports the
/// default route's move to another interface and an address of the path gone, debounced
/// like any other change, and ``PathChange`` reads them as path changes.
@Suite("The connectivity state machine reports path changes within one category")
struct ConnectivityStateMachinePathTests {
    static let wlan0Address = InterfaceAddress.v4(Link.wlan, [10, 1, 0, 5])
    static let wlan0Renewed = InterfaceAddress.v4(Link.wlan, [10, 1, 0, 6])
    static let wlan0Global6 = InterfaceAddress.v6(Link.wlan, [0x20, 0x01, 0x0d, 0xb8, 0, 1] + Array(repeating: 0, count: 9) + [5])
    static let wlan0LinkLocal = InterfaceAddress.v6(Link.wlan, [0xfe, 0x80] + Array(repeating: 0, count: 13) + [5])
    static let wlan1Address = InterfaceAddress.v4(Link.wlan1, [10, 2, 0, 7])

    /// lo, eth0, wlan0 (10.1.0.5, 2001:db8:1::5, fe80::5), wwan0, wlan1 (10.2.0.7); the
    /// default route on wlan0.
    static var twoWifiLinks: FakeKernel {
        var kernel = FakeKernel.laptop
        _ = kernel.addLink(Link.wlan1, "wlan1")
        for address in [wlan0Address, wlan0Global6, wlan0LinkLocal, wlan1Address] { _ = kernel.addAddress(address) }
        _ = kernel.addRoute(.v4(Link.wlan, via: [10, 1, 0, 1]))
        return kernel
    }

    let wlan0 = ConnectivityPath(category: .wifi, interface: "wlan0", addresses: ["10.1.0.5", "2001:db8:1::5"])
    let wlan1 = ConnectivityPath(category: .wifi, interface: "wlan1", addresses: ["10.2.0.7"])

    @Test("The path lists the default interface's addresses, without IPv6 link-local ones")
    func initialAddresses() {
        var machine = ConnectivityStateMachine(classify: { InterfaceClassifier.category(name: $0) })
        #expect(machine.load(Self.twoWifiLinks.snapshot) == wlan0)
    }

    @Test("Moving the default route from wlan0 to wlan1 is one reported path change, 50 ms after the burst")
    func interfaceMove() {
        var harness = Harness(kernel: Self.twoWifiLinks)
        harness.at(.milliseconds(100)) { $0.replaceRoute(.v4(Link.wlan1, via: [10, 2, 0, 1])) }
        harness.settle()
        #expect(harness.paths == [wlan1])
        #expect(harness.reports.first?.at == .milliseconds(150))
        let change = PathChange(from: wlan0, to: harness.paths[0])
        #expect(change.kind == .path)
        #expect(change.ends(connectionFrom: Endpoint(host: "10.1.0.5", port: 5000)))
        #expect(!change.ends(connectionFrom: Endpoint(host: "10.2.0.7", port: 5000)))
    }

    @Test("An address of the default interface removed (the route stays) is a path change, after a re-read of the tables")
    func addressRemoved() {
        var kernel = Self.twoWifiLinks
        _ = kernel.addAddress(Self.wlan0Renewed)
        var harness = Harness(kernel: kernel)
        let before = harness.reported
        #expect(before.addresses == ["10.1.0.5", "10.1.0.6", "2001:db8:1::5"])
        harness.at(.milliseconds(10)) { $0.removeAddress(Self.wlan0Address) }
        harness.advance(by: .milliseconds(49))
        #expect(harness.paths.isEmpty, "not before the debounce ends")
        harness.advance(by: .milliseconds(1))
        let renewed = ConnectivityPath(category: .wifi, interface: "wlan0", addresses: ["10.1.0.6", "2001:db8:1::5"])
        #expect(harness.paths == [renewed])
        #expect(harness.resynchronizations == 1)
        let change = PathChange(from: before, to: renewed)
        #expect(change.kind == .path)
        #expect(change.removedAddresses == ["10.1.0.5"])
    }

    @Test("wlan0's last IPv4 address removed flushes its route: the path moves to wlan1's default route, a path change")
    func lastAddressRemovedMovesToBackupRoute() {
        var kernel = Self.twoWifiLinks
        _ = kernel.addRoute(.v4(Link.wlan1, metric: 200, via: [10, 2, 0, 1]))
        var harness = Harness(kernel: kernel)
        #expect(harness.reported == wlan0)
        harness.at(.milliseconds(10)) { $0.removeAddress(Self.wlan0Address) }
        harness.settle()
        #expect(harness.paths == [wlan1])
        #expect(PathChange(from: wlan0, to: wlan1).kind == .path)
    }

    @Test("An address added to the default interface is reported, and ends nothing")
    func addressAdded() {
        var harness = Harness(kernel: Self.twoWifiLinks)
        harness.at(.milliseconds(10)) { $0.addAddress(Self.wlan0Renewed) }
        harness.settle()
        var more = wlan0
        more.addresses.insert("10.1.0.6")
        #expect(harness.paths == [more])
        #expect(PathChange(from: wlan0, to: more).kind == .none)
    }

    @Test("Addresses added to or removed from another interface, or a link-local one, are no change")
    func otherInterfaces() {
        var harness = Harness(kernel: Self.twoWifiLinks)
        harness.at(.milliseconds(10)) { $0.addAddress(.v4(Link.wlan1, [10, 2, 0, 8])) }
        harness.at(.milliseconds(20)) { $0.removeAddress(Self.wlan1Address) }
        harness.at(.milliseconds(30)) { $0.removeAddress(Self.wlan0LinkLocal) }
        harness.settle()
        #expect(harness.paths.isEmpty, "\(harness.paths)")
        #expect(harness.reported == wlan0)
    }

    @Test("A route move and an address removal in one burst are one reported change")
    func oneBurst() {
        var harness = Harness(kernel: Self.twoWifiLinks)
        harness.at(.milliseconds(100)) { $0.replaceRoute(.v4(Link.wlan1, via: [10, 2, 0, 1])) }
        harness.at(.milliseconds(101)) { $0.removeAddress(Self.wlan0Address) }
        harness.settle()
        #expect(harness.paths == [wlan1])
    }
}
