import Switchyard

extension MemoryConnection {
    /// How many reads one turn of the pump delivers before it lets the loop's other
    /// work run (16 × 64 KiB).
    static let readsPerTurn = 16

    /// Hands inbound bytes to the handler at the end of this turn of the loop, so no
    /// callback runs inside the user's call that asked for them.
    func schedulePump() {
        loop.assertInLoop()
        guard !pumpScheduled else { return }
        pumpScheduled = true
        loop.deferToEndOfTurn { [self] in pump() }
    }

    /// The pump: while reading, the inbound bytes (a read buffer's worth at a time) and
    /// the end of stream; a reset from the peer ends the connection whether it reads or
    /// not. An empty pipe wakes it (``wakeReader()``) when that changes.
    private func pump() {
        pumpScheduled = false
        var reads = 0
        while state.isOpen {
            guard state.shouldRead else {
                if inbound.isReset { terminate(Self.peerReset, deferCallbacks: false) }
                return
            }
            if reads == Self.readsPerTurn {
                // Let the loop's other connections run; come back after them.
                pumpScheduled = true
                loop.execute { [self] in pump() }
                return
            }
            reads += 1
            switch inbound.read(into: loop.readBuffer) {
            case .bytes(let count, let wake):
                wake?.wakeWriter()
                state.noteReceived(count)
                state.handler?.connectionDidRead(UnsafeRawBufferPointer(rebasing: loop.readBuffer[0..<count]))
            case .endOfStream:
                state.readDidEnd()?.connectionDidReadEnd()
            case .reset:
                terminate(Self.peerReset, deferCallbacks: false)
            case .empty:
                return
            }
        }
    }

    static var peerReset: TransportError {
        TransportError(code: .unavailable, reason: .reset, message: "the peer reset the connection")
    }
}
