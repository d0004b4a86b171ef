import SwitchyardPosix
import Glibc
import Synchronization

/// Two network namespaces joined by a veth pair, made for one test and removed after it
/// (see shared/TESTING.md): a client end at 10.213.77.1 and a server end at 10.213.77.2,
/// named with this process's id so parallel runs and leftovers cannot collide. Nothing
/// in the machine's own namespace is touched.
struct TestNetwork: Sendable {
    let client: String
    let server: String
    let clientAddress = "10.213.77.1"
    let serverAddress = "10.213.77.2"

    /// Whether this process can make namespaces and black holes (root, ip, nft).
    static var available: Bool {
        getuid() == 0 && access("/usr/sbin/ip", X_OK) == 0 && access("/usr/sbin/nft", X_OK) == 0
    }

    /// Makes the namespaces, or returns nil (after cleaning up) when a step fails.
    static func make() -> TestNetwork? {
        let pid = getpid()
        let network = TestNetwork(client: "syuv-c-\(pid)", server: "syuv-s-\(pid)")
        let clientLink = "uvc\(pid)"
        let serverLink = "uvs\(pid)"
        let steps = [
            "ip netns add \(network.client)",
            "ip netns add \(network.server)",
            "ip link add \(clientLink) type veth peer name \(serverLink)",
            "ip link set \(clientLink) netns \(network.client)",
            "ip link set \(serverLink) netns \(network.server)",
            "ip -n \(network.client) addr add \(network.clientAddress)/24 dev \(clientLink)",
            "ip -n \(network.client) link set \(clientLink) up",
            "ip -n \(network.client) link set lo up",
            "ip -n \(network.server) addr add \(network.serverAddress)/24 dev \(serverLink)",
            "ip -n \(network.server) link set \(serverLink) up",
            "ip -n \(network.server) link set lo up",
        ]
        for step in steps where !run(step) {
            network.remove()
            return nil
        }
        return network
    }

    /// Removes both namespaces (and with them the veth pair).
    func remove() {
        _ = Self.run("ip netns del \(client)")
        _ = Self.run("ip netns del \(server)")
    }

    /// Drops every packet to and from TCP `port` in the server's namespace (carrier stays up).
    func blackHole(port: Int) -> Bool {
        let ns = "ip netns exec \(server) nft"
        return Self.run("\(ns) add table inet sy")
            && Self.run("\(ns) add chain inet sy in '{ type filter hook input priority 0; }'")
            && Self.run("\(ns) add chain inet sy out '{ type filter hook output priority 0; }'")
            && Self.run("\(ns) add rule inet sy in tcp dport \(port) drop")
            && Self.run("\(ns) add rule inet sy out tcp sport \(port) drop")
    }

    @discardableResult
    static func run(_ command: String) -> Bool {
        system(command + " >/dev/null 2>&1") == 0
    }

    /// Runs `body` on a new thread that entered namespace `name` (threads it starts, such
    /// as a transport's loops, start there too, and their sockets belong to it).
    func inNamespace<T: Sendable>(_ name: String, _ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await NetworkNamespace.run(in: name, body)
    }

}

