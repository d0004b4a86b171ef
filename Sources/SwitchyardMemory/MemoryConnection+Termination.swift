import Switchyard
import SwitchyardBackendKit

extension MemoryConnection {
    /// Ends the connection, once: the peer is told (end of stream, or a reset), pending
    /// writes and a pending output shutdown complete with the error, the handler's
    /// ``ConnectionHandler/connectionDidClose(error:)`` is queued after them, and the
    /// connection leaves its transport and frees its port. On the loop.
    func terminate(_ termination: Termination) {
        loop.assertInLoop()
        guard !isClosed else { return }
        let handlerError: TransportError?
        let writeError: TransportError
        switch termination {
        case .close, .reset:
            handlerError = nil
            writeError = .closedLocally()
        case .failure(let error):
            handlerError = error
            writeError = error
        }
        terminalWriteError = writeError
        reading = false

        if case .reset = termination {
            outbound.resetByWriter()?.wakeReader()
        } else {
            outbound.finish()?.wakeReader()
        }
        inbound.closeReader()?.wakeWriter()

        pendingSnapshot.subtract(writes.bytes, ordering: .relaxed)
        var unused: [WriteCompletion] = []
        var failed: [WriteCompletion] = []
        writes.removeAll(bytesTaken: 0, succeeded: &unused, failed: &failed)
        for completion in failed { events.append(.wrote(completion, writeError)) }
        if case .draining(let completion) = output, let completion {
            events.append(.wrote(completion, writeError))
        }
        output = .shut
        hadBacklog = false
        events.append(.closed(handlerError))
        closePending = true

        core.deregister(self)
        releasePort()
        schedulePump()
    }
}
