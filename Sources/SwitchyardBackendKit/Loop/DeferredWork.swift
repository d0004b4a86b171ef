public import Switchyard

/// Work a loop runs at the end of its current turn: the callbacks a user's call caused,
/// which must not run inside that call (no re-entrant callbacks).
///
/// A write completion is kept with its result, so deferring one allocates nothing. The
/// queue runs from a swapped spare array, so neither array is copied or reallocated
/// turn after turn. Loop-confined: create one per loop and touch it only on the loop.
///
/// Safety of `@unchecked Sendable`: used only on its loop's thread.
public final class DeferredWork: @unchecked Sendable {
    private enum Item {
        case work(() -> Void)
        case completion(WriteCompletion, TransportError?)
    }
    // Loop-confined and read on every drain (after every read callback): no runtime
    // exclusivity checks (each is a thread-local lookup, about 76 instructions).
    @exclusivity(unchecked) private var items: [Item] = []
    @exclusivity(unchecked) private var running: [Item] = []
    @exclusivity(unchecked) private var isRunning = false

    public init() {}

    public var isEmpty: Bool { items.isEmpty }

    /// Runs `work` at the end of the turn.
    public func append(_ work: @escaping () -> Void) {
        items.append(.work(work))
    }

    /// Runs `completion(result)` at the end of the turn, in order with other work.
    public func append(_ completion: @escaping WriteCompletion, _ result: TransportError?) {
        items.append(.completion(completion, result))
    }

    /// Runs the deferred work, including work deferred while it runs. A call from inside
    /// deferred work returns at once (the outer run picks the new work up).
    @inline(__always)
    public func run() {
        guard !items.isEmpty, !isRunning else { return }
        runAll()
    }

    private func runAll() {
        isRunning = true
        while !items.isEmpty {
            swap(&items, &running)
            var index = 0
            while index < running.count {
                switch running[index] {
                case .work(let work): work()
                case .completion(let completion, let result): completion(result)
                }
                index += 1
            }
            running.removeAll(keepingCapacity: true)
        }
        isRunning = false
    }
}
