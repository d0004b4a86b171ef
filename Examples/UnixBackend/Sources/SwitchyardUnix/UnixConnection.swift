import CUnixEpoll
import Glibc
import Switchyard
import SwitchyardBackendKit

/// A Unix-domain stream connection on a ``UnixEventLoop``. The ``Connection`` contract
/// is kept by the toolkit: ``ConnectionStateMachine`` holds its rules,
/// ``StreamConnection`` its front (hops, refusals, handler, read demand, the write path)
/// and ``DescriptorStreamConnection`` the socket I/O (send, gathered flush, reads, FIN);
/// this type watches the descriptor and ends the connection.
///
/// Reads go into the loop's buffer and reach the handler borrowed. A write goes to the
/// kernel at once when nothing is queued; only what the kernel did not take is queued,
/// and queued writes leave gathered in one `sendmsg` (with `MSG_NOSIGNAL`: a peer that
/// went away is `unavailable`/`reset`, never a SIGPIPE).
///
/// The descriptor is in the loop's epoll set from the start, waiting for input while
/// reads are asked for and for output while writes are queued, and otherwise for nothing
/// at all: epoll still reports errors and hang-ups, so a peer's reset ends a connection
/// nobody reads (``endWithPendingError()``). A hang-up with no error (the peer closed,
/// nothing left unread at its end) takes it out of the set until reading or writing
/// needs it, so it cannot spin the loop; the next read reports it as end of stream.
///
/// ``reset()``: Unix-domain sockets have no reset. The connection closes; the peer sees
/// `unavailable`/`reset` (the kernel's `ECONNRESET`) when data it sent was left unread
/// here, and otherwise end of stream, after which its writes fail with
/// `unavailable`/`reset` (`EPIPE`).
///
/// Safety of `@unchecked Sendable`: every stored `var` is touched only on `loop` (the
/// toolkit's front hops there first); other threads read the state machine's
/// ``ConnectionRecord``.
final class UnixConnection: DescriptorStreamConnection, UnixWatcher, LoopBoundResource, @unchecked Sendable {
    let loop: UnixEventLoop
    let localAddress: Endpoint
    let remoteAddress: Endpoint
    var backendName: String { UnixTransport.backendName }

    private let lifecycle: TransportLifecycle<UnixEventLoop>
    let descriptor: CInt
    private var socket: Socket?
    /// Loop-confined and touched on every write: no runtime exclusivity check.
    @exclusivity(unchecked) var state = ConnectionStateMachine()
    /// The loop's watch and the events it waits for; nil while not in the epoll set.
    private var watch: (number: UInt64, events: UInt32)?
    /// A hang-up came with no error while the connection waited for nothing: it stays out
    /// of the epoll set while it waits for nothing (epoll would report the hang-up again
    /// at every wait).
    private var hungUp = false
    /// Completions of writes a flush finished, run once the state settled (reused).
    var finishedWrites: [WriteCompletion] = []

    init(socket: consuming Socket, loop: UnixEventLoop, local: Endpoint, remote: Endpoint, lifecycle: TransportLifecycle<UnixEventLoop>) {
        descriptor = socket.descriptor
        self.socket = .some(socket)
        self.loop = loop
        self.localAddress = local
        self.remoteAddress = remote
        self.lifecycle = lifecycle
    }

    /// Joins the transport's registry. Call on the loop. When the transport is shutting
    /// down, the connection ends (`cancelled`/`shutdown`) and that is thrown.
    /// `accepted` says whether a listener accepted it (for the transport's logs and metrics).
    func activate(accepted: Bool) throws(TransportError) {
        guard lifecycle.insertConnection(self, accepted: accepted) else {
            _ = state.end(with: .transportShutdown())
            socket.take()?.close()
            throw TransportError.transportShutdown()
        }
        // In the set from the start, waiting for nothing: errors and hang-ups still come.
        updateInterest()
    }

    /// Closes a connection whose loop stopped before it got there: nothing else has it.
    func abandon() {
        _ = state.end(with: .transportShutdown())
        socket.take()?.close()
    }

    // MARK: StreamConnection (sending and the output shutdown are the toolkit's:
    // DescriptorStreamConnection)

    func writesQueued() {
        updateInterest()
    }

    func readInterestChanged() {
        updateInterest()
    }

    func reset() {
        // No reset in the Unix domain: see the type's documentation.
        close()
    }

    /// Ends the connection once (`error` nil for a local close): the descriptor closes
    /// now, then the state machine's ending reports, at once or at the end of the turn.
    func terminate(_ error: TransportError?, deferCallbacks: Bool) {
        guard let ending = state.end(with: error) else { return }
        if let watch { loop.unwatch(descriptor, watch: watch.number) }
        watch = nil
        socket.take()?.close()
        lifecycle.connectionEnded(self)
        if deferCallbacks { loop.deferToEndOfTurn { ending.run() } } else { ending.run() }
    }

    // MARK: events

    func handleEvents(_ events: UInt32) {
        guard state.isOpen else { return }
        let trouble = UnixSystem.Events.error | UnixSystem.Events.hangup
        if events & (UnixSystem.Events.output | trouble) != 0, !state.writes.isEmpty {
            flushWrites()
            guard state.isOpen else { return }
        }
        if events & (UnixSystem.Events.input | UnixSystem.Events.readHangup | trouble) != 0, state.shouldRead {
            readAvailable()
        } else if events & trouble != 0, state.writes.isEmpty {
            // Not reading, nothing to write: a reset ends the connection now; a hang-up
            // waits for the next read.
            if endWithPendingError() { return }
            hungUp = true
            if let watch {
                loop.unwatch(descriptor, watch: watch.number)
                self.watch = nil
            }
        }
    }

    // MARK: interest

    /// Puts the descriptor in the epoll set for what the connection waits for, or changes
    /// it; waiting for nothing, it stays in with no interest (errors and hang-ups still
    /// come), unless a hang-up came already, which takes it out.
    func updateInterest() {
        guard state.isOpen else { return }
        var wanted: UInt32 = 0
        if state.shouldRead { wanted |= UnixSystem.Events.input | UnixSystem.Events.readHangup }
        if !state.writes.isEmpty { wanted |= UnixSystem.Events.output }
        do {
            switch (watch, wanted) {
            case (nil, 0):
                guard !hungUp else { return }
                watch = (try loop.watch(descriptor, events: 0, by: self), 0)
            case (let current?, 0) where hungUp:
                loop.unwatch(descriptor, watch: current.number)
                watch = nil
            case (nil, _):
                watch = (try loop.watch(descriptor, events: wanted, by: self), wanted)
            case (let current?, _):
                guard current.events != wanted else { return }
                try loop.change(descriptor, watch: current.number, events: wanted)
                watch = (current.number, wanted)
            }
        } catch {
            terminate(ErrnoTable.error(error, while: "watching the connection to \(remoteAddress)"), deferCallbacks: true)
        }
    }
}
