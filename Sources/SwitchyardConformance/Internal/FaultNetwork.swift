import Glibc
import Switchyard
import Synchronization

@_silgen_name("setns") private func c_setns(_ fd: CInt, _ nstype: CInt) -> CInt

/// Two network namespaces of the kit's own, joined by a veth pair, for the network-fault
/// scenarios (`shared/TESTING.md`): a client end at 10.214.1.1 and a server end at
/// 10.214.1.2.
///
/// - Names are unique to the run: namespaces `sykit-c-PID-N` / `sykit-s-PID-N`, links
///   `syc<PID>n<N>` / `sys<PID>n<N>` (at most 15 characters, the kernel's limit).
/// - Nothing in the machine's own namespace is touched: the veth pair is moved into the
///   namespaces at once, and nft rules go into a table inside the server's namespace.
/// - ``remove()`` deletes both namespaces (and with them the links and the rules); every
///   network made is also recorded, so the runner removes whatever a scenario abandoned
///   at its time limit left behind (``removeLeftovers()``).
///
/// Transports for it are made on a thread that entered the namespace
/// (``makeTransport(_:in:configuration:)``): their event-loop threads start there, so
/// every socket they open belongs to it.
final class FaultNetwork: Sendable {
    let clientNamespace: String
    let serverNamespace: String
    let clientLink: String
    let serverLink: String
    let clientAddress = "10.214.1.1"
    let serverAddress = "10.214.1.2"

    private static let counter = Atomic<Int>(0)
    private static let live = Mutex<[ObjectIdentifier: FaultNetwork]>([:])
    private let removed = Atomic<Bool>(false)

    private init(number: Int) {
        let pid = getpid()
        clientNamespace = "sykit-c-\(pid)-\(number)"
        serverNamespace = "sykit-s-\(pid)-\(number)"
        clientLink = String("syc\(pid)n\(number)".prefix(15))
        serverLink = String("sys\(pid)n\(number)".prefix(15))
    }

    /// Why fault scenarios cannot run here, or nil when they can (root, `ip`, `nft`).
    static var unavailableReason: String? {
        if getuid() != 0 { return "needs root for network namespaces" }
        if tool("ip") == nil { return "needs iproute2 (ip)" }
        if tool("nft") == nil { return "needs nftables (apt-get install nftables)" }
        return nil
    }

    private static func tool(_ name: String) -> String? {
        ["/usr/sbin/", "/sbin/", "/usr/bin/", "/bin/"].map { $0 + name }.first { access($0, X_OK) == 0 }
    }

    /// Makes the namespaces and the link, both ends up; on any failure removes what it
    /// made and throws a description of the step that failed.
    static func make() throws -> FaultNetwork {
        let network = FaultNetwork(number: counter.add(1, ordering: .relaxed).newValue)
        live.withLock { $0[ObjectIdentifier(network)] = network }
        let c = network.clientNamespace, s = network.serverNamespace
        let cl = network.clientLink, sl = network.serverLink
        let steps: [[String]] = [
            ["ip", "netns", "add", c],
            ["ip", "netns", "add", s],
            ["ip", "link", "add", cl, "type", "veth", "peer", "name", sl],
            ["ip", "link", "set", cl, "netns", c],
            ["ip", "link", "set", sl, "netns", s],
            ["ip", "-n", c, "addr", "add", "\(network.clientAddress)/24", "dev", cl],
            ["ip", "-n", s, "addr", "add", "\(network.serverAddress)/24", "dev", sl],
            ["ip", "-n", c, "link", "set", "lo", "up"],
            ["ip", "-n", s, "link", "set", "lo", "up"],
            ["ip", "-n", c, "link", "set", cl, "up"],
            ["ip", "-n", s, "link", "set", sl, "up"],
        ]
        for step in steps where !run(step) {
            network.remove()
            throw NetworkError(message: "`\(step.joined(separator: " "))` failed")
        }
        return network
    }

    /// Removes both namespaces (the veth pair and the nft table go with them). Idempotent.
    func remove() {
        guard !removed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        _ = Self.run(["ip", "netns", "del", clientNamespace])
        _ = Self.run(["ip", "netns", "del", serverNamespace])
        // A link made before it was moved would still be in the machine's namespace.
        if Self.linkExistsHere(clientLink) { _ = Self.run(["ip", "link", "del", clientLink]) }
        _ = Self.live.withLock { $0.removeValue(forKey: ObjectIdentifier(self)) }
    }

    /// Removes every network this process made and has not removed yet.
    static func removeLeftovers() {
        let networks = live.withLock { Array($0.values) }
        for network in networks { network.remove() }
    }

    private static func linkExistsHere(_ name: String) -> Bool {
        access("/sys/class/net/\(name)", F_OK) == 0
    }

    // MARK: faults

    /// Takes the client's end of the link down (its routes go with it).
    func takeClientLinkDown() throws {
        try Self.check(["ip", "-n", clientNamespace, "link", "set", clientLink, "down"])
    }

    /// Drops every packet to and from TCP `port` in the server's namespace, carrier up.
    func blackHole(port: Int) throws {
        try addTable()
        try nft(["add", "rule", "inet", "sykit", "in", "tcp", "dport", "\(port)", "drop"])
        try nft(["add", "rule", "inet", "sykit", "out", "tcp", "sport", "\(port)", "drop"])
    }

    /// Answers every packet to TCP `port` in the server's namespace with a reset.
    func injectReset(port: Int) throws {
        try addTable()
        try nft(["add", "rule", "inet", "sykit", "in", "tcp", "dport", "\(port)", "reject", "with", "tcp", "reset"])
    }

    private func addTable() throws {
        try nft(["add", "table", "inet", "sykit"])
        try nft(["add", "chain", "inet", "sykit", "in", "{ type filter hook input priority 0; }"])
        try nft(["add", "chain", "inet", "sykit", "out", "{ type filter hook output priority 0; }"])
    }

    private func nft(_ arguments: [String]) throws {
        try Self.check(["ip", "netns", "exec", serverNamespace, "nft"] + arguments)
    }

    // MARK: transports in a namespace

    /// Makes a transport of `backend` on a new thread that entered `namespace`, so the
    /// transport's event-loop threads (which that thread starts) live there.
    func makeTransport(
        _ backend: TransportBackend, in namespace: String, configuration: TransportConfiguration
    ) async throws -> any Transport {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<any Transport, any Error>) in
            let work = ThreadWork {
                let fd = open("/var/run/netns/\(namespace)", O_RDONLY | O_CLOEXEC)
                guard fd >= 0 else {
                    continuation.resume(throwing: NetworkError(message: "cannot open the namespace \(namespace)"))
                    return
                }
                let entered = c_setns(fd, 0x4000_0000 /* CLONE_NEWNET */) == 0
                close(fd)
                guard entered else {
                    continuation.resume(throwing: NetworkError(message: "setns into \(namespace) failed"))
                    return
                }
                continuation.resume(with: Result { try backend.make(configuration) })
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
                continuation.resume(throwing: NetworkError(message: "could not start a thread for \(namespace)"))
            }
        }
    }

    // MARK: running tools

    struct NetworkError: Error, CustomStringConvertible {
        var message: String
        var description: String { message }
    }

    private static func check(_ arguments: [String]) throws {
        if !run(arguments) { throw NetworkError(message: "`\(arguments.joined(separator: " "))` failed") }
    }

    /// Runs a tool with `arguments` (no shell), its output discarded; whether it exited 0.
    /// Bounded: these tools do not block, and the child is waited for.
    @discardableResult
    static func run(_ arguments: [String]) -> Bool {
        guard let path = tool(arguments[0]) else { return false }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
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
        // WIFEXITED && WEXITSTATUS == 0
        return status & 0x7f == 0 && (status >> 8) & 0xff == 0
    }
}

/// Work handed to a new thread.
private final class ThreadWork: Sendable {
    let work: @Sendable () -> Void
    init(_ work: @escaping @Sendable () -> Void) { self.work = work }
}
