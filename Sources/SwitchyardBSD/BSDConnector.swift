import Glibc
import Switchyard
import SwitchyardBackendKit
import Synchronization
import SwitchyardPosix

/// One nonblocking connect attempt to one address, on one loop.
///
/// It ends exactly once: connected (a ``BSDConnection``), failed (the mapped errno), timed
/// out (`deadlineExceeded`/`connect timeout`), cancelled (`cancelled`/`task cancelled`)
/// or ended by shutdown (`cancelled`/`shutdown`). Whatever ends it closes its descriptor
/// unless a connection took it over.
///
/// Safety of `@unchecked Sendable`: all state but `cancelRequested` is touched only on
/// `loop`.
final class BSDConnector: PendingConnect, Selectable, LoopBoundResource, @unchecked Sendable {
    let loop: EpollEventLoop
    private let address: SystemSocketAddress
    private let timeout: Duration
    private let registry: TransportLifecycle<EpollEventLoop>
    private let stall: StallMonitors?
    private var continuation: CheckedContinuation<BSDConnection, any Error>?
    private var socket: Socket?
    private var registered = false
    private var timer: LoopTimer?
    private let cancelRequested = Atomic<Bool>(false)

    init(loop: EpollEventLoop, address: SystemSocketAddress, timeout: Duration, registry: TransportLifecycle<EpollEventLoop>, stall: StallMonitors?) {
        self.loop = loop
        self.address = address
        self.timeout = timeout
        self.registry = registry
        self.stall = stall
    }

    /// Connects; the result arrives through the continuation.
    func start(_ continuation: CheckedContinuation<BSDConnection, any Error>) {
        if !loop.submit({ self.begin(continuation) }) {
            continuation.resume(throwing: TransportError.transportShutdown())
        }
    }

    /// Asks the pending connect to end with `cancelled`/`task cancelled`. Any thread.
    func cancel() {
        cancelRequested.store(true, ordering: .releasing)
        loop.execute {
            self.finish(.failure(TransportError(code: .cancelled, reason: .taskCancelled, message: "the connect to \(self.address) was cancelled")))
        }
    }

    private func begin(_ continuation: CheckedContinuation<BSDConnection, any Error>) {
        self.continuation = continuation
        if cancelRequested.load(ordering: .acquiring) {
            finish(.failure(TransportError(code: .cancelled, reason: .taskCancelled, message: "the connect to \(address) was cancelled")))
            return
        }
        guard registry.insert(self) else {
            finish(.failure(.transportShutdown()))
            return
        }
        let fd: CInt
        do {
            fd = try Posix.socket(family: address.family, type: Posix.streamSocket)
        } catch {
            finish(.failure(ErrnoTable.error(error, while: "opening a socket for \(address)")))
            return
        }
        socket = Socket(takingOwnershipOf: fd)
        do {
            try Posix.setNoDelay(fd)
            // Without them the connection still works; the sweep still watches it.
            try? stall?.settings.apply(to: fd)
            switch try Posix.connect(fd, address) {
            case .done:
                connected()
            case .wouldBlock:
                try loop.register(fd, events: Posix.Events.output, object: self)
                registered = true
                timer = loop.schedule(after: timeout) { [self] in
                    finish(.failure(TransportError(
                        code: .deadlineExceeded, reason: .connectTimeout,
                        message: "connecting to \(address) took longer than \(timeout)")))
                }
            }
        } catch {
            finish(.failure(ErrnoTable.error(error, while: "connecting to \(address)")))
        }
    }

    func handleEvents(_ events: UInt32) {
        guard let fd = socket?.descriptor else { return }
        let code: CInt
        do {
            code = try Posix.socketError(fd)
        } catch {
            finish(.failure(ErrnoTable.error(error, while: "connecting to \(address)")))
            return
        }
        if code != 0 {
            finish(.failure(ErrnoTable.error(errno: code, message: "connecting to \(address)")))
        } else {
            connected()
        }
    }

    func terminate(with error: TransportError) {
        finish(.failure(error))
    }

    private func connected() {
        guard let fd = socket?.descriptor else { return }
        if registered {
            loop.deregister(fd)
            registered = false
        }
        let local: SystemSocketAddress
        do {
            local = try Posix.localAddress(fd)
        } catch {
            finish(.failure(ErrnoTable.error(error, while: "reading the local address")))
            return
        }
        let connection = BSDConnection(socket: socket.take()!, loop: loop, local: local, remote: address, lifecycle: registry, stall: stall)
        registry.remove(self)
        do {
            try connection.activate()
            finish(.success(connection))
        } catch {
            finish(.failure(error))
        }
    }

    private func finish(_ result: Result<BSDConnection, TransportError>) {
        guard let continuation else { return }
        self.continuation = nil
        timer?.cancel()
        timer = nil
        if let fd = socket?.descriptor, registered {
            loop.deregister(fd)
            registered = false
        }
        socket.take()?.close()
        registry.remove(self)
        continuation.resume(with: result.mapError { $0 as any Error })
    }
}
