import Switchyard

extension MemoryConnection {
    /// How many reads one turn of the pump delivers before it lets the loop's other
    /// work run (16 × 64 KiB).
    static let readsPerTurn = 16

    func setHandlerOnLoop(_ handler: any ConnectionHandler) {
        loop.assertInLoop()
        if isClosed {
            // The end is still queued for whoever is the handler then, or it was
            // delivered (nothing more to say), or no handler was there to take it.
            if let error = orphanedClose.withLock({ $0.take() }) {
                self.handler = handler
                events.append(.closed(error))
                schedulePump()
            } else if closePending {
                self.handler = handler
            }
            return
        }
        self.handler = handler
        if reading { schedulePump() }
    }

    func startReadingOnLoop() {
        loop.assertInLoop()
        guard !isClosed else { return }
        reading = true
        schedulePump()
    }

    /// Delivers queued events and reads at the end of this turn of the loop, so no
    /// callback runs inside the user's call that caused it.
    func schedulePump() {
        loop.assertInLoop()
        guard !pumpScheduled else { return }
        pumpScheduled = true
        loop.deferToEndOfTurn { [self] in pump() }
    }

    /// Delivers the queued events, then, while reading, the inbound bytes and end of
    /// stream; a reset from the peer ends the connection whether it reads or not.
    private func pump() {
        pumpScheduled = false
        var reads = 0
        while true {
            if let event = events.popFirst() {
                deliver(event)
                continue
            }
            if isClosed { return }
            guard reading, let handler, !readEndDelivered else {
                if inbound.isReset { terminate(.failure(Self.peerReset)) ; continue }
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
                handler.connectionDidRead(UnsafeRawBufferPointer(rebasing: loop.readBuffer[0..<count]))
            case .endOfStream:
                readEndDelivered = true
                handler.connectionDidReadEnd()
            case .reset:
                terminate(.failure(Self.peerReset))
            case .empty:
                if events.isEmpty { return }
            }
        }
    }

    private func deliver(_ event: Event) {
        switch event {
        case .wrote(let completion, let error):
            completion(error)
        case .drained:
            handler?.connectionDidDrainWrites()
        case .closed(let error):
            closePending = false
            if let handler {
                self.handler = nil  // breaks connection → handler → connection
                handler.connectionDidClose(error: error)
            } else {
                orphanedClose.withLock { $0 = .some(error) }
            }
        }
    }

    static var peerReset: TransportError {
        TransportError(code: .unavailable, reason: .reset, message: "the peer reset the connection")
    }
}
