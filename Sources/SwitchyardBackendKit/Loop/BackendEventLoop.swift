public import Switchyard

/// An ``TransportEventLoop`` as the toolkit's shared pieces see it: work can be handed to it with
/// word back when it has stopped, and it defers callbacks to the end of its turn.
public protocol BackendEventLoop: TransportEventLoop {
    /// Queues `work` for the loop; false (and `work` is not run) once the loop has
    /// stopped, so the caller can finish the work another way.
    func submit(_ work: @escaping @Sendable () -> Void) -> Bool
    /// Runs `work` at the end of the loop's current turn. Call on the loop.
    func deferToEndOfTurn(_ work: @escaping () -> Void)
    /// Runs `completion(result)` at the end of the loop's current turn. Call on the loop.
    func deferCompletion(_ completion: @escaping WriteCompletion, _ result: TransportError?)
    /// Stops the loop after the work queued before this call and waits for its thread.
    /// Call from outside the loop. Idempotent.
    func stopAndJoin()
}

extension BackendEventLoop {
    /// ``TransportEventLoop/execute(_:)``: queues `work`; dropped once the loop has stopped.
    public func execute(_ work: @escaping @Sendable () -> Void) {
        _ = submit(work)
    }

    /// Traps in debug builds when called off the loop.
    @inline(__always)
    public func assertInLoop(file: StaticString = #file, line: UInt = #line) {
        assert(inEventLoop, "called off the event loop", file: file, line: line)
    }

    /// Runs `work` on the loop: at once when called there, else after a hop. When the
    /// loop has stopped, `ifStopped` runs on the calling thread instead.
    @inline(__always)
    public func onLoop(_ work: @escaping @Sendable () -> Void, ifStopped: () -> Void = {}) {
        if inEventLoop {
            work()
        } else if !submit(work) {
            ifStopped()
        }
    }
}
