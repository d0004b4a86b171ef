import Glibc
import Switchyard

@_silgen_name("setns") private func c_setns(_ fd: CInt, _ nstype: CInt) -> CInt

/// The soak's own hosts: a client and a server network namespace joined by two veth
/// pairs, one named as a Wi-Fi link (`wlan0-PID`, 10.215.1.0/24) and one as a cellular
/// link (`wwan0-PID`, 10.215.2.0/24). The server's address, 10.215.100.1, is on the
/// server namespace's loopback, reached only through the client's default route, so
/// moving that route switches the network. Faults go into the server's namespace (nft
/// table `sysoak`, `ss -K`) or the client's (links, routes); nothing of the machine's own
/// namespace is touched. Names end in a tag (`sysoak-c-TAG`, `sysoak-s-TAG`, `wlan0-TAG`):
/// `Benchmarks/soak/soak` passes its process id and deletes both namespaces by name when
/// the driver ends, however it ends.
final class SoakNetwork: Sendable {
    struct Path: Sendable {
        let link: String
        let peer: String
        let clientAddress: String
        let gateway: String
    }

    let clientNamespace: String
    let serverNamespace: String
    let paths: [Path]
    let serverAddress = "10.215.100.1"

    /// `tag` makes the names unique to the run (default: the process id); at most 9
    /// characters, so that `wlan0-TAG` fits the kernel's 15.
    init(tag: String) {
        let pid = tag
        clientNamespace = "sysoak-c-\(pid)"
        serverNamespace = "sysoak-s-\(pid)"
        paths = [
            Path(link: "wlan0-\(pid)", peer: "syw\(pid)", clientAddress: "10.215.1.1", gateway: "10.215.1.2"),
            Path(link: "wwan0-\(pid)", peer: "syc\(pid)", clientAddress: "10.215.2.1", gateway: "10.215.2.2"),
        ]
    }

    /// Makes both namespaces, the links (every end up), the server's address and the
    /// client's default route over the first link.
    func make() throws {
        let c = clientNamespace, s = serverNamespace
        var steps: [[String]] = [
            ["ip", "netns", "add", c],
            ["ip", "netns", "add", s],
            ["ip", "-n", c, "link", "set", "lo", "up"],
            ["ip", "-n", s, "link", "set", "lo", "up"],
            ["ip", "-n", s, "addr", "add", "\(serverAddress)/32", "dev", "lo"],
        ]
        for path in paths {
            let subnet = path.gateway
            steps += [
                ["ip", "-n", c, "link", "add", path.link, "type", "veth", "peer", "name", path.peer, "netns", s],
                ["ip", "-n", c, "addr", "add", "\(path.clientAddress)/24", "dev", path.link],
                ["ip", "-n", s, "addr", "add", "\(subnet)/24", "dev", path.peer],
                ["ip", "-n", s, "link", "set", path.peer, "up"],
                ["ip", "-n", c, "link", "set", path.link, "up"],
            ]
        }
        steps.append(["ip", "-n", c, "route", "add", "default", "via", paths[0].gateway, "dev", paths[0].link])
        for step in steps where !Tool.run(step) {
            remove()
            throw SoakError("`\(step.joined(separator: " "))` failed")
        }
    }

    /// Deletes both namespaces (links and nft rules go with them).
    func remove() {
        Tool.run(["ip", "netns", "del", clientNamespace])
        Tool.run(["ip", "netns", "del", serverNamespace])
    }

    // MARK: faults

    /// Destroys every established TCP socket of server `port` in the server's namespace
    /// (`ss -K`, SOCK_DESTROY): the server's end sees ECONNABORTED, the client's a reset.
    func destroySockets(port: Int) throws {
        try Tool.check(["ip", "netns", "exec", serverNamespace, "ss", "-K", "-tn", "state", "established", "( sport = :\(port) )"])
    }

    /// Drops every packet to and from server `port`, carrier up.
    func blackHole(port: Int) throws {
        try nft(["add", "table", "inet", "sysoak"])
        try nft(["add", "chain", "inet", "sysoak", "in", "{ type filter hook input priority 0; }"])
        try nft(["add", "chain", "inet", "sysoak", "out", "{ type filter hook output priority 0; }"])
        try nft(["add", "rule", "inet", "sysoak", "in", "tcp", "dport", "\(port)", "drop"])
        try nft(["add", "rule", "inet", "sysoak", "out", "tcp", "sport", "\(port)", "drop"])
    }

    /// Removes every black hole.
    func clearBlackHoles() throws {
        try nft(["delete", "table", "inet", "sysoak"])
    }

    /// Moves the client's default route to `to` and takes the link of `from` down.
    func switchNetwork(from: Path, to: Path) throws {
        try Tool.check(["ip", "-n", clientNamespace, "route", "replace", "default", "via", to.gateway, "dev", to.link])
        try Tool.check(["ip", "-n", clientNamespace, "link", "set", from.link, "down"])
    }

    /// Brings the client's end of `path` back up (its subnet's route comes back with it).
    func bringUp(_ path: Path) throws {
        try Tool.check(["ip", "-n", clientNamespace, "link", "set", path.link, "up"])
    }

    private func nft(_ arguments: [String]) throws {
        try Tool.check(["ip", "netns", "exec", serverNamespace, "nft"] + arguments)
    }

    // MARK: threads in a namespace

    /// Runs `make` on a new thread that entered `namespace`: the sockets it opens and the
    /// threads it starts (a transport's loops, a netlink monitor's thread) live there.
    func run<T: Sendable>(in namespace: String, _ make: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            let work = ThreadWork {
                let fd = open("/var/run/netns/\(namespace)", O_RDONLY | O_CLOEXEC)
                guard fd >= 0 else {
                    continuation.resume(throwing: SoakError("cannot open the namespace \(namespace)"))
                    return
                }
                let entered = c_setns(fd, 0x4000_0000 /* CLONE_NEWNET */) == 0
                close(fd)
                guard entered else {
                    continuation.resume(throwing: SoakError("setns into \(namespace) failed"))
                    return
                }
                continuation.resume(with: Result { try make() })
            }
            let box = Unmanaged.passRetained(work)
            var thread = pthread_t()
            let status = pthread_create(&thread, nil, { raw in
                Unmanaged<ThreadWork>.fromOpaque(raw!).takeRetainedValue().work()
                return nil
            }, box.toOpaque())
            if status == 0 {
                pthread_detach(thread)
            } else {
                box.release()
                continuation.resume(throwing: SoakError("could not start a thread for \(namespace)"))
            }
        }
    }
}

/// Work handed to a new thread.
private final class ThreadWork: Sendable {
    let work: @Sendable () -> Void
    init(_ work: @escaping @Sendable () -> Void) { self.work = work }
}

struct SoakError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// Runs `ip`, `nft`, `ss` (no shell), output discarded.
enum Tool {
    static func path(_ name: String) -> String? {
        ["/usr/sbin/", "/sbin/", "/usr/bin/", "/bin/"].map { $0 + name }.first { access($0, X_OK) == 0 }
    }

    static func check(_ arguments: [String]) throws {
        if !run(arguments) { throw SoakError("`\(arguments.joined(separator: " "))` failed") }
    }

    /// Whether the tool exited 0. Bounded: these tools do not block.
    @discardableResult
    static func run(_ arguments: [String]) -> Bool {
        guard let path = path(arguments[0]) else { return false }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        var argv: [UnsafeMutablePointer<CChar>?] = ([path] + arguments.dropFirst()).map { strdup($0) }
        argv.append(nil)
        defer { for pointer in argv { free(pointer) } }
        var pid = pid_t()
        guard posix_spawn(&pid, path, &actions, nil, argv, environ) == 0 else { return false }
        var status: CInt = 0
        while waitpid(pid, &status, 0) < 0 {
            if errno != EINTR { return false }
        }
        return status & 0x7f == 0 && (status >> 8) & 0xff == 0
    }
}

/// The process's descriptors and memory.
enum ProcessState {
    /// fd number to readlink target, from /proc/self/fd (its own descriptor left out).
    static func descriptors() -> [Int32: String] {
        var targets: [Int32: String] = [:]
        guard let directory = opendir("/proc/self/fd") else { return [:] }
        defer { closedir(directory) }
        let own = dirfd(directory)
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            guard let fd = Int32(name), fd != own else { continue }
            var buffer = [CChar](repeating: 0, count: 512)
            let length = readlink("/proc/self/fd/\(name)", &buffer, buffer.count - 1)
            targets[fd] = length < 0 ? "?" : String(decoding: buffer[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        }
        return targets
    }

    /// The descriptors by kind: their targets with a socket's or pipe's inode left out
    /// (`socket`, `anon_inode:[eventfd]`, a path), and how many of each. A listener that
    /// a suspend closed and a resume reopened is a new socket of the same kind.
    static func kinds(_ descriptors: [Int32: String]) -> [String: Int] {
        var kinds: [String: Int] = [:]
        for target in descriptors.values {
            let kind = target.hasPrefix("socket:[") ? "socket" : target.hasPrefix("pipe:[") ? "pipe" : target
            kinds[kind, default: 0] += 1
        }
        return kinds
    }

    /// VmRSS and RssAnon of /proc/self/status, in KiB.
    static func memory() -> (rss: Int, anon: Int) {
        let fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return (-1, -1) }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 8192)
        let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        guard count > 0 else { return (-1, -1) }
        var rss = -1, anon = -1
        for line in String(decoding: buffer[..<count], as: UTF8.self).split(separator: "\n") {
            let fields = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
            guard fields.count >= 2 else { continue }
            if fields[0] == "VmRSS:" { rss = Int(fields[1]) ?? -1 }
            if fields[0] == "RssAnon:" { anon = Int(fields[1]) ?? -1 }
        }
        return (rss, anon)
    }

    /// A client-side connection to `address` (one of `ports`), chosen at random: the
    /// descriptor whose peer is that address and port (`getpeername`), checked again
    /// just before it is returned.
    static func clientConnection(to address: String, ports: Set<Int>, using random: inout some RandomNumberGenerator) -> Int32? {
        let candidates = descriptors().filter { $0.value.hasPrefix("socket:") }.keys.filter { peer(of: $0, address: address, ports: ports) }
        guard let chosen = candidates.randomElement(using: &random) else { return nil }
        return peer(of: chosen, address: address, ports: ports) ? chosen : nil
    }

    private static func peer(of fd: Int32, address: String, ports: Set<Int>) -> Bool {
        var storage = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let status = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getpeername(fd, $0, &length) }
        }
        guard status == 0, storage.sin_family == sa_family_t(AF_INET) else { return false }
        var text = [CChar](repeating: 0, count: 32)
        var raw = storage.sin_addr
        guard inet_ntop(AF_INET, &raw, &text, socklen_t(text.count)) != nil else { return false }
        let host = String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return host == address && ports.contains(Int(UInt16(bigEndian: storage.sin_port)))
    }
}
