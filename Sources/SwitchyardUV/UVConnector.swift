import CLibUV
import Glibc
import Switchyard
import SwitchyardBackendKit
import Synchronization

/// One connect attempt to one address, on one loop: `uv_tcp_connect`. (Name resolution
/// and the choice among several addresses are the toolkit's: ``HappyEyeballs``.)
///
/// It ends exactly once: connected (a ``UVConnection``), failed (the mapped libuv code),
/// timed out (`deadlineExceeded`/`connect timeout`), cancelled (`cancelled`/`task
/// cancelled`) or ended by shutdown (`cancelled`/`shutdown`). Whatever ends it closes its
/// handles unless a connection took the TCP handle over.
///
/// Every libuv request it makes retains it until the request's callback, which always
/// comes (with `UV_ECANCELED` for a connect it abandoned).
///
/// Safety of `@unchecked Sendable`: all state but `cancelRequested` (atomic) is touched
/// only on `loop`; the rest is immutable.
final class UVConnector: PendingConnect, LoopBoundResource, @unchecked Sendable {
    let loop: UVEventLoop
    private let address: SystemSocketAddress
    private let timeout: Duration
    private let registry: TransportLifecycle<UVEventLoop>
    private let settings: UVSocketSettings
    private var continuation: CheckedContinuation<UVConnection, any Error>?
    private var keepAlive: UVConnector?
    private var tcp: UnsafeMutablePointer<uv_tcp_t>?
    private var attempt = 0
    private var timer: UnsafeMutablePointer<uv_timer_t>?
    private let cancelRequested = Atomic<Bool>(false)

    init(loop: UVEventLoop, address: SystemSocketAddress, timeout: Duration, registry: TransportLifecycle<UVEventLoop>, settings: UVSocketSettings) {
        self.loop = loop
        self.address = address
        self.timeout = timeout
        self.registry = registry
        self.settings = settings
    }

    /// Connects; the result arrives through the continuation.
    func start(_ continuation: CheckedContinuation<UVConnection, any Error>) {
        loop.submit({ self.begin(continuation) }, otherwise: {
            continuation.resume(throwing: TransportError.transportShutdown())
        })
    }

    /// Asks the pending connect to end with `cancelled`/`task cancelled`. Any thread.
    func cancel() {
        cancelRequested.store(true, ordering: .releasing)
        loop.submit({ self.finish(.failure(self.cancelledError)) }, otherwise: {})
    }

    func terminate(with error: TransportError) {
        finish(.failure(error))
    }

    private var cancelledError: TransportError {
        TransportError(code: .cancelled, reason: .taskCancelled, message: "the connect to \(address) was cancelled")
    }

    private func begin(_ continuation: CheckedContinuation<UVConnection, any Error>) {
        self.continuation = continuation
        keepAlive = self
        if cancelRequested.load(ordering: .acquiring) {
            finish(.failure(cancelledError))
            return
        }
        guard registry.insert(self) else {
            finish(.failure(.transportShutdown()))
            return
        }
        startTimer()
        guard self.continuation != nil else { return }
        connect()
    }

    private func startTimer() {
        let timer = UnsafeMutablePointer<uv_timer_t>.allocate(capacity: 1)
        let status = uv_timer_init(loop.loop, timer)
        guard status == 0 else {
            timer.deallocate()
            finish(.failure(UVErrorTable.error(status, "starting the connect timer for \(address)")))
            return
        }
        self.timer = timer
        timer.pointee.data = Unmanaged.passUnretained(self).toOpaque()
        uv_timer_start(timer, { timer in
            let connector = Unmanaged<UVConnector>.fromOpaque(timer!.pointee.data).takeUnretainedValue()
            connector.finish(.failure(TransportError(
                code: .deadlineExceeded, reason: .connectTimeout,
                message: "connecting to \(connector.address) took longer than \(connector.timeout)")))
            connector.loop.drainDeferred()
        }, UInt64(StallSettings.milliseconds(timeout)), 0)
    }

    // MARK: connecting

    private func connect() {
        attempt += 1
        let tcp = UnsafeMutablePointer<uv_tcp_t>.allocate(capacity: 1)
        let initStatus = uv_tcp_init(loop.loop, tcp)
        guard initStatus == 0 else {
            tcp.deallocate()
            finish(.failure(UVErrorTable.error(initStatus, "opening a socket for \(address)")))
            return
        }
        self.tcp = tcp
        let request = UnsafeMutablePointer<uv_connect_t>.allocate(capacity: 1)
        request.pointee.data = Unmanaged.passRetained(Attempt(connector: self, number: attempt)).toOpaque()
        let status = address.withSockaddr { sockaddr, _ in
            uv_tcp_connect(request, tcp, sockaddr, { request, status in
                let attempt = Unmanaged<Attempt>.fromOpaque(request!.pointee.data).takeRetainedValue()
                request!.deallocate()
                attempt.connector.connected(attempt: attempt.number, status: status)
                attempt.connector.loop.drainDeferred()
            })
        }
        if status < 0 {
            Unmanaged<Attempt>.fromOpaque(request.pointee.data).release()
            request.deallocate()
            failed(UVErrorTable.error(status, "connecting to \(address)"))
        }
    }

    /// Ties a connect callback to the attempt it belongs to (and retains the connector).
    private final class Attempt {
        let connector: UVConnector
        let number: Int
        init(connector: UVConnector, number: Int) {
            self.connector = connector
            self.number = number
        }
    }

    private func connected(attempt number: Int, status: Int32) {
        // A callback for an attempt that was abandoned (UV_ECANCELED when its handle closed).
        guard continuation != nil, number == attempt, let tcp else { return }
        guard status == 0 else {
            failed(UVErrorTable.error(status, "connecting to \(address)"))
            return
        }
        settings.apply(to: tcp)
        let local: SystemSocketAddress
        switch SystemSocketAddress.read({ uv_tcp_getsockname(tcp, $0, $1) }) {
        case .success(let address): local = address
        case .failure(let status):
            finish(.failure(UVErrorTable.error(status.code, "reading the local address")))
            return
        }
        let remote = (try? SystemSocketAddress.read({ uv_tcp_getpeername(tcp, $0, $1) }).get()) ?? address
        self.tcp = nil
        let connection = UVConnection(
            tcp: tcp, loop: loop, local: local, remote: remote, lifecycle: registry,
            stallDetection: settings.stall != nil)
        registry.remove(self)
        if connection.activate(accepted: false) {
            finish(.success(connection))
        } else {
            finish(.failure(.transportShutdown()))
        }
    }

    /// The attempt failed.
    private func failed(_ error: TransportError) {
        closeHandle()
        finish(.failure(error))
    }

    private func closeHandle() {
        guard let tcp else { return }
        self.tcp = nil
        uv_close(csy_uv_tcp_handle(tcp), uvFreeHandleOnClose)
    }

    private func finish(_ result: Result<UVConnection, TransportError>) {
        guard let continuation else { return }
        self.continuation = nil
        if let timer {
            self.timer = nil
            uv_close(csy_uv_timer_handle(timer), uvFreeHandleOnClose)
        }
        closeHandle()
        registry.remove(self)
        keepAlive = nil
        continuation.resume(with: result.mapError { $0 as any Error })
    }
}
