import Glibc
public import Switchyard
public import SwitchyardBackendKit
import Synchronization

/// The Unix-domain socket backend (`"unix"`): stream sockets for links between processes
/// on one machine, on epoll event loops (one thread per loop, one loop per core by
/// default), written on Switchyard's backend toolkit. Its endpoints are socket paths:
/// `Endpoint(unixPath: "/run/app.sock")` (`unix:/run/app.sock`), or `@name` for Linux's
/// abstract namespace. See ``Transport`` for the contract it keeps; where the Unix
/// domain differs:
///
/// - **connect** fails at once with `unavailable`/`refused` when nothing listens at the
///   path (`ECONNREFUSED`), no file is there (`ENOENT`), or the file is not a stream
///   socket. A listener whose backlog is full makes the connect wait (retried, with
///   growing pauses up to 50 ms) until the connect timeout. Each client socket gets a
///   name of its own in the abstract namespace from the kernel (autobind), so every
///   connection has a distinct ``Connection/localAddress`` (`unix:@0001f`), as TCP's
///   ephemeral ports give.
/// - **listen** makes the socket file. If a file is already at the path: a socket that
///   nobody listens on any more (left by a process that died) is removed and replaced;
///   a live socket, or a file that is not a socket, fails with `unavailable`/`address in
///   use` (a live listener is detected by connecting to it once, so it sees one
///   connection open and close). Closing the listener removes its socket file. The
///   folder must exist: `invalidArgument`/`invalid address` otherwise.
/// - **reset()** has no Unix-domain equivalent: it closes (see ``UnixConnection``).
/// - There is no stall monitor and no keepalive: a local link does not stall, and a
///   peer that dies is seen at once (end of stream, or `unavailable`/`reset`).
///   ``TransportConfiguration/stallTimeout`` is ignored.
/// - Nothing raises SIGPIPE: writes go out with `MSG_NOSIGNAL`.
///
/// The errors at connect and listen are in ``UnixErrors``; on an open connection they
/// are the toolkit's ``ErrnoTable``.
public final class UnixTransport: LifecycleTransport {
    /// The name the backend is registered under.
    public static let backendName = "unix"

    // doc-block begin (the guide to writing a backend shows this: SwitchyardConformance.docc)
    /// The registry entry: the `unix` backend on the `unix` network, listening for local
    /// tests on a fresh socket path (``temporaryEndpoint()``).
    public static let backend = TransportBackend(
        name: backendName, summary: "Unix-domain stream sockets on epoll event loops, for local links", usesSockets: true,
        network: "unix", localEndpoint: { UnixTransport.temporaryEndpoint() }, make: { try UnixTransport(configuration: $0) })
    // doc-block end

    public var name: String { Self.backendName }

    private let group: TransportEventLoopGroup<UnixEventLoop>
    private let lifecycle: TransportLifecycle<UnixEventLoop>

    /// Starts the transport's event loops.
    /// - Throws: `invalidArgument`/`invalid option` for settings out of range
    ///   (`TransportConfiguration.validate()`); a ``TransportError`` when a loop or its
    ///   thread cannot be made.
    public init(configuration: TransportConfiguration = TransportConfiguration()) throws(TransportError) {
        try configuration.validate()
        let count = configuration.eventLoopCount ?? UnixSystem.onlineCores()
        group = try TransportEventLoopGroup(count: count) { index throws(TransportError) in
            try UnixEventLoop(name: "sy-unix-\(index)")
        }
        // The toolkit logs and counts the connections' lives (connects, accepts, ends by
        // reason, bytes) through this observer, to the configuration's logger.
        lifecycle = TransportLifecycle(group: group, observer: TransportObserver(backend: Self.backendName, logger: configuration.logger))
    }

    /// The number of event loops (threads).
    public var eventLoopCount: Int { group.loops.count }

    /// A socket path nobody uses yet, fresh at each call, in the temporary folder
    /// (`$TMPDIR` when it leaves room for the name, else `/tmp`):
    /// `switchyard-unix-PID-N-RANDOM.sock`. For tests and the conformance kit.
    public static func temporaryEndpoint() -> Endpoint {
        let serial = temporarySerial.add(1, ordering: .relaxed).newValue
        let name = "switchyard-unix-\(getpid())-\(serial)-\(String(UInt32.random(in: 0...UInt32.max), radix: 16)).sock"
        var folder = "/tmp"
        if let value = getenv("TMPDIR"), case let tmp = String(cString: value), !tmp.isEmpty,
           tmp.utf8.count + 1 + name.utf8.count <= Endpoint.maximumPathLength {
            folder = tmp.hasSuffix("/") ? String(tmp.dropLast()) : tmp
        }
        return Endpoint(unixPath: "\(folder)/\(name)")
    }
    private static let temporarySerial = Atomic<Int>(0)

    // MARK: connect

    public func connect(to endpoint: Endpoint, options: ConnectOptions) async throws -> any Connection {
        try await lifecycle.observingConnect(to: endpoint) { try await connectNow(to: endpoint, options: options) }
    }

    private func connectNow(to endpoint: Endpoint, options: ConnectOptions) async throws -> any Connection {
        try lifecycle.ensureAccepting()
        let address = try UnixAddress(endpoint)
        let socket = try Self.openSocket(for: endpoint, connecting: true)
        let local: Endpoint
        do {
            try await connect(socket.descriptor, to: address, timeout: options.timeout)
            local = try UnixSystem.localAddress(socket.descriptor).endpoint
        } catch {
            socket.close()
            if let failure = error as? SyscallError {
                throw ErrnoTable.error(failure, while: "reading the local address of a connection to \(endpoint)")
            }
            throw error
        }
        let loop = group.next()
        let connection = UnixConnection(socket: socket, loop: loop, local: local, remote: endpoint, lifecycle: lifecycle)
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            let submitted = loop.submit {
                do {
                    try connection.activate(accepted: false)
                    continuation.resume()
                } catch {
                    continuation.resume(throwing: error)
                }
            }
            if !submitted {
                connection.abandon()
                continuation.resume(throwing: TransportError.transportShutdown())
            }
        }
        return connection
    }

    /// Connects `fd`. A Unix-domain connect completes at once or fails, except when the
    /// listener's backlog is full (`EAGAIN`): it does not go on in the background then,
    /// so it is tried again, with growing pauses, until `timeout`.
    private func connect(_ fd: CInt, to address: UnixAddress, timeout: Duration) async throws(TransportError) {
        let deadline = ContinuousClock.now + timeout
        var pause: Duration = .milliseconds(1)
        while true {
            if Task.isCancelled {
                throw TransportError(code: .cancelled, reason: .taskCancelled, message: "the connect to \(address.endpoint) was cancelled")
            }
            try lifecycle.ensureAccepting()
            do {
                if try UnixSystem.connect(fd, address.socketAddress) { return }
            } catch {
                throw UnixErrors.connect(error, to: address.endpoint)
            }
            if ContinuousClock.now + pause > deadline {
                throw TransportError(
                    code: .deadlineExceeded, reason: .connectTimeout,
                    message: "connecting to \(address.endpoint) took longer than \(timeout): the listener's backlog stayed full")
            }
            try? await Task.sleep(for: pause)
            pause = min(pause * 2, .milliseconds(50))
        }
    }

    /// A new nonblocking stream socket; a client one is bound to a name of its own
    /// (autobind).
    private static func openSocket(for endpoint: Endpoint, connecting: Bool) throws(TransportError) -> Socket {
        let socket: Socket
        do {
            socket = Socket(takingOwnershipOf: try UnixSystem.socket())
        } catch {
            throw ErrnoTable.error(error, while: "opening a socket for \(endpoint)")
        }
        if connecting {
            do {
                try UnixSystem.autobind(socket.descriptor)
            } catch {
                socket.close()
                throw ErrnoTable.error(error, while: "naming a socket for \(endpoint)")
            }
        }
        return socket
    }

    // MARK: listen

    public func listen(on endpoint: Endpoint, options: ListenOptions) async throws -> any Listener {
        try lifecycle.ensureAccepting()
        let address = try UnixAddress(endpoint)
        let socket = try Self.openSocket(for: endpoint, connecting: false)
        var file: FileIdentity?
        do throws(SyscallError) {
            try Self.bind(socket.descriptor, to: address)
            try UnixSystem.listen(socket.descriptor, backlog: CInt(clamping: options.backlog))
            if let path = address.filePath { file = try UnixSystem.fileIdentity(at: path) }
        } catch {
            socket.close()
            throw UnixErrors.listen(error, on: endpoint)
        }
        let loop = group.next()
        let listener = UnixListener(socket: socket, address: address, file: file, loop: loop, group: group, lifecycle: lifecycle)
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            let submitted = loop.submit {
                do {
                    try listener.start()
                    continuation.resume()
                } catch {
                    listener.close()
                    continuation.resume(throwing: error)
                }
            }
            if !submitted {
                listener.close()
                continuation.resume(throwing: TransportError.transportShutdown())
            }
        }
        try lifecycle.admit(listener)
        return listener
    }

    /// Binds to `address`, replacing a stale socket file: one nobody listens on (its
    /// connect is refused). A live socket, or a file that is not a socket, stays, and
    /// the bind's `EADDRINUSE` is thrown.
    private static func bind(_ fd: CInt, to address: UnixAddress) throws(SyscallError) {
        do throws(SyscallError) {
            try UnixSystem.bind(fd, address.socketAddress)
            return
        } catch {
            guard error.errno == EADDRINUSE, let path = address.filePath, try isStaleSocket(at: path, address: address) else { throw error }
            try UnixSystem.unlink(path)
        }
        try UnixSystem.bind(fd, address.socketAddress)
    }

    /// Whether `path` holds a socket file that no listener is behind.
    private static func isStaleSocket(at path: String, address: UnixAddress) throws(SyscallError) -> Bool {
        guard let identity = try UnixSystem.fileIdentity(at: path) else { return true }
        guard identity.isSocket else { return false }
        let probe = Socket(takingOwnershipOf: try UnixSystem.socket())
        let refused: Bool
        do throws(SyscallError) {
            // Connected, or EAGAIN (a full backlog): someone listens.
            _ = try UnixSystem.connect(probe.descriptor, address.socketAddress)
            refused = false
        } catch {
            refused = error.errno == ECONNREFUSED || error.errno == ENOENT
        }
        probe.close()
        return refused
    }

    // MARK: shutdown

    /// Its lifecycle runs ``Transport/shutdown(gracePeriod:)`` and ``Transport/shutdownNow()``.
    public var shutdownSequence: any TransportShutdownSequence { lifecycle }

    deinit {
        // Dropped without a shutdown: end everything the same way, synchronously.
        lifecycle.shutdownFromDeinit()
    }
}
