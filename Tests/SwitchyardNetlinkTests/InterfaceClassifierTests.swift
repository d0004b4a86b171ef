import Foundation
import Switchyard
import SwitchyardNetlink
import Testing

@Suite("Interface classification")
struct InterfaceClassifierTests {
    @Test(
        "Names fall back to a category",
        arguments: [
            ("wlan0", ConnectivityCategory.wifi), ("wlp2s0", .wifi), ("wlx00c0ca123456", .wifi),
            ("wwan0", .cellular), ("rmnet_data0", .cellular), ("rmnet0", .cellular), ("ccmni1", .cellular),
            ("eth0", .wired), ("enp3s0", .wired), ("eno1", .wired),
            ("lo", .other), ("tun0", .other), ("docker0", .other), ("br0", .other), ("veth1", .other),
            ("w0", .other),
        ])
    func names(name: String, category: ConnectivityCategory) {
        #expect(InterfaceClassifier.category(name: name) == category)
        #expect(InterfaceClassifier.category(name: name, hints: InterfaceHints()) == category)
    }

    @Test(
        "sysfs hints override names",
        arguments: [
            ("eth0", InterfaceHints(isWireless: true), ConnectivityCategory.wifi),
            ("usb0", InterfaceHints(deviceType: "wlan"), .wifi),
            ("eth1", InterfaceHints(deviceType: "wwan"), .cellular),
            ("wlan0", InterfaceHints(deviceType: "wwan"), .cellular),
            ("wwan0", InterfaceHints(isWireless: true), .wifi),
            // A device type that says nothing about the medium leaves the name to decide.
            ("wlan1", InterfaceHints(deviceType: "bridge"), .wifi),
            ("br0", InterfaceHints(deviceType: "bridge"), .other),
        ])
    func hintsOverrideNames(name: String, hints: InterfaceHints, category: ConnectivityCategory) {
        #expect(InterfaceClassifier.category(name: name, hints: hints) == category)
    }

    @Test("DEVTYPE is read from a uevent file")
    func uevent() {
        #expect(InterfaceHints.deviceType(fromUevent: "DEVTYPE=wlan\nINTERFACE=wlan0\nIFINDEX=3\n") == "wlan")
        #expect(InterfaceHints.deviceType(fromUevent: "INTERFACE=wwan0\nIFINDEX=5\nDEVTYPE=wwan\n") == "wwan")
        #expect(InterfaceHints.deviceType(fromUevent: "INTERFACE=eth0\nIFINDEX=2\n") == nil)
        #expect(InterfaceHints.deviceType(fromUevent: "") == nil)
    }

    @Test("Hints come from a sysfs tree: wireless, phy80211, uevent; a missing entry is no hint")
    func sysfsTree() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("sy-sysfs-\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
        defer { try? FileManager.default.removeItem(at: root) }
        func make(_ name: String, wireless: Bool = false, phy: Bool = false, uevent: String? = nil) throws {
            let directory = root.appendingPathComponent(name)
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            if wireless { try FileManager.default.createDirectory(at: directory.appendingPathComponent("wireless"), withIntermediateDirectories: true) }
            if phy { try Data().write(to: directory.appendingPathComponent("phy80211")) }
            if let uevent { try Data(uevent.utf8).write(to: directory.appendingPathComponent("uevent")) }
        }
        try make("eth7", wireless: true, uevent: "INTERFACE=eth7\n")
        try make("usb3", phy: true)
        try make("en9", uevent: "DEVTYPE=wwan\nINTERFACE=en9\n")
        try make("eth0", uevent: "INTERFACE=eth0\nIFINDEX=2\n")

        let classify = InterfaceClassifier.sysfs(root: root.path)
        #expect(classify("eth7") == .wifi)
        #expect(classify("usb3") == .wifi)
        #expect(classify("en9") == .cellular)
        #expect(classify("eth0") == .wired)
        #expect(classify("wwan4") == .cellular, "no sysfs entry: the name decides")
        #expect(classify("../etc") == .other, "a name with a slash is never looked up")
        #expect(InterfaceClassifier.hints(name: "usb3", root: root.path) == InterfaceHints(isWireless: true))
    }
}
