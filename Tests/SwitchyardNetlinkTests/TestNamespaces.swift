import SwitchyardPosix
import Foundation
import Glibc
import Synchronization

/// A client namespace with a "router" namespace behind it, made for one test and removed
/// after it (shared/TESTING.md): every name carries this process's id and a per-test
/// tag, and nothing in the machine's own namespace is touched (veths are made inside the
/// namespaces).
struct TestNamespaces: Sendable {
    let client: String
    let router: String
    let suffix: String

    /// Whether this process can make namespaces: root, with iproute2.
    static var available: Bool {
        getuid() == 0 && access("/usr/sbin/ip", X_OK) == 0
    }

    /// Makes both namespaces, with `lo` up in each; nil (after cleaning up) on failure.
    static func make(tag: String) -> TestNamespaces? {
        let suffix = "\(tag)\(getpid())"
        let namespaces = TestNamespaces(client: "synl-c-\(suffix)", router: "synl-r-\(suffix)", suffix: suffix)
        let steps = [
            "ip netns add \(namespaces.client)",
            "ip netns add \(namespaces.router)",
            "ip -n \(namespaces.client) link set lo up",
            "ip -n \(namespaces.router) link set lo up",
        ]
        for step in steps where !run(step) {
            namespaces.remove()
            return nil
        }
        return namespaces
    }

    /// A veth from the client namespace (`name`, address `.1`) to the router (`peer`,
    /// address `.2`) on `10.214.subnet.0/24`, both ends up. Names are at most 15 bytes.
    func addVeth(_ name: String, peer: String, subnet: Int) -> Bool {
        precondition(name.utf8.count <= 15 && peer.utf8.count <= 15, "interface names are at most 15 bytes")
        return Self.run("ip -n \(client) link add \(name) type veth peer name \(peer) netns \(router)")
            && Self.run("ip -n \(client) addr add 10.214.\(subnet).1/24 dev \(name)")
            && Self.run("ip -n \(router) addr add 10.214.\(subnet).2/24 dev \(peer)")
            && Self.run("ip -n \(router) link set \(peer) up")
            && Self.run("ip -n \(client) link set \(name) up")
    }

    /// Runs `ip -n CLIENT ARGS`.
    @discardableResult
    func ip(_ arguments: String) -> Bool {
        Self.run("ip -n \(client) \(arguments)")
    }

    /// Runs a batch of `ip` commands (one per line) in the client namespace in one process.
    @discardableResult
    func ipBatch(_ lines: [String]) -> Bool {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("synl-batch-\(suffix)").path
        defer { unlink(path) }
        guard FileManager.default.createFile(atPath: path, contents: Data((lines.joined(separator: "\n") + "\n").utf8)) else { return false }
        return Self.run("ip -n \(client) -batch \(path)")
    }

    /// The client namespace's default routes, as `ip` prints them.
    func defaultRoutes() -> String {
        Self.output("ip -n \(client) route show default; ip -n \(client) -6 route show default")
    }

    /// Removes both namespaces and with them every veth.
    func remove() {
        _ = Self.run("ip netns del \(client)")
        _ = Self.run("ip netns del \(router)")
    }

    @discardableResult
    static func run(_ command: String) -> Bool {
        system(command + " >/dev/null 2>&1") == 0
    }

    static func output(_ command: String) -> String {
        guard let pipe = popen(command + " 2>&1", "r") else { return "" }
        var text = ""
        var buffer = [CChar](repeating: 0, count: 1024)
        while fgets(&buffer, CInt(buffer.count), pipe) != nil {
            text += String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        }
        pclose(pipe)
        return text
    }

    /// Runs `body` on a new thread that entered the client namespace: what it makes there
    /// (a monitor, with its socket and thread) belongs to the namespace.
    func inClient<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await NetworkNamespace.run(in: client, body)
    }

}


/// The descriptors of this process that are sockets or eventfds (what a monitor opens),
/// by number. Regular files are left out: other tests in the process may open those.
func socketDescriptors() -> Set<Int32> {
    var result: Set<Int32> = []
    guard let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd") else { return result }
    for entry in entries {
        guard let fd = Int32(entry) else { continue }
        var buffer = [CChar](repeating: 0, count: 256)
        let length = readlink("/proc/self/fd/\(entry)", &buffer, buffer.count - 1)
        guard length > 0 else { continue }
        let target = String(decoding: buffer[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        if target.hasPrefix("socket:") || target.contains("eventfd") { result.insert(fd) }
    }
    return result
}

/// The changes an observer saw, with when it saw them.
final class ChangeLog: Sendable {
    private let entries = Mutex<[(at: ContinuousClock.Instant, path: String)]>([])

    func record(_ path: some CustomStringConvertible) {
        let now = ContinuousClock.now
        entries.withLock { $0.append((now, path.description)) }
    }

    var all: [(at: ContinuousClock.Instant, path: String)] { entries.withLock { $0 } }
    var count: Int { entries.withLock { $0.count } }

    /// Waits up to `timeout` for an entry after index `start` that satisfies `match`.
    func wait(
        after start: Int, timeout: Duration = .seconds(2), _ match: (String) -> Bool
    ) async -> (at: ContinuousClock.Instant, path: String)? {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let hit = all.dropFirst(start).first(where: { match($0.path) }) { return hit }
            try? await Task.sleep(for: .milliseconds(2))
        }
        return all.dropFirst(start).first(where: { match($0.path) })
    }
}
