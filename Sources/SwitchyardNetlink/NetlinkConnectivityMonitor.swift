import Glibc
public import Logging
public import Switchyard
import Synchronization
import SwitchyardPosix

/// The Linux connectivity monitor: it follows rtnetlink (links, IPv4 and IPv6 addresses
/// and routes) and reports the category of the interface that carries the default route.
///
/// ## What counts
/// The path is the interface of a default route (IPv4 or IPv6, destination length 0,
/// unicast) in the main table whose interface is up and has a carrier; of several, the
/// lowest metric wins (ties: IPv4, then the lower interface index). The interface is
/// classified by the `classify` function, by default ``InterfaceClassifier/classify(name:)``
/// (sysfs hints, then name patterns). No such route: ``ConnectivityCategory/none``.
/// The path also lists that interface's addresses (``ConnectivityPath/addresses``, IPv6
/// link-local ones left out), so a move of the default route to another interface of
/// the same category, and an address of the path that goes away, are changes a
/// ``CallChannel`` sees as path changes (``PathChange``); an address added to that interface
/// is a change too (no connection ends for it).
///
/// ## Timing
/// `init` subscribes, then reads the tables (a dump of links, addresses and routes) before
/// it returns, so ``current`` is right at once. Notifications are debounced (see
/// ``ConnectivityStateMachine/Configuration``): with the defaults a change is reported
/// about 50 ms after the last message of its burst, and a flap of 10 link toggles within
/// 50 ms is at most two reported changes. Address removals are debounced the same way.
/// After a link goes down or an address goes away,
/// the kernel flushes IPv4 routes without announcing it, so the monitor reads the tables
/// again before it reports such a burst.
///
/// ## Threads and namespaces
/// The socket runs on a thread of its own, started by `init`; observers are called on it,
/// one change at a time. Both the socket and the thread belong to the network namespace of
/// the thread that calls `init`: to watch a namespace, make the monitor on a thread that
/// entered it (`setns(2)`). (sysfs hints come from the process's sysfs mount, see
/// ``InterfaceClassifier``.)
///
/// ## Logs and metrics
/// Each reported change is logged to `logger` (`notice` when the category changes,
/// `info` for another path in the same category) and counted in
/// `switchyard_connectivity_changes_total`: see ``ConnectivityChangeReporting``.
///
/// ## Shutdown
/// ``close()`` (or the last reference going away) stops the thread and closes both
/// descriptors before it returns; afterwards ``current`` keeps the last path and no
/// observer is called. Closing from inside an observer is allowed: the thread then ends
/// (and closes its descriptors) as soon as the observer returns.
public final class NetlinkConnectivityMonitor: ConnectivityMonitor {
    private let observers: ConnectivityObservers
    /// The worker thread while it runs; nil once stopped.
    private let thread: Mutex<pthread_t?>
    /// Wakes the worker to stop. Closed by the worker thread as it ends.
    private let wakeFD: CInt

    /// Starts monitoring the network namespace of the calling thread.
    ///
    /// - Parameters:
    ///   - debounce: How long the tables must be quiet before a burst of notifications is
    ///     reported as one change (default 50 ms).
    ///   - maximumDelay: The longest a change is held back while notifications keep
    ///     coming (default 500 ms).
    ///   - classify: The category of an interface, by name.
    ///   - logger: Where the changes are logged (``ConnectivityChangeReporting``); by
    ///     default nowhere.
    /// - Throws: A ``TransportError`` when the netlink socket cannot be opened or bound,
    ///   or the tables cannot be read (for example `permissionDenied` where netlink is
    ///   closed to the process, as for Android apps: use ``ManualConnectivityMonitor``).
    public init(
        debounce: Duration = .milliseconds(50),
        maximumDelay: Duration = .milliseconds(500),
        classify: @escaping @Sendable (String) -> ConnectivityCategory = InterfaceClassifier.classify(name:),
        logger: Logger = TransportConfiguration.disabledLogger
    ) throws(TransportError) {
        let reporting = ConnectivityChangeReporting(monitor: "netlink", logger: logger)
        var machine = ConnectivityStateMachine(
            configuration: .init(debounce: debounce, maximumDelay: maximumDelay), classify: classify)
        let socket: CInt
        let wake: CInt
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: NetlinkWorker.bufferSize, alignment: 16)
        var dump = NetlinkDump()
        let initial: ConnectivityPath
        do {
            // Subscribe before the dump, so no change falls between the two; replaying a
            // notification the dump already shows changes nothing.
            socket = try NetlinkSystem.openRouteSocket(groups: RT.monitorGroups)
            NetlinkSystem.enlargeReceiveBuffer(socket, bytes: 1 << 20)
        } catch {
            buffer.deallocate()
            throw ErrnoTable.error(error, while: "opening a netlink socket")
        }
        do {
            wake = try Posix.eventfdCreate()
        } catch {
            try? Posix.close(socket)
            buffer.deallocate()
            throw ErrnoTable.error(error, while: "creating the netlink monitor's wake-up descriptor")
        }
        do {
            initial = machine.load(try dump.snapshot(buffer: buffer))
        } catch {
            try? Posix.close(socket)
            try? Posix.close(wake)
            buffer.deallocate()
            throw ErrnoTable.error(error, while: "reading links, addresses and routes over netlink")
        }
        let observers = ConnectivityObservers(initial: initial)
        reporting.started(initial)
        let worker = NetlinkWorker(
            socket: socket, wake: wake, buffer: buffer, machine: machine, dump: dump, observers: observers,
            reporting: reporting)
        let handle: pthread_t
        do {
            handle = try NetlinkSystem.startThread(name: "sy-netlink") { worker.run() }
        } catch {
            worker.closeDescriptors()
            throw ErrnoTable.error(errno: error.errno, message: "starting the netlink monitor thread")
        }
        self.observers = observers
        self.wakeFD = wake
        self.thread = Mutex(handle)
    }

    deinit {
        close()
    }

    public var current: ConnectivityPath { observers.current }

    public func observe(_ observer: @escaping @Sendable (ConnectivityPath) -> Void) -> ConnectivityObservation {
        observers.observe(observer)
    }

    /// Stops monitoring: ends the thread and closes the descriptors. Idempotent.
    public func close() {
        guard let handle = thread.withLock({ thread in
            defer { thread = nil }
            return thread
        }) else { return }
        // The worker closes `wakeFD` only after it saw this signal, so it is still open.
        try? Posix.eventfdSignal(wakeFD)
        if NetlinkSystem.isCurrentThread(handle) {
            NetlinkSystem.detach(handle)
        } else {
            NetlinkSystem.join(handle)
        }
    }
}

/// The monitor's thread: reads notifications, feeds the state machine, performs its
/// actions. Everything here is confined to that thread once `run` starts (the monitor
/// keeps only the thread handle and the wake descriptor), so it needs no lock.
private final class NetlinkWorker {
    /// Large enough for any rtnetlink datagram (the kernel's dump messages stay within
    /// 32 KiB).
    static let bufferSize = 64 * 1024
    static let datagramsPerWakeup = 64

    private let socket: CInt
    private let wake: CInt
    private let buffer: UnsafeMutableRawBufferPointer
    private var machine: ConnectivityStateMachine
    private var dump: NetlinkDump
    private let observers: ConnectivityObservers
    private let reporting: ConnectivityChangeReporting
    private let origin = ContinuousClock.now
    /// When the state machine wants `timerFired`, if it does.
    private var deadline: Duration?

    init(
        socket: CInt, wake: CInt, buffer: UnsafeMutableRawBufferPointer, machine: ConnectivityStateMachine,
        dump: NetlinkDump, observers: ConnectivityObservers, reporting: ConnectivityChangeReporting
    ) {
        self.reporting = reporting
        self.socket = socket
        self.wake = wake
        self.buffer = buffer
        self.machine = machine
        self.dump = dump
        self.observers = observers
    }

    private var now: Duration { ContinuousClock.now - origin }

    func run() {
        defer { closeDescriptors() }
        while true {
            let timeout = deadline.map { Self.milliseconds(until: $0, from: now) } ?? -1
            let readable: [Bool]
            do {
                readable = try NetlinkSystem.waitReadable([socket, wake], timeoutMilliseconds: timeout)
            } catch {
                return  // poll fails only on a bad descriptor or no memory: nothing to wait on.
            }
            if readable[1] { return }  // close()
            if readable[0], !readNotifications() { return }
            if let deadline, now >= deadline {
                self.deadline = nil
                perform(machine.timerFired(at: now))
            }
        }
    }

    /// Reads the queued datagrams, at most `datagramsPerWakeup` of them so that a storm
    /// of notifications cannot hold off the timer; false when the socket failed for good.
    private func readNotifications() -> Bool {
        for _ in 0..<Self.datagramsPerWakeup {
            let result: IOResult<Int>
            do {
                result = try NetlinkSystem.receive(socket, into: buffer)
            } catch where error.errno == ENOBUFS || error.errno == EMSGSIZE {
                // Notifications were lost: read the tables again.
                perform(machine.receive(.overrun, at: now))
                continue
            } catch {
                return false
            }
            guard case .done(let length) = result else { return true }
            for message in NetlinkParser.messages(in: UnsafeRawBufferPointer(rebasing: buffer[..<length])) {
                if message.type == RT.overrun {
                    perform(machine.receive(.overrun, at: now))
                    continue
                }
                for event in NetlinkParser.events(from: message) {
                    perform(machine.receive(event, at: now))
                }
            }
        }
        return true
    }

    private func perform(_ action: ConnectivityStateMachine.Action) {
        switch action {
        case .none:
            break
        case .armTimer(let deadline):
            self.deadline = deadline
        case .resynchronize:
            let next: ConnectivityStateMachine.Action
            do {
                let snapshot = try dump.snapshot(buffer: buffer)
                next = machine.resynchronized(snapshot, at: now)
            } catch {
                next = machine.resynchronizationFailed(at: now)
            }
            perform(next)
        case .report(let path):
            let reporting = self.reporting
            observers.update(path) { previous in reporting.changed(from: previous, to: path) }
        }
    }

    func closeDescriptors() {
        try? Posix.close(socket)
        try? Posix.close(wake)
        buffer.deallocate()
    }

    /// A poll timeout in whole milliseconds, rounded up so the timer never fires early.
    static func milliseconds(until deadline: Duration, from now: Duration) -> CInt {
        guard deadline > now else { return 0 }
        let (seconds, attoseconds) = (deadline - now).components
        let milliseconds = seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000
        return CInt(clamping: milliseconds)
    }
}
