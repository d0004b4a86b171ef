import SwitchyardPosix
import Glibc
import Switchyard
import Synchronization

/// Two network namespaces of the kit's own, a client's and a server's, joined by veth
/// pairs, for the scenarios that need a real path (`shared/TESTING.md`). Two layouts:
///
/// - ``Layout/direct`` (the stall and reset scenarios): one veth pair, the client's end
///   at 10.214.1.1, the server's at 10.214.1.2, where the server listens.
/// - ``Layout/wifiAndCellular`` (the connectivity scenarios): two veth pairs whose client
///   ends are named as a Wi-Fi and a cellular interface are (`wlan0-…` at 10.214.1.1,
///   `wwan0-…` at 10.214.2.1), each to the server's namespace (10.214.1.2, 10.214.2.2),
///   which holds the server's address, 10.214.100.1, on its loopback. The client reaches
///   it only through its default route, which starts on the Wi-Fi link: moving the route
///   moves new connections (and their source address) to the other link.
/// - ``Layout/twoWifi`` (the path-change scenarios): the same with two Wi-Fi links,
///   `wlan0-…` at 10.214.1.1 and `wlan1-…` at 10.214.3.1 (server ends 10.214.1.2,
///   10.214.3.2), so moving the default route keeps the category `wifi`.
///
/// - Names are unique to the run: namespaces `sykit-c-PID-N` / `sykit-s-PID-N`, links
///   `syc<PID>n<N>` / `sys<PID>n<N>`, or `wlan0-<PID>n<N>` / `wwan0-<PID>n<N>` with peers
///   `syw<PID>n<N>` / `syp<PID>n<N>` (`wlan1-<PID>n<N>` with peer `syv<PID>n<N>` for the
///   second Wi-Fi link) (at most 15 characters, the kernel's limit: a long
///   process id is written in base 36).
/// - ``Family/ipv6``: the same layouts with IPv6 only: unique local addresses
///   `fd00:214:S::1` and `fd00:214:S::2` (a `/64` per link, added `nodad` so they are
///   usable at once), the server's address `fd00:214:100::1`, IPv6 default routes.
/// - Nothing in the machine's own namespace is touched: veth pairs are made inside the
///   client's namespace with their peer in the server's, and nft rules go into a table
///   inside the server's namespace.
/// - ``remove()`` deletes both namespaces (and with them the links and the rules); every
///   network made is also recorded, so the runner removes whatever a scenario abandoned
///   at its time limit left behind (``removeLeftovers()``).
///
/// Transports (and connectivity monitors) for it are made on a thread that entered the
/// namespace (``makeTransport(_:in:configuration:)``, ``run(in:_:)``): their threads
/// start there, so every socket they open belongs to it.
final class FaultNetwork: Sendable {
    /// The addresses and routes of the links.
    enum Family: Sendable, CustomStringConvertible {
        /// `10.214.S.1` and `10.214.S.2` on each link.
        case ipv4
        /// `fd00:214:S::1` and `fd00:214:S::2` on each link (IPv6 only).
        case ipv6

        var description: String { self == .ipv4 ? "IPv4" : "IPv6" }
    }

    enum Layout: Sendable {
        /// One veth pair; the server listens on its end's address.
        case direct
        /// A `wlan0-…` and a `wwan0-…` veth pair, a server address behind both, the
        /// default route on the first.
        case wifiAndCellular
        /// A `wlan0-…` and a `wlan1-…` veth pair, a server address behind both, the
        /// default route on the first.
        case twoWifi
    }

    /// One veth pair from the client's namespace to the server's, on `10.214.S.0/24` (or
    /// `fd00:214:S::/64`).
    struct Path: Sendable, CustomStringConvertible {
        /// The client's end (in the client's namespace).
        let link: String
        /// The server's end (in the server's namespace).
        let peer: String
        /// The client end's address, `10.214.S.1` (`fd00:214:S::1`): the source of
        /// connections over this path.
        let clientAddress: String
        /// The server end's address, `10.214.S.2` (`fd00:214:S::2`): the gateway of a
        /// default route over it.
        let gateway: String
        /// The length of the link's prefix: 24 (64).
        let prefixLength: Int
        /// With ``Family/ipv6``: the client end's link-local address (scoped to `link`).
        static let clientLinkLocal = "fe80::1"
        /// With ``Family/ipv6``: the server end's link-local address (scoped to `peer`).
        static let peerLinkLocal = "fe80::2"

        init(link: String, peer: String, subnet: Int, family: Family) {
            // Programmer misuse only: the kit's scenarios name their own links.
            precondition(link.utf8.count <= 15 && peer.utf8.count <= 15, "interface names are at most 15 bytes: \(link), \(peer) (a bug in the scenario)")
            self.link = link
            self.peer = peer
            switch family {
            case .ipv4:
                clientAddress = "10.214.\(subnet).1"
                gateway = "10.214.\(subnet).2"
                prefixLength = 24
            case .ipv6:
                clientAddress = "fd00:214:\(subnet)::1"
                gateway = "fd00:214:\(subnet)::2"
                prefixLength = 64
            }
        }

        var description: String { "\(link) (\(clientAddress))" }

        /// The path a netlink monitor in the client's namespace reports while the default
        /// route is on this link (its IPv6 link-local address is not listed).
        func monitoredPath(_ category: ConnectivityCategory) -> ConnectivityPath {
            ConnectivityPath(category: category, interface: link, addresses: [clientAddress])
        }
    }

    let clientNamespace: String
    let serverNamespace: String
    /// The veth pairs, in the order of the layout (direct: one; wifiAndCellular: the
    /// Wi-Fi one, then the cellular one; twoWifi: wlan0, then wlan1).
    let paths: [Path]
    /// Where the server listens.
    let serverAddress: String
    /// The addresses' family.
    let family: Family

    /// The first path's client end.
    var clientLink: String { paths[0].link }
    /// The first path's client address.
    var clientAddress: String { paths[0].clientAddress }

    private static let counter = Atomic<Int>(0)
    private static let live = Mutex<[ObjectIdentifier: FaultNetwork]>([:])
    private let removed = Atomic<Bool>(false)

    private init(number: Int, layout: Layout, family: Family) {
        self.family = family
        let pid = getpid()
        clientNamespace = "sykit-c-\(pid)-\(number)"
        serverNamespace = "sykit-s-\(pid)-\(number)"
        func name(_ prefix: String) -> String {
            let decimal = "\(prefix)\(pid)n\(number)"
            if decimal.utf8.count <= 15 { return decimal }
            return String("\(prefix)\(String(pid, radix: 36))n\(number)".prefix(15))
        }
        switch layout {
        case .direct:
            paths = [Path(link: name("syc"), peer: name("sys"), subnet: 1, family: family)]
            serverAddress = paths[0].gateway
        case .wifiAndCellular:
            paths = [
                Path(link: name("wlan0-"), peer: name("syw"), subnet: 1, family: family),
                Path(link: name("wwan0-"), peer: name("syp"), subnet: 2, family: family),
            ]
            serverAddress = Self.serverAddressBehindLinks(family)
        case .twoWifi:
            paths = [
                Path(link: name("wlan0-"), peer: name("syw"), subnet: 1, family: family),
                Path(link: name("wlan1-"), peer: name("syv"), subnet: 3, family: family),
            ]
            serverAddress = Self.serverAddressBehindLinks(family)
        }
    }

    /// Where the server listens in the layouts of two links: an address on its loopback,
    /// reached over either.
    static func serverAddressBehindLinks(_ family: Family) -> String {
        family == .ipv4 ? "10.214.100.1" : "fd00:214:100::1"
    }

    /// Why network scenarios cannot run here, or nil when they can (root, `ip`, `nft`).
    static var unavailableReason: String? {
        if getuid() != 0 { return "needs root for network namespaces" }
        if tool("ip") == nil { return "needs iproute2 (ip)" }
        if tool("nft") == nil { return "needs nftables (apt-get install nftables)" }
        return nil
    }

    private static func tool(_ name: String) -> String? {
        ["/usr/sbin/", "/sbin/", "/usr/bin/", "/bin/"].map { $0 + name }.first { access($0, X_OK) == 0 }
    }

    /// Makes the namespaces and the links of `layout` with addresses of `family`, every
    /// end up; on any failure removes what it made and throws a description of the step
    /// that failed.
    static func make(_ layout: Layout = .direct, family: Family = .ipv4) throws -> FaultNetwork {
        let network = FaultNetwork(number: counter.add(1, ordering: .relaxed).newValue, layout: layout, family: family)
        live.withLock { $0[ObjectIdentifier(network)] = network }
        let c = network.clientNamespace, s = network.serverNamespace
        var steps: [[String]] = [
            ["ip", "netns", "add", c],
            ["ip", "netns", "add", s],
            ["ip", "-n", c, "link", "set", "lo", "up"],
            ["ip", "-n", s, "link", "set", "lo", "up"],
        ]
        // IPv6 addresses without duplicate address detection: usable at once.
        let flags = family == .ipv6 ? ["nodad"] : []
        for path in network.paths {
            steps += [
                ["ip", "-n", c, "link", "add", path.link, "type", "veth", "peer", "name", path.peer, "netns", s],
                ["ip", "-n", c, "addr", "add", "\(path.clientAddress)/\(path.prefixLength)", "dev", path.link] + flags,
                ["ip", "-n", s, "addr", "add", "\(path.gateway)/\(path.prefixLength)", "dev", path.peer] + flags,
                ["ip", "-n", s, "link", "set", path.peer, "up"],
            ]
            if family == .ipv6 {
                // Link-local addresses of the kit's own, usable at once (the ones the
                // kernel makes are tentative until duplicate address detection ends).
                steps += [
                    ["ip", "-n", c, "addr", "add", "\(Path.clientLinkLocal)/64", "dev", path.link, "nodad"],
                    ["ip", "-n", s, "addr", "add", "\(Path.peerLinkLocal)/64", "dev", path.peer, "nodad"],
                ]
            }
            steps += [
                ["ip", "-n", c, "link", "set", path.link, "up"],
            ]
        }
        if layout != .direct {
            steps += [
                ["ip", "-n", s, "addr", "add", "\(network.serverAddress)/\(family == .ipv4 ? 32 : 128)", "dev", "lo"],
                ["ip", "-n", c, network.familyOption, "route", "add", "default", "via", network.paths[0].gateway, "dev", network.paths[0].link],
            ]
        }
        for step in steps {
            if let failure = failure(running: step) {
                network.remove()
                throw NetworkError(message: failure)
            }
        }
        return network
    }

    /// Removes both namespaces (the veth pairs and the nft table go with them). Idempotent.
    func remove() {
        guard !removed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        _ = Self.run(["ip", "netns", "del", clientNamespace])
        _ = Self.run(["ip", "netns", "del", serverNamespace])
        _ = Self.live.withLock { $0.removeValue(forKey: ObjectIdentifier(self)) }
    }

    /// Removes every network this process made and has not removed yet.
    static func removeLeftovers() {
        let networks = live.withLock { Array($0.values) }
        for network in networks { network.remove() }
    }

    // MARK: faults

    /// Takes the client's end of the link down (its routes go with it).
    func takeClientLinkDown() throws {
        try setLink(paths[0], up: false)
    }

    /// Takes the client's end of `path` up or down (the kernel drops the IPv4 routes over
    /// a link that goes down; they do not come back with it).
    func setLink(_ path: Path, up: Bool) throws {
        try Self.check(["ip", "-n", clientNamespace, "link", "set", path.link, up ? "up" : "down"])
    }

    /// Points the client's default route at `path` (`ip route replace`: it moves the
    /// route if there is one, adds it if not).
    func routeDefault(via path: Path) throws {
        try Self.check(["ip", "-n", clientNamespace, familyOption, "route", "replace", "default", "via", path.gateway, "dev", path.link])
    }

    /// `ip`'s option for the family: `-4` or `-6`.
    private var familyOption: String {
        family == .ipv4 ? "-4" : "-6"
    }

    /// Adds `address` (a `/24` of `path`'s subnet) to the client's end of `path`, as a
    /// secondary address that is promoted to primary when the first one is removed (the
    /// link's `promote_secondaries` is set first; without it removing the primary address
    /// removes every other one of its subnet, and the routes over them, too).
    func addClientAddress(_ address: String, to path: Path) async throws {
        let setting = "/proc/sys/net/ipv4/conf/\(path.link)/promote_secondaries"
        let written = try await run(in: clientNamespace) { () -> Bool in
            // /proc/sys/net belongs to the network namespace of the thread that opens it.
            let fd = open(setting, O_WRONLY | O_CLOEXEC)
            guard fd >= 0 else { return false }
            defer { close(fd) }
            return write(fd, "1\n", 2) == 2
        }
        guard written else { throw NetworkError(message: "cannot write 1 to \(setting) in \(clientNamespace)") }
        try Self.check(["ip", "-n", clientNamespace, "addr", "add", "\(address)/24", "dev", path.link])
    }

    /// Removes `address` (a `/24`) from the client's end of `path`.
    func removeClientAddress(_ address: String, from path: Path) throws {
        try Self.check(["ip", "-n", clientNamespace, "addr", "del", "\(address)/24", "dev", path.link])
    }

    /// Runs `commands` (`ip` command lines without the `ip`, such as `link set X down`) in
    /// the client's namespace in one `ip -batch` process, so they follow each other
    /// within a few milliseconds.
    func batch(_ commands: [String]) throws {
        var template = Array("/tmp/sykit-batch-XXXXXX".utf8CString)
        let fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard fd >= 0 else { throw NetworkError(message: "cannot make a temporary file for `ip -batch`") }
        let path = String(decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
        defer { unlink(path) }
        let text = Array((commands.joined(separator: "\n") + "\n").utf8)
        let written = text.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        close(fd)
        guard written == text.count else { throw NetworkError(message: "cannot write the `ip -batch` file \(path)") }
        // `ip` names the failing line of the file, which is gone once this returns.
        if let failure = Self.failure(running: ["ip", "-n", clientNamespace, "-batch", path]) {
            throw NetworkError(message: failure + " (the batch, line by line: " + commands.joined(separator: "; ") + ")")
        }
    }

    /// Drops every packet to and from TCP `port` in the server's namespace, carrier up.
    func blackHole(port: Int) throws {
        try addTable()
        try nft(["add", "rule", "inet", "sykit", "in", "tcp", "dport", "\(port)", "drop"])
        try nft(["add", "rule", "inet", "sykit", "out", "tcp", "sport", "\(port)", "drop"])
    }

    /// Lets packets through again: removes the rules ``blackHole(port:)`` and
    /// ``injectReset(port:)`` added in the server's namespace.
    func liftBlackHole() throws {
        try nft(["delete", "table", "inet", "sykit"])
    }

    /// Answers every packet to TCP `port` in the server's namespace with a reset.
    func injectReset(port: Int) throws {
        try addTable()
        try nft(["add", "rule", "inet", "sykit", "in", "tcp", "dport", "\(port)", "reject", "with", "tcp", "reset"])
    }

    /// What ``breakLoopbackIPv6(port:_:)`` does to connects to `[::1]`.
    enum LoopbackFault: Sendable {
        /// Answered with an ICMPv6 address unreachable (the connect fails `EHOSTUNREACH`).
        case unreachable
        /// Dropped: the connect waits for its timeout.
        case blackHole
    }

    /// Breaks IPv6 loopback connects to TCP `port` in the client's namespace (an nft rule
    /// on its output hook); IPv4 loopback stays as it is.
    func breakLoopbackIPv6(port: Int, _ fault: LoopbackFault) throws {
        func clientNft(_ arguments: [String]) throws {
            try Self.check(["ip", "netns", "exec", clientNamespace, "nft"] + arguments)
        }
        try clientNft(["add", "table", "inet", "sykitc"])
        try clientNft(["add", "chain", "inet", "sykitc", "out", "{ type filter hook output priority 0; }"])
        let verdict = switch fault {
        case .unreachable: ["reject", "with", "icmpv6", "type", "addr-unreachable"]
        case .blackHole: ["drop"]
        }
        try clientNft(["add", "rule", "inet", "sykitc", "out", "ip6", "daddr", "::1", "tcp", "dport", "\(port)"] + verdict)
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
        try await run(in: namespace) { try backend.make(configuration) }
    }

    /// Runs `make` on a new thread that entered `namespace` and returns what it made:
    /// sockets it opens and threads it starts (a transport's loops, a netlink monitor's
    /// socket and thread) belong to that namespace.
    func run<T: Sendable>(in namespace: String, _ make: @escaping @Sendable () throws -> T) async throws -> T {
        try await NetworkNamespace.run(in: namespace, make)
    }

    // MARK: running tools

    struct NetworkError: Error, CustomStringConvertible {
        var message: String
        var description: String { message }
    }

    /// Runs a tool (``failure(running:)``) and throws its failure, saying the command, its
    /// exit status and what it wrote on standard error.
    static func check(_ arguments: [String]) throws {
        if let failure = failure(running: arguments) { throw NetworkError(message: failure) }
    }

    /// Runs a tool with `arguments` (no shell); whether it exited 0.
    @discardableResult
    static func run(_ arguments: [String]) -> Bool {
        failure(running: arguments) == nil
    }

    /// Runs a tool with `arguments` (no shell), its standard output discarded and its
    /// standard error kept; `nil` when it exited 0, otherwise why not, in a sentence that
    /// names the command and gives the tool's own words: "`ip -n sykit-c-1-1 -batch
    /// /tmp/sykit-batch-x` failed with exit status 1: Error: … (its standard error)".
    /// Bounded: these tools do not block, their standard error is read to its end (the
    /// first 4 KiB kept) and the child is waited for.
    static func failure(running arguments: [String]) -> String? {
        let command = "`\(arguments.joined(separator: " "))`"
        guard let path = tool(arguments[0]) else {
            return "\(command) failed: \(arguments[0]) is not installed (looked in /usr/sbin, /sbin, /usr/bin and /bin)"
        }
        var ends: [Int32] = [-1, -1]
        guard pipe(&ends) == 0 else {
            return "\(command) was not run: no pipe for its standard error: \(errorText(errno))"
        }
        let (readEnd, writeEnd) = (ends[0], ends[1])
        // Glibc's module has no pipe2; the kit starts its tools from one task at a time.
        _ = fcntl(readEnd, F_SETFD, FD_CLOEXEC)
        _ = fcntl(writeEnd, F_SETFD, FD_CLOEXEC)
        defer { close(readEnd) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        // dup2 clears close-on-exec on the child's 2; both pipe ends close at its exec.
        posix_spawn_file_actions_adddup2(&actions, writeEnd, 2)
        var argv: [UnsafeMutablePointer<CChar>?] = ([path] + arguments.dropFirst()).map { strdup($0) }
        argv.append(nil)
        defer { for pointer in argv { free(pointer) } }
        var pid = pid_t()
        let spawned = posix_spawn(&pid, path, &actions, nil, argv, environ)
        close(writeEnd)
        guard spawned == 0 else { return "\(command) failed: cannot start \(path): \(errorText(spawned))" }

        var said: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 1024)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(readEnd, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            if count <= 0 { break }
            if said.count < 4096 { said += buffer[..<min(count, 4096 - said.count)] }
        }
        var status: CInt = 0
        while waitpid(pid, &status, 0) < 0 {
            if errno != EINTR { return "\(command): cannot wait for it: \(errorText(errno))" }
        }
        let words = String(decoding: said, as: UTF8.self)
            .split(whereSeparator: \.isNewline)
            .map { $0.drop(while: { $0 == " " || $0 == "\t" }) }.filter { !$0.isEmpty }
            .joined(separator: " / ")
        let stderrText = words.isEmpty ? " (nothing on standard error)" : ": \(words)"
        // WIFSIGNALED: the low 7 bits are the signal; WEXITSTATUS: the next 8 bits.
        let signal = status & 0x7f
        if signal != 0 { return "\(command) was killed by signal \(signal)\(stderrText)" }
        let exitStatus = (status >> 8) & 0xff
        if exitStatus != 0 { return "\(command) failed with exit status \(exitStatus)\(stderrText)" }
        return nil
    }

    private static func errorText(_ code: Int32) -> String {
        guard let text = strerror(code) else { return "errno \(code)" }
        return String(cString: text)
    }
}

