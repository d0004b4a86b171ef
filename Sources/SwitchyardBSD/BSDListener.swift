import Glibc
import Switchyard
import SwitchyardBackendKit
import Synchronization
import SwitchyardPosix

/// A listening TCP socket on one loop; accepted connections are spread over every loop
/// of the transport. See ``Listener`` for the contract.
///
/// ``close()`` acts at once from any thread: it shuts the socket's read side down, which
/// on Linux stops the listener (new connects are refused), then the loop deregisters and
/// closes the descriptor.
///
/// Safety of `@unchecked Sendable`: `socket`, `pausedTimer` and `registered` are touched
/// only on `loop`; `closing` is atomic; the rest is immutable.
final class BSDListener: Listener, Selectable, @unchecked Sendable {
    let localAddress: Endpoint
    /// The local address of every accepted connection, when the listener is bound to one
    /// address (not a wildcard): it saves a getsockname per accept.
    private let acceptedLocal: SystemSocketAddress?
    let connections = AcceptedConnections()
    var backendName: String { "bsd" }

    private let loop: EpollEventLoop
    private let group: EpollEventLoopGroup
    private let registry: TransportLifecycle<EpollEventLoop>
    private let stall: StallMonitors?
    private let fd: CInt
    private var socket: Socket?
    private var registered = false
    private var paused = false
    private let closing = Atomic<Bool>(false)

    /// Binds and listens (it does not block); `start()` then begins accepting on `loop`.
    /// The transport makes it on `loop`, so the socket belongs to the loops' network
    /// namespace, like every socket of the transport.
    init(
        address: SystemSocketAddress, backlog: Int, loop: EpollEventLoop, group: EpollEventLoopGroup,
        registry: TransportLifecycle<EpollEventLoop>, stall: StallMonitors?
    ) throws(TransportError) {
        let fd: CInt
        do {
            fd = try Posix.socket(family: address.family, type: Posix.streamSocket)
        } catch {
            throw ErrnoTable.error(error, while: "opening a listening socket")
        }
        var socket: Socket? = Socket(takingOwnershipOf: fd)
        do {
            try Posix.setReuseAddress(fd)
            try Posix.bind(fd, address)
            try Posix.listen(fd, backlog: CInt(clamping: backlog))
            let bound = try Posix.localAddress(fd)
            self.localAddress = bound.endpoint
            self.acceptedLocal = bound.isUnspecified ? nil : bound
        } catch {
            socket.take()?.close()
            throw ErrnoTable.error(error, while: "listening on \(address)")
        }
        self.fd = fd
        self.socket = socket.take()
        self.loop = loop
        self.group = group
        self.registry = registry
        self.stall = stall
    }

    /// Registers with the loop. Call on the loop.
    func start() throws(TransportError) {
        do {
            try loop.register(fd, events: Posix.Events.input, object: self)
            registered = true
        } catch {
            throw ErrnoTable.error(error, while: "watching the listener on \(localAddress)")
        }
    }

    func close() {
        guard !closing.exchange(true, ordering: .acquiringAndReleasing) else { return }
        // Stops the kernel accepting now; the descriptor stays ours until the loop closes it.
        try? Posix.shutdown(fd, how: Posix.shutdownRead)
        connections.finish()
        if !loop.submit({ self.release() }) {
            // The loop has stopped, so nothing else touches the socket now.
            socket.take()?.close()
        }
        registry.listenerClosed(self)
    }

    private func release() {
        if registered { loop.deregister(fd) }
        registered = false
        socket.take()?.close()
        connections.finish()
    }

    func handleEvents(_ events: UInt32) {
        guard !closing.load(ordering: .acquiring), socket != nil, !paused else { return }
        if case .outOfResources = acceptAvailable(on: fd, { socket, remote in hand(socket, remote: remote) }) {
            pauseAccepting()
        }
    }

    /// Out of descriptors: stop accepting for a while rather than spin on the error.
    private func pauseAccepting() {
        paused = true
        try? loop.reregister(fd, events: 0)
        loop.schedule(after: .milliseconds(100)) { [self] in
            paused = false
            if registered { try? loop.reregister(fd, events: Posix.Events.input) }
        }
    }

    private func hand(_ socket: consuming Socket, remote: SystemSocketAddress) {
        let fd = socket.descriptor
        try? Posix.setNoDelay(fd)
        try? stall?.settings.apply(to: fd)
        guard let local = acceptedLocal ?? (try? Posix.localAddress(fd)) else {
            socket.close()
            return
        }
        let target = group.next()
        let connection = BSDConnection(socket: socket, loop: target, local: local, remote: remote, lifecycle: registry, stall: stall)
        let connections = self.connections
        let activate: @Sendable () -> Void = {
            do {
                try connection.activate(registeringAtOnce: false, accepted: true)
            } catch {
                return
            }
            if connections.yield(connection) {
                connection.finishActivation()
            } else {
                connection.close()
            }
        }
        if target === loop {
            activate()
        } else if !target.submit(activate) {
            connection.abandon()
        }
    }
}
