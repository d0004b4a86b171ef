import Switchyard
import SwitchyardBackendKit

extension MemoryConnection {
    /// Queues a write and moves what fits. On the loop.
    /// - Parameter counted: whether ``pendingSnapshot`` already counts the bytes.
    func writeOnLoop(_ bytes: [UInt8], completion: WriteCompletion?, counted: Bool) {
        loop.assertInLoop()
        let failure: TransportError? = if let terminalWriteError {
            terminalWriteError
        } else if case .open = output {
            nil
        } else {
            .outputShutdown()
        }
        if let failure {
            if counted { pendingSnapshot.subtract(bytes.count, ordering: .relaxed) }
            if let completion { events.append(.wrote(completion, failure)) }
            schedulePump()
            return
        }
        if !counted { pendingSnapshot.add(bytes.count, ordering: .relaxed) }
        writes.append(bytes, completion: completion)
        flush()
        if !isClosed && writes.bytes > 0 { hadBacklog = true }
        schedulePump()
    }

    /// Moves queued bytes into the peer's buffer, queues the completions of the writes
    /// that are now all there, and finishes a pending output shutdown. On the loop; the
    /// caller schedules the pump.
    func flush() {
        loop.assertInLoop()
        guard !isClosed else { return }
        switch outbound.move(from: &writes) {
        case .peerGone:
            terminate(.failure(TransportError(
                code: .unavailable, reason: .reset,
                message: "the peer closed the connection; writing to it was reset")))
            return
        case .moved(let count, let wake):
            if count > 0 { pendingSnapshot.subtract(count, ordering: .relaxed) }
            wake?.wakeReader()
        }
        var completed: [WriteCompletion] = []
        writes.removeFinished(completed: &completed)
        for completion in completed { events.append(.wrote(completion, nil)) }
        guard writes.isEmpty else { return }
        if hadBacklog {
            hadBacklog = false
            events.append(.drained)
        }
        if case .draining(let completion) = output {
            output = .shut
            outbound.finish()?.wakeReader()
            if let completion { events.append(.wrote(completion, nil)) }
        }
    }

    /// Starts the output shutdown: the end of stream follows the queued writes. On the
    /// loop.
    func shutdownOutputOnLoop(completion: WriteCompletion?) {
        loop.assertInLoop()
        if let terminalWriteError {
            if let completion { events.append(.wrote(completion, terminalWriteError)) }
        } else if case .open = output {
            output = .draining(completion)
            flush()
        } else if let completion {
            events.append(.wrote(completion, .outputShutdown()))
        }
        schedulePump()
    }
}
