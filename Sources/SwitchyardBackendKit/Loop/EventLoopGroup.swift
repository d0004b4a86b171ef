public import Switchyard
import Synchronization

/// A fixed set of loops of one backend; connections are spread over them round-robin.
public final class TransportEventLoopGroup<Loop: BackendEventLoop>: Sendable {
    public let loops: [Loop]
    private let cursor = Atomic<Int>(0)
    private let stopped = Mutex(false)

    /// Starts `count` loops (at least one) with `make(index)`. If one cannot be made, the
    /// ones already made are stopped and the error is thrown.
    public init(count: Int, _ make: (Int) throws(TransportError) -> Loop) throws(TransportError) {
        var loops: [Loop] = []
        for index in 0..<max(1, count) {
            do {
                loops.append(try make(index))
            } catch {
                for loop in loops { loop.stopAndJoin() }
                throw error
            }
        }
        self.loops = loops
    }

    /// The next loop, round-robin.
    public func next() -> Loop {
        let index = cursor.add(1, ordering: .relaxed).oldValue
        return loops[index % loops.count]
    }

    /// Whether the calling thread is one of the group's loops.
    public var inAnyLoop: Bool { loops.contains { $0.inEventLoop } }

    /// Runs `work` on every loop and returns when all have run it (a barrier). A loop
    /// that has stopped counts as done.
    public func onEveryLoop(_ work: @escaping @Sendable (Loop) -> Void) async {
        await withTaskGroup(of: Void.self) { group in
            for loop in loops {
                group.addTask {
                    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                        let accepted = loop.submit {
                            work(loop)
                            continuation.resume()
                        }
                        if !accepted { continuation.resume() }
                    }
                }
            }
        }
    }

    /// Stops every loop and joins its thread. Idempotent: a second call returns once the
    /// first has joined every loop. Call from outside the loops.
    public func stop() {
        stopped.withLock { stopped in
            guard !stopped else { return }
            stopped = true
            for loop in loops { loop.stopAndJoin() }
        }
    }
}
