import Synchronization
import Switchyard

/// Transparent retry (gRPC's A6) of a client call that reached the server but not its
/// application: a stream the server refused (RST_STREAM `REFUSED_STREAM`), or one above
/// the last stream of a GOAWAY (the HTTP/2 layer reports both as a reset the peer did not
/// process), from which the call received nothing (no response headers, no data, no
/// trailers); and a call still waiting for the server's stream limit when a GOAWAY
/// comes (it never left the client). Such a call starts again, once, on a stream of the channel's connection (a
/// new connection if that one is going away), and its metadata and every message and
/// half-close it wrote are sent again, in order. Its handler never sees it.
///
/// - **What is kept.** Until the server's first frame for the call, the stream keeps each
///   write of the call (the arrays themselves, not copies) and whether its completion
///   ran, up to ``ChannelConfiguration/retryBufferSize`` bytes. A call that writes more
///   than that, or that hears from the server, lets go of them at once and is never
///   retried: it ends as it would without retry (`unavailable`, reason
///   `stream refused`). A call refused a second time ends the same way.
/// - **Write completions.** A write's completion runs once: a write in the kernel before
///   the refusal is sent again without it (its `didWriteData` was reported); a write
///   the refusal cut short (the HTTP/2 layer fails it with `reset` before the stream
///   hears why) is held, and its completion rides the write on the new stream. Without a
///   retry, the held failures are reported as before, ahead of the close.
/// - **Deadline, wait-for-ready, cancellation.** The new stream's connection is asked of
///   the channel like a new call's (``ChannelConnectionSlot/connection(waitForReady:deadline:)``):
///   a fail-fast call whose new connect fails ends with that connect's error, a
///   wait-for-ready call waits through failed attempts, the call's deadline bounds the
///   wait (and goes on ending the call as before), and a cancel or close of the call
///   while it waits takes the request back. The request's `grpc-timeout` is the one sent
///   first (the deadline still ends the call on this side).
///
/// ## Why a relay
///
/// A `Call` is pinned to its connection's event loop: its `eventLoop` is that of the
/// stream it started on, its state is confined there, and `ConnectOptions` has no loop
/// affinity, so a new connection (after a GOAWAY) may live on another loop. The stream
/// the call started on therefore stays the call's `Connection` for its whole life; on a
/// retry it opens a second ``CallStreamConnection`` on the connection the channel hands
/// out and becomes a relay to it: the call's writes, half-close, reads and close are
/// forwarded (hopping to the new stream's loop), and the new stream's events and write
/// completions come back (hopping to the call's loop) into the first stream's own
/// queue, which hands them to the call as before. One mechanism serves both causes:
/// after a REFUSED_STREAM on a connection that is still usable, the channel hands out
/// that same connection and the hops stay on one loop. Only a retried call pays the
/// hops, a copy of each read and a closure per write; a call that is not retried keeps
/// its path: the arrays it writes are referenced (no copy), and the recording's
/// completion takes the place of the one the stream made anyway, so no allocation, lock
/// or hop is added per message.
///
/// This object is the call's side that other threads share (the channel gives back the
/// connection the call holds when it ends); ``StreamRetry`` is the stream's side,
/// confined to the call's loop.
final class TransparentRetry: Sendable {
    typealias Lease = ChannelConnectionSlot.Lease

    /// Bytes of writes kept for a retry (``ChannelConfiguration/retryBufferSize``).
    let bufferSize: Int
    private let slot: ChannelConnectionSlot
    private let waitForReady: Bool
    private let deadline: CallDeadline?

    private struct State {
        var leaseID: ChannelConnectionSlot.ConnectionID
        var used = false
        var cancelled = false
        var connecting: Task<Void, Never>?
    }
    private let state: Mutex<State>

    init(lease: Lease, slot: ChannelConnectionSlot, waitForReady: Bool, deadline: CallDeadline?, bufferSize: Int) {
        self.slot = slot
        self.waitForReady = waitForReady
        self.deadline = deadline
        self.bufferSize = bufferSize
        self.state = Mutex(State(leaseID: lease.id))
    }

    /// The connection the call holds now: the one the channel takes back when it ends.
    var leaseID: ChannelConnectionSlot.ConnectionID { state.withLock { $0.leaseID } }

    /// Takes the call's one retry; false if it was taken.
    func claim() -> Bool {
        state.withLock { state in
            guard !state.used, !state.cancelled else { return false }
            state.used = true
            return true
        }
    }

    /// Asks the channel for a connection as a new call would; `done` runs with it, or with
    /// the error that ends the call, on any thread.
    func connect(_ done: @escaping @Sendable (Result<Lease, TransportError>) -> Void) {
        let slot = self.slot
        let waitForReady = self.waitForReady
        let deadline = self.deadline
        let task = Task(executorPreference: slot.clock.taskExecutor) {
            guard !slot.isReleased else {
                done(.failure(TransportError(code: .cancelled, reason: .closed, message: "the channel was let go of before the call's retry found a connection")))
                return
            }
            do {
                done(.success(try await slot.connection(waitForReady: waitForReady, deadline: deadline)))
            } catch let error as TransportError {
                done(.failure(error))
            } catch {
                done(.failure(TransportError(code: .unavailable, reason: .closed, message: "no connection for the call's retry: \(error)")))
            }
        }
        let cancelled = state.withLock { state in
            if !state.cancelled { state.connecting = task }
            return state.cancelled
        }
        if cancelled { task.cancel() }
    }

    /// The call ended: a request for a connection under way is taken back.
    func cancel() {
        let task = state.withLock { state in
            state.cancelled = true
            defer { state.connecting = nil }
            return state.connecting
        }
        task?.cancel()
    }

    /// The call goes on over `lease`: the connection it held is given back.
    func adopt(_ lease: Lease) {
        let old = state.withLock { state in
            defer { state.leaseID = lease.id }
            return state.leaseID
        }
        slot.callEnded(on: old)
    }

    /// The call ended before it could use `lease`.
    func giveBack(_ lease: Lease) {
        slot.callEnded(on: lease.id)
    }
}

/// A client stream's side of ``TransparentRetry``: the call's writes kept for a replay,
/// then the retry under way or the stream it relays to. Confined to the call's loop
/// (the stream's); the stream drops it (nil) once the call can no longer be retried.
///
/// Safety of `@unchecked Sendable`: confined to the loop of the stream that owns it.
final class StreamRetry: @unchecked Sendable {
    enum Phase {
        /// Keeping the call's writes until the server's first frame.
        case recording
        /// The stream was refused: waiting for the channel's connection, the call's new
        /// writes kept behind the old.
        case waiting
        /// The call runs on `stream`, through the first one.
        case relayed(CallStreamConnection)
    }

    /// One write of the call (or, with `bytes` nil, its half-close).
    struct Entry {
        var bytes: [UInt8]?
        /// The call's completion, until it ran (nil once it did).
        var completion: WriteCompletion?
        /// The failure the refusal gave the write, held until it is known whether the
        /// call is retried.
        var held: TransportError?
    }

    let shared: TransparentRetry
    var phase = Phase.recording
    var entries: [Entry] = []
    var recordedBytes = 0

    init(shared: TransparentRetry) {
        self.shared = shared
    }

    var relayTarget: CallStreamConnection? {
        if case .relayed(let target) = phase { return target }
        return nil
    }
}

extension CallStreamConnection {
    // MARK: out, while a retry is possible

    /// Client: routes one write (or, `bytes` nil, the half-close) of the call. Returns
    /// true when the retry took it (the stream was refused: it waits for the new stream,
    /// or goes to it); otherwise the stream sends it with `completion`, which this made:
    /// the recording's (the write is kept) or the plain one.
    func retryTakes(_ bytes: [UInt8]?, _ completion: inout WriteCompletion?) -> Bool {
        guard let retry = retryState, ending == nil else {
            completion = notInline(completion)
            return false
        }
        switch retry.phase {
        case .recording:
            let size = bytes?.count ?? 0
            guard retry.recordedBytes + size <= retry.shared.bufferSize else {
                // Over the bound: never retried; what was kept goes at once.
                releaseRetry()
                completion = notInline(completion)
                return false
            }
            retry.recordedBytes += size
            let index = retry.entries.count
            retry.entries.append(StreamRetry.Entry(bytes: bytes, completion: completion))
            if let original = completion {
                completion = { error in self.recordedWriteCompleted(index, error, original) }
            }
            return false
        case .waiting:
            retry.entries.append(StreamRetry.Entry(bytes: bytes, completion: completion))
            return true
        case .relayed(let target):
            forward(StreamRetry.Entry(bytes: bytes, completion: completion), to: target)
            return true
        }
    }

    /// A kept write's completion. A failure the refusal gave it (`reset`, before the
    /// stream hears of the refusal) is held until the stream knows whether the call is
    /// retried; a write in the kernel is sent again without its completion.
    private func recordedWriteCompleted(_ index: Int, _ error: TransportError?, _ original: @escaping WriteCompletion) {
        if let retry = retryState {
            switch retry.phase {
            case .recording:
                if let error {
                    if error.reason == .reset, ending == nil {
                        retry.entries[index].held = error
                        return
                    }
                } else {
                    retry.entries[index].completion = nil
                }
            case .waiting, .relayed:
                // Sent again: the new stream reports it.
                return
            }
        }
        report(original, error)
    }

    /// Runs `completion`, at a later turn when inside a call into the stream.
    private func report(_ completion: @escaping WriteCompletion, _ error: TransportError?) {
        if insideCall {
            eventLoop.execute { completion(error) }
        } else {
            completion(error)
        }
    }

    /// The kept writes go (the server answered, the call wrote past the bound, or it
    /// ended): the failures held for them are reported now, in order.
    func releaseRetry() {
        guard let retry = retryState, case .recording = retry.phase else { return }
        retryState = nil
        for entry in retry.entries {
            if let error = entry.held, let completion = entry.completion { report(completion, error) }
        }
    }

    /// The call ends (`error`: why): a retry waiting for its connection stops and the
    /// writes kept for it fail; a relayed stream is let go of (the caller closed it, or it
    /// ended the call).
    func endRetry(_ error: TransportError) {
        guard let retry = retryState else { return }
        switch retry.phase {
        case .recording:
            releaseRetry()
        case .waiting:
            retryState = nil
            retry.shared.cancel()
            let completions = retry.entries.compactMap(\.completion)
            if !completions.isEmpty {
                eventLoop.execute { for completion in completions { completion(error) } }
            }
        case .relayed:
            retryState = nil
            retry.shared.cancel()
        }
    }

    // MARK: the refusal

    /// Client: the stream ended unprocessed (refused, or above a GOAWAY's last stream).
    /// Starts the call's one retry if it may have it; false if not (the call ends as it
    /// would without retry).
    func retryAfterRefusal() -> Bool {
        guard let retry = retryState, case .recording = retry.phase, ending == nil, !receivedHeaders, !peerEnded,
            retry.shared.claim()
        else {
            releaseRetry()
            return false
        }
        retry.phase = .waiting
        // Written ones were reported; those the refusal failed ride their replay.
        for index in retry.entries.indices { retry.entries[index].held = nil }
        releaseStream()
        stream = nil
        let shared = retry.shared
        shared.connect { result in
            self.eventLoop.execute { self.retryConnected(result, shared) }
        }
        return true
    }

    /// On the call's loop: the channel's connection for the retry, or why there is none.
    private func retryConnected(_ result: Result<TransparentRetry.Lease, TransportError>, _ shared: TransparentRetry) {
        guard let retry = retryState, case .waiting = retry.phase, ending == nil else {
            if case .success(let lease) = result { shared.giveBack(lease) }
            return
        }
        switch result {
        case .failure(let error):
            streamEnded(error)
        case .success(let lease):
            shared.adopt(lease)
            let target = CallStreamConnection(
                client: lease.connection, requestFields: requestFields, requestEncoding: outboundEncoding, maximumMessageSize: maximumMessageSize)
            target.setHandler(RetryRelay(self))
            retry.phase = .relayed(target)
            let entries = retry.entries
            retry.entries = []
            for entry in entries { forward(entry, to: target) }
            if reading { target.startReading() }
        }
    }

    /// One write (or the half-close) of the call on the stream it was retried on; the
    /// completion comes back to the call's loop.
    private func forward(_ entry: StreamRetry.Entry, to target: CallStreamConnection) {
        var completion: WriteCompletion?
        if let original = entry.completion {
            let loop = eventLoop
            completion = { error in loop.execute { original(error) } }
        }
        if let bytes = entry.bytes {
            target.write(bytes, completion: completion)
        } else {
            target.shutdownOutput(completion: completion)
        }
    }

    // MARK: in, from the stream the call was retried on

    fileprivate func relayedRead(_ bytes: [UInt8]) {
        guard ending == nil else { return }
        inbound += bytes
        scheduleDelivery()
    }

    fileprivate func relayedReadEnd() {
        guard ending == nil else { return }
        peerEnded = true
        scheduleDelivery()
    }

    fileprivate func relayedClose(_ error: TransportError?) {
        streamEnded(error ?? TransportError(code: .cancelled, reason: .closed, message: "the call's retried stream was closed"))
    }
}

/// The handler of the stream a call was retried on: its events hop to the call's loop,
/// into the first stream's queue.
///
/// Safety of `@unchecked Sendable`: immutable.
private final class RetryRelay: ConnectionHandler, @unchecked Sendable {
    private let origin: CallStreamConnection

    init(_ origin: CallStreamConnection) {
        self.origin = origin
    }

    func connectionDidRead(_ bytes: UnsafeRawBufferPointer) {
        let copy = Array(bytes)
        let origin = self.origin
        origin.eventLoop.execute { origin.relayedRead(copy) }
    }

    func connectionDidReadEnd() {
        let origin = self.origin
        origin.eventLoop.execute { origin.relayedReadEnd() }
    }

    func connectionDidClose(error: TransportError?) {
        let origin = self.origin
        origin.eventLoop.execute { origin.relayedClose(error) }
    }
}
