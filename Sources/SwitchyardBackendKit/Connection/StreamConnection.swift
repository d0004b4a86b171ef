public import Switchyard

/// The ``Connection`` front every stream backend shares, written once: the hop to the
/// loop (and what a call gets once the loops stopped), the refusals, the handler, the
/// read demand, and the write path that sends at once when nothing is queued and queues
/// only what the kernel did not take (the caller's array itself, or a copy of the unsent
/// tail of borrowed bytes), for all four write entry points.
///
/// A backend's connection conforms and supplies its I/O primitives (``sendNow(_:_:)``,
/// ``writesQueued()``, ``readInterestChanged()``, ``shutDownOutputNow()``,
/// ``terminate(_:deferCallbacks:)``); ``ConnectionStateMachine`` (``state``) keeps the
/// contract's rules. Everything here runs on the connection's loop, or hops there first.
///
/// ```swift
/// final class MyConnection: StreamConnection, @unchecked Sendable {
///     let loop: MyLoop
///     var state = ConnectionStateMachine()
///     func sendNow(_ header: UnsafeRawBufferPointer?, _ body: UnsafeRawBufferPointer) -> Int? { … }
///     func writesQueued() { … }            // watch for writability, or start an async write
///     func readInterestChanged() { … }     // start or stop reading per state.shouldRead
///     func shutDownOutputNow() { … }       // hand the FIN over, then state.finishOutputShutdown
///     func terminate(_ error: TransportError?, deferCallbacks: Bool) { … }
///     func reset() { … }
///     // backendName, localAddress, remoteAddress
/// }
/// ```
public protocol StreamConnection: Connection {
    associatedtype Loop: BackendEventLoop
    /// The loop the connection lives on.
    var loop: Loop { get }
    /// The contract's state. Touched only on ``loop``, except its
    /// ``ConnectionStateMachine/record``, which other threads read in place.
    var state: ConnectionStateMachine { get set }

    /// Hands `header` (if any) and then `body` to the network now, gathered, without
    /// blocking. Called on the loop with nothing queued. Returns how many bytes were
    /// taken (0 when the network would block), or nil when the attempt ended the
    /// connection (the backend terminated it with its callbacks deferred: a user's call
    /// is on the stack).
    func sendNow(_ header: UnsafeRawBufferPointer?, _ body: UnsafeRawBufferPointer) -> Int?

    /// Writes were queued (``ConnectionStateMachine/writes`` is not empty): arrange for
    /// them to go: watch for writability, or start an asynchronous write if none is in
    /// flight. A failure that ends the connection defers its callbacks.
    func writesQueued()

    /// ``ConnectionStateMachine/shouldRead`` may have changed: start or stop reading.
    func readInterestChanged()

    /// ``shutdownOutput(completion:)`` found nothing queued: hand the FIN over and report
    /// through ``ConnectionStateMachine/finishOutputShutdown(error:)`` (deferring the
    /// completion, since a user's call is on the stack), now or when it completes.
    func shutDownOutputNow()

    /// Ends the connection once (`error` nil for a local close) and releases its
    /// descriptor or handle; the ending's callbacks run at once, or at the end of the
    /// loop's turn with `deferCallbacks`.
    func terminate(_ error: TransportError?, deferCallbacks: Bool)
}

extension StreamConnection {
    public var eventLoop: any TransportEventLoop { loop }

    public var pendingWriteBytes: Int {
        loop.inEventLoop ? state.pendingWriteBytes : state.record.pendingBytes
    }

    public func setHandler(_ handler: any ConnectionHandler) {
        loop.onLoop({
            if case .reportEnd(let handler, let error) = self.state.setHandler(handler) {
                self.loop.deferToEndOfTurn { handler.connectionDidClose(error: error) }
            }
        }, ifStopped: { state.record.reportEndToLateHandler(handler) })
    }

    public func startReading() {
        loop.onLoop { if self.state.startReading() { self.readInterestChanged() } }
    }

    public func stopReading() {
        loop.onLoop { if self.state.stopReading() { self.readInterestChanged() } }
    }

    public func close() {
        loop.onLoop { self.terminate(nil, deferCallbacks: true) }
    }

    /// For the transport's shutdown (``TransportResource``): ends the connection from a
    /// loop event, callbacks at once.
    public func terminate(with error: TransportError) {
        terminate(error, deferCallbacks: false)
    }

    @inlinable
    public func write(_ bytes: [UInt8], completion: WriteCompletion?) {
        guard loop.inEventLoop else {
            hopWrite({ self.write(bytes, completion: completion) }, completion)
            return
        }
        _ = bytes.withUnsafeBytes { writeOnLoop(header: nil, $0, owned: bytes, completion: completion, reportingSentNow: false) }
    }

    @inlinable
    public func writeNowOrQueue(_ bytes: [UInt8], completion: WriteCompletion?) -> Bool {
        guard loop.inEventLoop else {
            write(bytes, completion: completion)
            return false
        }
        return bytes.withUnsafeBytes { writeOnLoop(header: nil, $0, owned: bytes, completion: completion, reportingSentNow: true) }
    }

    @inlinable
    public func writeNowOrQueue(header: UnsafeRawBufferPointer, payload: [UInt8], completion: WriteCompletion?) -> Bool {
        guard loop.inEventLoop else {
            var joined = Array(header)
            joined.append(contentsOf: payload)
            write(joined, completion: completion)
            return false
        }
        return payload.withUnsafeBytes { writeOnLoop(header: header, $0, owned: payload, completion: completion, reportingSentNow: true) }
    }

    @inlinable
    public func write(borrowing bytes: UnsafeRawBufferPointer, completion: WriteCompletion?) {
        guard loop.inEventLoop else {
            let copy = Array(bytes)
            hopWrite({ self.write(copy, completion: completion) }, completion)
            return
        }
        _ = writeOnLoop(header: nil, bytes, owned: nil, completion: completion, reportingSentNow: false)
    }

    public func shutdownOutput(completion: WriteCompletion?) {
        guard loop.inEventLoop else {
            hopWrite({ self.shutdownOutput(completion: completion) }, completion)
            return
        }
        switch state.shutdownOutput(completion) {
        case .refuse(let error):
            if let completion { loop.deferCompletion(completion, error) }
        case .shutDownNow:
            shutDownOutputNow()
        case .afterPendingWrites:
            writesQueued()
        }
    }

    /// Hops a write (or an output shutdown) to the loop; if the loop has stopped, the
    /// transport ended this connection first, and the completion runs here with that end.
    @usableFromInline
    func hopWrite(_ work: @escaping @Sendable () -> Void, _ completion: WriteCompletion?) {
        if !loop.submit(work) { state.record.completeLateWrite(completion) }
    }

    /// Every write path, on the loop: refused after the end or `shutdownOutput`; sent at
    /// once (``sendNow(_:_:)``) when nothing is queued; what the network did not take is
    /// queued: a header's tail as a copy, then `owned` itself with an offset (no copy), or
    /// a copy of the unsent tail of `body`. Returns true when every byte was taken at
    /// once and `reportingSentNow` asked to hear so instead of a completion (which then
    /// never runs); otherwise the completion runs at the end of the turn at the earliest.
    @inlinable
    func writeOnLoop(
        header: UnsafeRawBufferPointer?, _ body: UnsafeRawBufferPointer, owned: [UInt8]?,
        completion: WriteCompletion?, reportingSentNow: Bool
    ) -> Bool {
        if let refusal = state.writeRefusal {
            if let completion { loop.deferCompletion(completion, refusal) }
            return false
        }
        let headerCount = header?.count ?? 0
        var written = 0
        if state.writes.isEmpty {
            guard let sent = sendNow(header, body) else {
                if let completion { loop.deferCompletion(completion, state.writeRefusal) }
                return false
            }
            state.noteSent(sent)
            if sent == headerCount + body.count {
                if reportingSentNow { return true }
                if let completion { loop.deferCompletion(completion, nil) }
                return false
            }
            written = sent
        }
        if let header, written < headerCount {
            state.enqueue(Array(UnsafeRawBufferPointer(rebasing: header[written...])), completion: nil)
            written = 0
        } else {
            written -= headerCount
        }
        if let owned {
            state.enqueue(owned, offset: written, completion: completion)
        } else {
            state.enqueue(Array(UnsafeRawBufferPointer(rebasing: body[written...])), completion: completion)
        }
        writesQueued()
        return false
    }
}
