public import Switchyard

/// What sysfs says about an interface (`/sys/class/net/NAME`).
public struct InterfaceHints: Sendable, Hashable {
    /// `wireless` or `phy80211` exists under the interface's directory.
    public var isWireless: Bool
    /// `DEVTYPE` from its `uevent` (`wlan`, `wwan`, `bridge`, ...), if any.
    public var deviceType: String?

    public init(isWireless: Bool = false, deviceType: String? = nil) {
        self.isWireless = isWireless
        self.deviceType = deviceType
    }

    /// Reads `DEVTYPE=` from the text of a `uevent` file.
    public static func deviceType(fromUevent text: String) -> String? {
        for line in text.split(whereSeparator: { $0 == "\n" || $0 == "\r" }) where line.hasPrefix("DEVTYPE=") {
            let value = line.dropFirst("DEVTYPE=".count)
            return value.isEmpty ? nil : String(value)
        }
        return nil
    }
}

/// The category of a network interface: sysfs hints first, then the name.
///
/// | evidence | category |
/// | --- | --- |
/// | `wireless` or `phy80211` in sysfs, or `DEVTYPE=wlan` | `wifi` |
/// | `DEVTYPE=wwan` | `cellular` |
/// | name `wlan*`, `wl*` | `wifi` |
/// | name `wwan*`, `rmnet*`, `ccmni*` | `cellular` |
/// | name `eth*`, `en*` | `wired` |
/// | anything else | `other` |
///
/// sysfs shows the network namespace of the process that mounted it, not the calling
/// thread's: a monitor on a thread that `setns()`ed into a namespace finds no sysfs entry
/// for that namespace's interfaces and classifies them by name (`ip netns exec` mounts a
/// fresh sysfs, so there the hints work).
public enum InterfaceClassifier {
    /// The category from what is known about an interface. Pure.
    public static func category(name: String, hints: InterfaceHints = InterfaceHints()) -> ConnectivityCategory {
        if hints.isWireless || hints.deviceType == "wlan" { return .wifi }
        if hints.deviceType == "wwan" { return .cellular }
        return category(name: name)
    }

    /// The category from the name alone. Pure.
    public static func category(name: String) -> ConnectivityCategory {
        if name.hasPrefix("wl") { return .wifi }  // wlan*, wlp2s0, wlx...
        if ["wwan", "rmnet", "ccmni"].contains(where: name.hasPrefix) { return .cellular }
        if name.hasPrefix("eth") || name.hasPrefix("en") { return .wired }
        return .other
    }

    /// Reads the hints for `name` from sysfs under `root`. Missing files are no hints.
    public static func hints(name: String, root: String = "/sys/class/net") -> InterfaceHints {
        // An interface name never holds a slash; refuse one rather than leave `root`.
        guard !name.isEmpty, !name.contains("/"), name != ".", name != ".." else { return InterfaceHints() }
        let directory = root + "/" + name
        let isWireless = NetlinkSystem.exists(directory + "/wireless") || NetlinkSystem.exists(directory + "/phy80211")
        let uevent = NetlinkSystem.readSmallFile(directory + "/uevent")
        return InterfaceHints(isWireless: isWireless, deviceType: uevent.flatMap(InterfaceHints.deviceType(fromUevent:)))
    }

    /// Classifies `name` with hints from sysfs: the monitor's default classifier.
    @Sendable
    public static func classify(name: String) -> ConnectivityCategory {
        category(name: name, hints: hints(name: name))
    }

    /// A classifier reading sysfs under `root` (tests point it at a directory of their own).
    public static func sysfs(root: String) -> @Sendable (String) -> ConnectivityCategory {
        { name in category(name: name, hints: hints(name: name, root: root)) }
    }
}
