import CLibUV
import Switchyard
import SwitchyardBackendKit
import Synchronization

/// A listening `uv_tcp_t` on one loop; accepted connections are spread round-robin over
/// every loop of the transport. See ``Listener`` for the contract.
///
/// **Hand-off.** libuv cannot move a handle between loops (`uv_accept` asserts both
/// handles share one), so each connection is accepted with `uv_accept` into a handle on
/// the listener's loop; when the round-robin picks another loop, the descriptor is
/// duplicated (`F_DUPFD_CLOEXEC`), the listener-side handle is closed (which closes the
/// original descriptor at once), and the target loop adopts the duplicate with
/// `uv_tcp_open`. One listening socket keeps `EADDRINUSE` and the accept order exact
/// (one listener per loop with `SO_REUSEPORT` would let a second listen on the port
/// succeed, and spread by hash, not round-robin). A connection that stays on the
/// listener's loop is used as accepted, with no duplicate.
///
/// **Close** acts at once from any thread: it shuts the listening socket's read side
/// down (`shutdown(SHUT_RD)` on the `uv_fileno` descriptor), which on Linux stops the
/// listener (new connects are refused); the loop then closes the handle. A mutex over
/// "the descriptor is open" keeps that shutdown from ever reaching a descriptor the loop
/// already closed (and the kernel perhaps reused).
///
/// Safety of `@unchecked Sendable`: `tcp` and `keepAlive` are touched only on `loop`;
/// `closing` is atomic and `descriptorOpen` a mutex; the rest is immutable.
final class UVListener: Listener, @unchecked Sendable {
    let localAddress: Endpoint
    /// The local address of every accepted connection, when the listener is bound to one
    /// address (not a wildcard): it saves a getsockname per accept.
    /// Kept as the socket address: a connection formats it only when asked.
    private let acceptedLocal: SystemSocketAddress?
    let connections = AcceptedConnections()
    var backendName: String { "libuv" }

    let loop: UVEventLoop
    private let group: UVEventLoopGroup
    private let registry: TransportLifecycle<UVEventLoop>
    private let settings: UVSocketSettings
    private let fd: Int32
    private var tcp: UnsafeMutablePointer<uv_tcp_t>?
    private var keepAlive: UVListener?
    private let closing = Atomic<Bool>(false)
    private let descriptorOpen = Mutex(true)

    private init(
        tcp: UnsafeMutablePointer<uv_tcp_t>, fd: Int32, local: SystemSocketAddress, loop: UVEventLoop,
        group: UVEventLoopGroup, registry: TransportLifecycle<UVEventLoop>, settings: UVSocketSettings
    ) {
        self.tcp = tcp
        self.fd = fd
        self.localAddress = local.endpoint
        self.acceptedLocal = local.isUnspecified ? nil : local
        self.loop = loop
        self.group = group
        self.registry = registry
        self.settings = settings
        tcp.pointee.data = Unmanaged.passUnretained(self).toOpaque()
        keepAlive = self
    }

    /// Binds and listens on `loop`. Call on the loop.
    static func open(
        address: SystemSocketAddress, backlog: Int, loop: UVEventLoop, group: UVEventLoopGroup,
        registry: TransportLifecycle<UVEventLoop>, settings: UVSocketSettings
    ) throws(TransportError) -> UVListener {
        loop.assertInLoop()
        let tcp = UnsafeMutablePointer<uv_tcp_t>.allocate(capacity: 1)
        let initStatus = uv_tcp_init(loop.loop, tcp)
        guard initStatus == 0 else {
            tcp.deallocate()
            throw UVErrorTable.error(initStatus, "opening a listening socket")
        }
        func fail(_ status: Int32, _ what: String) -> TransportError {
            uv_close(csy_uv_tcp_handle(tcp), uvFreeHandleOnClose)
            return UVErrorTable.error(status, "\(what) \(address)")
        }
        // libuv sets SO_REUSEADDR; an address in use shows at bind or at listen.
        let bindStatus = address.withSockaddr { pointer, _ in uv_tcp_bind(tcp, pointer, 0) }
        if bindStatus < 0 { throw fail(bindStatus, "binding") }
        let local: SystemSocketAddress
        switch SystemSocketAddress.read({ uv_tcp_getsockname(tcp, $0, $1) }) {
        case .success(let address): local = address
        case .failure(let status): throw fail(status.code, "reading the address of")
        }
        let fd = csy_uv_tcp_fileno(tcp)
        if fd < 0 { throw fail(fd, "reading the descriptor of") }
        let listener = UVListener(
            tcp: tcp, fd: fd, local: local, loop: loop, group: group, registry: registry, settings: settings)
        let status = uv_listen(csy_uv_tcp_stream(tcp), Int32(clamping: backlog), { server, status in
            let listener = Unmanaged<UVListener>.fromOpaque(server!.pointee.data).takeUnretainedValue()
            listener.accept(status)
            listener.loop.drainDeferred()
        })
        if status < 0 {
            listener.closing.store(true, ordering: .releasing)
            listener.release()
            throw UVErrorTable.error(status, "listening on \(address)")
        }
        return listener
    }

    func close() {
        guard !closing.exchange(true, ordering: .acquiringAndReleasing) else { return }
        // Stops the kernel accepting now; the descriptor stays open until the loop closes it.
        descriptorOpen.withLock { open in
            if open { _ = csy_uv_shutdown_read(fd) }
        }
        connections.finish()
        loop.submit({ self.release() }, otherwise: {})
        registry.listenerClosed(self)
    }

    /// Closes the handle (and with it the descriptor). Call on the loop.
    private func release() {
        guard let tcp else { return }
        self.tcp = nil
        descriptorOpen.withLock { open in
            open = false
            uv_close(csy_uv_tcp_handle(tcp), uvFreeHandleOnClose)
        }
        keepAlive = nil
        connections.finish()
    }

    // MARK: accepting

    private func accept(_ status: Int32) {
        guard let tcp else { return }
        if status < 0 {
            // After close(), accept fails (the socket no longer listens); libuv would
            // retry at once for ever, so end it here. Other errors concern one incoming
            // connection (EMFILE is handled by libuv, which drops pending ones).
            if closing.load(ordering: .acquiring) { release() }
            return
        }
        let client = UnsafeMutablePointer<uv_tcp_t>.allocate(capacity: 1)
        guard uv_tcp_init(loop.loop, client) == 0 else {
            client.deallocate()
            return
        }
        guard uv_accept(csy_uv_tcp_stream(tcp), csy_uv_tcp_stream(client)) == 0 else {
            uv_close(csy_uv_tcp_handle(client), uvFreeHandleOnClose)
            return
        }
        if closing.load(ordering: .acquiring) {
            uv_close(csy_uv_tcp_handle(client), uvFreeHandleOnClose)
            return
        }
        let target = group.next()
        let registry = self.registry
        let settings = self.settings
        let connections = self.connections
        let local = acceptedLocal
        if target === loop {
            Self.adopt(client, local: local, on: loop, registry: registry, settings: settings, connections: connections)
            return
        }
        let copy = csy_uv_dup_cloexec(csy_uv_tcp_fileno(client))
        uv_close(csy_uv_tcp_handle(client), uvFreeHandleOnClose)
        guard copy >= 0 else { return }
        target.submit({
            let tcp = UnsafeMutablePointer<uv_tcp_t>.allocate(capacity: 1)
            guard uv_tcp_init(target.loop, tcp) == 0 else {
                tcp.deallocate()
                _ = csy_uv_close_fd(copy)
                return
            }
            guard uv_tcp_open(tcp, copy) == 0 else {
                uv_close(csy_uv_tcp_handle(tcp), uvFreeHandleOnClose)
                _ = csy_uv_close_fd(copy)
                return
            }
            Self.adopt(tcp, local: local, on: target, registry: registry, settings: settings, connections: connections)
        }, otherwise: {
            _ = csy_uv_close_fd(copy)
        })
    }

    /// Makes a connection of an accepted handle on `loop` and hands it to the user.
    /// `knownLocal` is its local address when the listener's own tells it (else it is read).
    private static func adopt(
        _ tcp: UnsafeMutablePointer<uv_tcp_t>, local knownLocal: SystemSocketAddress?, on loop: UVEventLoop,
        registry: TransportLifecycle<UVEventLoop>, settings: UVSocketSettings, connections: AcceptedConnections
    ) {
        settings.apply(to: tcp)
        let local = knownLocal ?? (try? SystemSocketAddress.read({ uv_tcp_getsockname(tcp, $0, $1) }).get())
        guard let local, case .success(let remote) = SystemSocketAddress.read({ uv_tcp_getpeername(tcp, $0, $1) }) else {
            uv_close(csy_uv_tcp_handle(tcp), uvFreeHandleOnClose)
            return
        }
        let connection = UVConnection(
            tcp: tcp, loop: loop, local: local, remote: remote, lifecycle: registry,
            stallDetection: settings.stall != nil)
        guard connection.activate(accepted: true) else { return }
        if !connections.yield(connection) { connection.close() }
    }
}
