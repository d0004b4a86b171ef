import Synchronization

/// Work a suspend should let finish, from ``Lifecycle/beginBackgroundWork(_:expiration:)``.
///
/// End it with ``end()`` when the work is done. If a suspend's grace period runs out
/// first, its expiration handler runs (once) and the work counts as ended. Exactly one
/// of the two takes effect: ``end()`` after the expiration, or a second ``end()``, does
/// nothing.
public final class BackgroundWork: Sendable {
    /// The name given when the work began, for logs.
    public let name: String

    private enum Phase {
        case running(expiration: @Sendable () -> Void)
        case ended
        case expired
    }
    private struct State {
        var phase: Phase
        /// The lifecycle waiting for the work, and the work's id there (nil when no
        /// suspend will wait for it: it began after a suspend's grace phase).
        var owner: (lifecycle: Lifecycle, id: UInt64)?
    }
    private let state: Mutex<State>

    init(name: String, expiration: @escaping @Sendable () -> Void) {
        self.name = name
        self.state = Mutex(State(phase: .running(expiration: expiration)))
    }

    func attach(to lifecycle: Lifecycle, id: UInt64) {
        state.withLock { $0.owner = (lifecycle, id) }
    }

    /// Ends the work: a suspend waiting for it stops waiting once no other work is
    /// outstanding. Idempotent.
    public func end() {
        let owner = state.withLock { state -> (lifecycle: Lifecycle, id: UInt64)? in
            guard case .running = state.phase else { return nil }
            state.phase = .ended
            defer { state.owner = nil }
            return state.owner
        }
        owner?.lifecycle.backgroundWorkEnded(owner!.id)
    }

    /// Whether its grace period ran out before it ended (its expiration handler ran).
    public var isExpired: Bool {
        state.withLock { state in
            if case .expired = state.phase { return true }
            return false
        }
    }

    /// Whether it ended or expired.
    public var isFinished: Bool {
        state.withLock { state in
            if case .running = state.phase { return false }
            return true
        }
    }

    /// The grace period ran out: runs the expiration handler, unless the work ended.
    func expire() {
        let handler = state.withLock { state -> (@Sendable () -> Void)? in
            guard case .running(let expiration) = state.phase else { return nil }
            state.phase = .expired
            state.owner = nil
            return expiration
        }
        handler?()
    }
}
