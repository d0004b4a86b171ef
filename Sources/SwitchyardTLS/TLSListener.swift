public import Switchyard
import Synchronization

/// A `Listener` whose connections are server ``TLSConnection``s: each connection the
/// wrapped listener accepts runs its handshake at once and is handed on only when the
/// handshake succeeded (see ``TLSTransport``). Made by ``TLSTransport/listen(on:options:)``.
///
/// ``close()`` closes the wrapped listener and every connection still in its handshake;
/// connections already handed on stay open, as the `Listener` contract says.
///
/// Each handshake runs on its connection's loop from the wrapped listener's accept
/// handler, with no task of its own: no hop to the task pool and back per connection, and
/// no timer task per handshake. Every handshake of a listener has the same timeout, so
/// their deadlines come in accept order: one queue of them and one task sleeping until
/// the first (while any is queued) time them all out.
public final class TLSListener: Listener {
    /// The listener the TCP connections come from.
    public let wrapped: any Listener
    public let connections = AcceptedConnections()
    public var backendName: String { wrapped.backendName + "+tls" }
    public var localAddress: Endpoint { wrapped.localAddress }

    /// A connection in its handshake.
    private struct Handshaking {
        let connection: any Connection
        let stream: TLSStream
        let deadline: ContinuousClock.Instant
    }

    private struct State {
        var closed = false
        /// Connections in their handshake, by identity, to close with the listener and
        /// to time out.
        var handshaking: [ObjectIdentifier: Handshaking] = [:]
        /// Their deadlines in accept order (so in time order), from `deadlinesStart` on;
        /// an entry whose handshake ended is skipped when it comes up.
        var deadlines: [(deadline: ContinuousClock.Instant, key: ObjectIdentifier)] = []
        var deadlinesStart = 0
        /// Whether the task that times handshakes out is running.
        var timing = false

        /// The first deadline still queued (the queue compacted); when none is, the timing
        /// task stops (`timing` false: the next handshake starts another).
        mutating func nextDeadline() -> ContinuousClock.Instant? {
            if deadlinesStart == deadlines.count {
                deadlines.removeAll(keepingCapacity: deadlines.capacity <= 1024)
                deadlinesStart = 0
                timing = false
                return nil
            }
            if deadlinesStart >= 1024 && deadlinesStart * 2 >= deadlines.count {
                deadlines.removeFirst(deadlinesStart)
                deadlinesStart = 0
            }
            return deadlines[deadlinesStart].deadline
        }
    }
    private let state = Mutex(State())
    private let open: OpenTLSResources
    private let context: TLSContext
    private let handshakeFailures: (@Sendable (TransportError, Endpoint) -> Void)?

    init(
        wrapping wrapped: any Listener, context: TLSContext, handshakeFailures: (@Sendable (TransportError, Endpoint) -> Void)?,
        open: OpenTLSResources
    ) {
        self.wrapped = wrapped
        self.open = open
        self.context = context
        self.handshakeFailures = handshakeFailures
        // Each accepted connection on its own loop, at once.
        wrapped.acceptConnections { [self] connection in admit(connection) }
        // The wrapped sequence only for its end: it ends when the wrapped listener closes
        // for any reason (the transport's shutdown too), and this one ends with it. (It
        // yields nothing while the accept handler takes the connections; a connection it
        // does yield is admitted all the same.)
        Task { [self] in
            for await connection in wrapped.connections {
                connection.eventLoop.execute { self.admit(connection) }
            }
            connections.finish()
            open.forget(self)
        }
    }

    /// Runs the server handshake of an accepted connection on its loop (called there),
    /// and hands the TLS connection on when it succeeded.
    private func admit(_ connection: any Connection) {
        let session: OpenSSLSession
        do {
            session = try OpenSSLSession(context: context, serverName: nil)
        } catch {
            connection.close()
            handshakeFailures?(error, connection.remoteAddress)
            return
        }
        let stream = TLSStream(wrapping: connection, session: session)
        let key = ObjectIdentifier(connection)
        let timeout = context.configuration.handshakeTimeout
        let clock = connection.eventLoop.clock
        let deadline = clock.now + timeout
        let (admitted, startTimer) = state.withLock { state -> (Bool, Bool) in
            if state.closed { return (false, false) }
            state.handshaking[key] = Handshaking(connection: connection, stream: stream, deadline: deadline)
            state.deadlines.append((deadline, key))
            defer { state.timing = true }
            return (true, !state.timing)
        }
        guard admitted else {
            connection.close()
            return
        }
        if startTimer { Task(executorPreference: clock.taskExecutor) { [weak self] in await self?.timeOutHandshakes(timeout, on: clock) } }
        stream.startHandshake { [self] result in
            state.withLock { state in
                // Only this handshake's entry (an identity can be reused once its
                // connection is gone, but not while it is in here).
                if state.handshaking[key]?.stream === stream { state.handshaking[key] = nil }
            }
            switch result {
            case .success(let handshake):
                let tls = TLSConnection(stream, handshake)
                open.track(tls)
                if !connections.yield(tls) { tls.close() }
            case .failure(let error):
                handshakeFailures?(error, connection.remoteAddress)
            }
        }
    }

    /// Sleeps until the first queued deadline, times out the handshakes whose deadline
    /// passed, and so on until the queue is empty.
    private func timeOutHandshakes(_ timeout: Duration, on clock: any TransportClock) async {
        var next: ContinuousClock.Instant? = state.withLock { $0.nextDeadline() }
        while let deadline = next {
            try? await clock.sleep(until: deadline)
            let now = clock.now
            let expired = state.withLock { state -> [TLSStream] in
                var expired: [TLSStream] = []
                while state.deadlinesStart < state.deadlines.count, state.deadlines[state.deadlinesStart].deadline <= now {
                    let key = state.deadlines[state.deadlinesStart].key
                    state.deadlinesStart += 1
                    if let entry = state.handshaking[key], entry.deadline <= now { expired.append(entry.stream) }
                }
                next = state.nextDeadline()
                return expired
            }
            for stream in expired { stream.expireHandshake(after: timeout) }
            // At most a few wake-ups per timeout, not one per handshake: a handshake
            // times out up to a quarter of its timeout (at most 100 ms) late.
            if let deadline = next { next = max(deadline, now + min(timeout / 4, .milliseconds(100))) }
        }
    }

    public func close() {
        let pending = state.withLock { state in
            state.closed = true
            state.deadlines = []
            state.deadlinesStart = 0
            defer { state.handshaking = [:] }
            return state.handshaking.values.map(\.connection)
        }
        wrapped.close()
        for connection in pending { connection.close() }
        connections.finish()
        open.forget(self)
    }
}
