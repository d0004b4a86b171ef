import Glibc
import Switchyard
import SwitchyardBackendKit
import Synchronization

/// A listening Unix-domain socket, watched by one loop; accepted connections are spread
/// over every loop of the transport. See ``Listener`` for the contract.
///
/// ``close()`` acts at once from any thread: it shuts the socket's read side down (new
/// connects are refused from then on), removes the socket file if it is still the one
/// this listener made (same device and inode: a file another process put there since
/// is left alone), and ends ``connections``; the loop then closes the descriptor.
///
/// Safety of `@unchecked Sendable`: `socket`, `watch` and `paused` are touched only on
/// `loop`; `closing` is atomic; the rest is immutable.
final class UnixListener: Listener, UnixWatcher, @unchecked Sendable {
    let localAddress: Endpoint
    let connections = AcceptedConnections()
    var backendName: String { UnixTransport.backendName }

    private let loop: UnixEventLoop
    private let group: TransportEventLoopGroup<UnixEventLoop>
    private let lifecycle: TransportLifecycle<UnixEventLoop>
    private let fd: CInt
    private var socket: Socket?
    /// The socket file and which file it is; nil for an abstract name.
    private let file: (path: String, identity: FileIdentity)?
    private var watch: UInt64?
    private let closing = Atomic<Bool>(false)

    init(
        socket: consuming Socket, address: UnixAddress, file: FileIdentity?, loop: UnixEventLoop,
        group: TransportEventLoopGroup<UnixEventLoop>, lifecycle: TransportLifecycle<UnixEventLoop>
    ) {
        fd = socket.descriptor
        self.socket = .some(socket)
        localAddress = address.endpoint
        if let path = address.filePath, let file { self.file = (path, file) } else { self.file = nil }
        self.loop = loop
        self.group = group
        self.lifecycle = lifecycle
    }

    /// Starts watching for connects. Call on the loop.
    func start() throws(TransportError) {
        do {
            watch = try loop.watch(fd, events: UnixSystem.Events.input, by: self)
        } catch {
            throw ErrnoTable.error(error, while: "watching the listener on \(localAddress)")
        }
    }

    func close() {
        guard !closing.exchange(true, ordering: .acquiringAndReleasing) else { return }
        // Linux refuses connects to a Unix-domain listener whose read side is shut down.
        try? UnixSystem.shutdownRead(fd)
        if let file, (try? UnixSystem.fileIdentity(at: file.path)) == file.identity {
            try? UnixSystem.unlink(file.path)
        }
        connections.finish()
        if !loop.submit({ self.release() }) {
            // The loop has stopped: nothing else touches the socket now.
            socket.take()?.close()
        }
        lifecycle.listenerClosed(self)
    }

    private func release() {
        if let watch { loop.unwatch(fd, watch: watch) }
        watch = nil
        socket.take()?.close()
    }

    func handleEvents(_ events: UInt32) {
        guard !closing.load(ordering: .acquiring), socket != nil else { return }
        if case .outOfResources = acceptAvailable(on: fd, { socket, remote in hand(socket, remote: remote.endpoint) }) {
            pauseAccepting()
        }
    }

    /// Out of descriptors: stop watching for 100 ms rather than spin on the error.
    private func pauseAccepting() {
        guard let watch else { return }
        loop.unwatch(fd, watch: watch)
        self.watch = nil
        Task { [self] in
            try? await Task.sleep(for: .milliseconds(100))
            loop.execute {
                guard !self.closing.load(ordering: .acquiring), self.socket != nil, self.watch == nil else { return }
                try? self.start()
            }
        }
    }

    /// Makes the accepted socket a connection on the next loop, joins it to the transport
    /// there, and hands it over.
    private func hand(_ socket: consuming Socket, remote: Endpoint) {
        let target = group.next()
        let connection = UnixConnection(socket: socket, loop: target, local: localAddress, remote: remote, lifecycle: lifecycle)
        let connections = self.connections
        let activate: @Sendable () -> Void = {
            do {
                try connection.activate(accepted: true)
            } catch {
                return
            }
            if !connections.yield(connection) { connection.close() }
        }
        if target === loop {
            activate()
        } else if !target.submit(activate) {
            connection.abandon()
        }
    }
}
