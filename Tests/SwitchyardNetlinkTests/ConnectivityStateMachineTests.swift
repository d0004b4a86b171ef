import Switchyard
import SwitchyardNetlink
import Testing

@Suite("The connectivity state machine, against a manual clock")
struct ConnectivityStateMachineTests {
    let wifi = ConnectivityPath(category: .wifi, interface: "wlan0")
    let cellular = ConnectivityPath(category: .cellular, interface: "wwan0")
    let wired = ConnectivityPath(category: .wired, interface: "eth0")

    @Test("A default route on wlan0 is wifi, at once")
    func initialWifi() {
        var kernel = FakeKernel.laptop
        _ = kernel.addRoute(.v4(Link.wlan))
        var machine = ConnectivityStateMachine(classify: { InterfaceClassifier.category(name: $0) })
        #expect(machine.load(kernel.snapshot) == wifi)
        #expect(machine.reported == wifi)
    }

    @Test("No default route is none")
    func initialNone() {
        var machine = ConnectivityStateMachine(classify: { InterfaceClassifier.category(name: $0) })
        #expect(machine.load(FakeKernel.laptop.snapshot) == .none)
    }

    @Test("Moving the default route to wwan0 is cellular, 50 ms after the burst")
    func moveToCellular() {
        var kernel = FakeKernel.laptop
        _ = kernel.addRoute(.v4(Link.wlan))
        var harness = Harness(kernel: kernel)
        harness.at(.milliseconds(100)) { $0.replaceRoute(.v4(Link.wwan)) }
        harness.at(.milliseconds(101)) { $0.setLink(Link.wlan, up: false) }
        harness.settle()
        #expect(harness.paths == [cellular])
        #expect(harness.reports.first?.at == .milliseconds(151))
    }

    @Test("Adding a second default route then deleting the first moves the path")
    func addThenDelete() {
        var kernel = FakeKernel.laptop
        _ = kernel.addRoute(.v4(Link.wlan))
        var harness = Harness(kernel: kernel)
        harness.at(.milliseconds(10)) { $0.addRoute(.v4(Link.wwan, metric: 10)) }
        harness.at(.milliseconds(11)) { $0.deleteRoute(.v4(Link.wlan)) }
        harness.settle()
        #expect(harness.paths == [cellular])
    }

    @Test("Removing the default route is none")
    func removedIsNone() {
        var kernel = FakeKernel.laptop
        _ = kernel.addRoute(.v4(Link.wwan))
        var harness = Harness(kernel: kernel)
        harness.at(.milliseconds(5)) { $0.deleteRoute(.v4(Link.wwan)) }
        harness.advance(by: .milliseconds(49))
        #expect(harness.paths.isEmpty, "not before the debounce ends")
        harness.advance(by: .milliseconds(1))
        #expect(harness.paths == [.none])
    }

    @Test("Taking the default route's link down is none, though IPv4 routes vanish silently")
    func linkDownIsNone() {
        var kernel = FakeKernel.laptop
        _ = kernel.addRoute(.v4(Link.wlan))
        var harness = Harness(kernel: kernel)
        harness.at(.milliseconds(5)) { $0.setLink(Link.wlan, up: false) }
        harness.settle()
        #expect(harness.paths == [.none])
        #expect(harness.resynchronizations == 1)
        // Up again: the kernel flushed the route, so still none (a machine that trusted
        // only notifications would say wifi here).
        harness.at(.seconds(6)) { $0.setLink(Link.wlan, up: true) }
        harness.settle()
        #expect(harness.paths == [.none])
        #expect(harness.reported == .none)
    }

    @Test("Losing the carrier is none; the route stays, so the carrier's return is wifi again")
    func carrier() {
        var kernel = FakeKernel.laptop
        _ = kernel.addRoute(.v4(Link.wlan))
        var harness = Harness(kernel: kernel)
        harness.at(.milliseconds(5)) { $0.setCarrier(Link.wlan, false) }
        harness.settle()
        harness.at(.seconds(6)) { $0.setCarrier(Link.wlan, true) }
        harness.settle()
        #expect(harness.paths == [.none, wifi])
    }

    @Test("Deleting the default route's link is none")
    func linkDeleted() {
        var kernel = FakeKernel.laptop
        _ = kernel.addRoute(.v4(Link.wwan))
        var harness = Harness(kernel: kernel)
        harness.at(.milliseconds(5)) { $0.deleteLink(Link.wwan) }
        harness.settle()
        #expect(harness.paths == [.none])
    }

    @Test("A link down on another interface changes nothing")
    func otherLinkDown() {
        var kernel = FakeKernel.laptop
        _ = kernel.addRoute(.v4(Link.wlan))
        var harness = Harness(kernel: kernel)
        harness.at(.milliseconds(5)) { $0.setLink(Link.eth, up: false) }
        harness.settle()
        #expect(harness.paths.isEmpty)
        #expect(harness.reported == wifi)
    }

    @Test("Of several default routes the lowest metric wins, whatever the order")
    func lowestMetric() {
        var kernel = FakeKernel.laptop
        _ = kernel.addRoute(.v4(Link.wwan, metric: 700))
        _ = kernel.addRoute(.v4(Link.eth, metric: 100))
        _ = kernel.addRoute(.v4(Link.wlan, metric: 600))
        var harness = Harness(kernel: kernel)
        #expect(harness.reported == wired)
        harness.at(.milliseconds(1)) { $0.deleteRoute(.v4(Link.eth, metric: 100)) }
        harness.settle()
        #expect(harness.paths == [wifi])
        harness.at(.seconds(6)) { $0.addRoute(.v6(Link.wwan, metric: 50)) }
        harness.settle()
        #expect(harness.paths == [wifi, cellular])
    }

    @Test("A lower metric on a link that is down does not count")
    func lowestMetricMustBeUsable() {
        var kernel = FakeKernel.laptop
        _ = kernel.addRoute(.v4(Link.wlan, metric: 600))
        _ = kernel.addRoute(.v6(Link.wwan, metric: 10))
        _ = kernel.setCarrier(Link.wwan, false)
        let harness = Harness(kernel: kernel)
        #expect(harness.reported == wifi)
    }

    @Test("An IPv6 default route alone counts")
    func ipv6() {
        var harness = Harness(kernel: .laptop)
        harness.at(.milliseconds(1)) { $0.addRoute(.v6(Link.wlan)) }
        harness.settle()
        #expect(harness.paths == [wifi])
        // Link down: the IPv6 route's removal is announced.
        harness.at(.seconds(6)) { $0.setLink(Link.wlan, up: false) }
        harness.settle()
        #expect(harness.paths == [wifi, .none])
    }

    @Test("A burst within the debounce window is one change")
    func burstIsOneChange() {
        var kernel = FakeKernel.laptop
        _ = kernel.addRoute(.v4(Link.wlan))
        var harness = Harness(kernel: kernel)
        // wlan0 → eth0 → wwan0, 20 ms apart: one report, of the end state.
        harness.at(.milliseconds(0)) { $0.replaceRoute(.v4(Link.eth)) }
        harness.at(.milliseconds(20)) { $0.replaceRoute(.v4(Link.wwan)) }
        harness.at(.milliseconds(40)) { $0.addLink(9, "eth1") }
        harness.settle()
        #expect(harness.paths == [cellular])
        #expect(harness.reports.first?.at == .milliseconds(90))
    }

    @Test("A burst that ends where it began reports nothing")
    func burstBackToStart() {
        var kernel = FakeKernel.laptop
        _ = kernel.addRoute(.v4(Link.wlan))
        var harness = Harness(kernel: kernel)
        harness.at(.milliseconds(0)) { $0.replaceRoute(.v4(Link.wwan)) }
        harness.at(.milliseconds(10)) { $0.replaceRoute(.v4(Link.wlan)) }
        harness.settle()
        #expect(harness.paths.isEmpty)
    }

    /// Ten toggles of the default route's link within 50 ms, spaced in different ways.
    @Test(
        "10 link toggles in 50 ms are at most two changes",
        arguments: [
            [Int](repeating: 5, count: 9),  // evenly
            [Int](repeating: 0, count: 9),  // all at once
            [Int](repeating: 0, count: 8) + [49],  // one long gap at the end
            [49] + [Int](repeating: 0, count: 8),  // one long gap at the start
            [1, 12, 2, 9, 3, 11, 4, 5, 3],
        ])
    func flap(gaps: [Int]) {
        var kernel = FakeKernel.laptop
        _ = kernel.addRoute(.v6(Link.wlan))
        _ = kernel.addRoute(.v4(Link.wwan, metric: 2000))
        var harness = Harness(kernel: kernel)
        #expect(harness.reported == wifi)
        var time = 1000
        for toggle in 0..<10 {
            if toggle > 0 { time += gaps[toggle - 1] }
            // Even toggles take wlan0 down, odd ones bring it up (and its route back).
            harness.at(.milliseconds(time)) { kernel in
                toggle.isMultiple(of: 2)
                    ? kernel.setLink(Link.wlan, up: false)
                    : kernel.setLink(Link.wlan, up: true) + kernel.addRoute(.v6(Link.wlan))
            }
        }
        harness.settle()
        #expect(harness.reports.count <= 2, "reports: \(harness.paths)")
        #expect(harness.reported == wifi, "ten toggles end where they began")
    }

    @Test("Ten toggles that leave the link down are one change, to the other route")
    func flapEndingDown() {
        var kernel = FakeKernel.laptop
        _ = kernel.addRoute(.v4(Link.wlan, metric: 100))
        _ = kernel.addRoute(.v4(Link.wwan, metric: 2000))
        var harness = Harness(kernel: kernel)
        for toggle in 0..<10 {
            // up, down, up, ... ends down: the IPv4 route is flushed on the first down.
            harness.at(.milliseconds(5 * toggle)) { $0.setLink(Link.wlan, up: !toggle.isMultiple(of: 2)) }
        }
        harness.at(.milliseconds(46)) { $0.setLink(Link.wlan, up: false) }
        harness.settle()
        #expect(harness.paths == [cellular])
    }

    @Test("A link that never stops flapping is still reported every maximum delay")
    func maximumDelay() {
        var kernel = FakeKernel.laptop
        _ = kernel.addRoute(.v4(Link.wlan))
        var harness = Harness(kernel: kernel, debounce: .milliseconds(50), maximumDelay: .milliseconds(200))
        // The carrier flaps every 10 ms for a second and ends off.
        for step in 0...100 {
            harness.at(.milliseconds(10 * step)) { $0.setCarrier(Link.wlan, !step.isMultiple(of: 2)) }
        }
        harness.settle()
        // The burst is evaluated (tables read again: the carrier went away) every 200 ms
        // while it lasts, not only once it ends: at 200, 400, 600, 800, 1000 and 1050 ms.
        #expect(harness.resynchronizations == 6)
        #expect(harness.reports.count <= 6)
        #expect(harness.reported == .none)
        #expect(harness.reports.last?.at == .milliseconds(1050))
    }

    @Test("A failed resynchronization is retried after the debounce")
    func resynchronizationRetry() {
        var kernel = FakeKernel.laptop
        _ = kernel.addRoute(.v4(Link.wlan))
        var harness = Harness(kernel: kernel)
        harness.failNextResynchronization = true
        harness.at(.milliseconds(5)) { $0.setLink(Link.wlan, up: false) }
        harness.advance(to: .milliseconds(55))
        #expect(harness.resynchronizations == 1)
        #expect(harness.paths.isEmpty)
        harness.advance(to: .milliseconds(105))
        #expect(harness.resynchronizations == 2)
        #expect(harness.paths == [.none])
    }

    @Test("Notifications that change nothing arm no timer")
    func noOpEvents() {
        var kernel = FakeKernel.laptop
        _ = kernel.addRoute(.v4(Link.wlan))
        var machine = ConnectivityStateMachine(classify: { InterfaceClassifier.category(name: $0) })
        _ = machine.load(kernel.snapshot)
        let wlan0 = NetworkInterface(index: Link.wlan, name: "wlan0")
        #expect(machine.receive(.interfaceChanged(wlan0), at: .zero) == .none)
        #expect(machine.receive(.defaultRouteAdded(.v4(Link.wlan)), at: .zero) == .none)
        // An address of an interface without a default route (one of the default route's
        // interface is part of the path: ConnectivityStateMachinePathTests).
        let address = InterfaceAddress(interfaceIndex: Link.wwan, family: .ipv4, bytes: [10, 0, 0, 2], prefixLength: 24)
        #expect(machine.receive(.addressAdded(address), at: .zero) == .none)
        #expect(machine.timerFired(at: .seconds(1)) == .none)
        // A renamed link keeps its name when a message leaves it out.
        #expect(machine.receive(.interfaceChanged(NetworkInterface(index: Link.wlan, name: "")), at: .zero) == .none)
        // Removing a known address may have flushed routes: read the tables again.
        #expect(machine.receive(.addressRemoved(address), at: .zero) == .armTimer(deadline: .milliseconds(50)))
        #expect(machine.timerFired(at: .milliseconds(50)) == .resynchronize)
        #expect(machine.resynchronized(kernel.snapshot, at: .milliseconds(51)) == .none)
    }

    @Test("An early timer is re-armed for the same deadline")
    func earlyTimer() {
        var machine = ConnectivityStateMachine(classify: { InterfaceClassifier.category(name: $0) })
        _ = machine.load(FakeKernel.laptop.snapshot)
        #expect(machine.receive(.defaultRouteAdded(.v4(Link.eth)), at: .milliseconds(10)) == .armTimer(deadline: .milliseconds(60)))
        #expect(machine.timerFired(at: .milliseconds(59)) == .armTimer(deadline: .milliseconds(60)))
        #expect(machine.timerFired(at: .milliseconds(60)) == .report(wired))
    }

    @Test("Before the first snapshot, notifications report nothing")
    func loading() {
        var machine = ConnectivityStateMachine(classify: { InterfaceClassifier.category(name: $0) })
        #expect(machine.receive(.defaultRouteAdded(.v4(Link.eth)), at: .zero) == .none)
        #expect(machine.timerFired(at: .seconds(1)) == .none)
        #expect(machine.reported == .none)
    }

    @Test("The injected classifier decides the category")
    func injectedClassifier() {
        var kernel = FakeKernel()
        _ = kernel.addLink(7, "tun0")
        _ = kernel.addRoute(.v4(7))
        var machine = ConnectivityStateMachine(classify: { $0 == "tun0" ? .cellular : .other })
        #expect(machine.load(kernel.snapshot) == ConnectivityPath(category: .cellular, interface: "tun0"))
    }
}
