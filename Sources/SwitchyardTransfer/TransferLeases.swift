import Switchyard
import SwitchyardCalls
import Synchronization

/// One receiving call per transfer id at a time: a new call for an id ends the one that
/// holds it (the sender reconnected; the old call is a leftover of a broken connection
/// the receiver has not noticed yet) and waits until its handler has let go, so two
/// calls never write one file.
final class TransferLeases: Sendable {
    private struct Holder {
        let token: Int
        let call: AsyncCall
        var waiters: [CheckedContinuation<Void, Never>] = []
    }
    private struct State {
        var holders: [String: Holder] = [:]
        var nextToken = 0
    }
    private let state = Mutex(State())

    /// Takes `id` for `call`; returns the token to release it with.
    func acquire(_ id: String, for call: AsyncCall) async -> Int {
        while true {
            enum Step { case acquired(Int), wait(previous: AsyncCall) }
            let step: Step = state.withLock { state in
                guard state.holders[id] != nil else {
                    state.nextToken += 1
                    state.holders[id] = Holder(token: state.nextToken, call: call)
                    return .acquired(state.nextToken)
                }
                return .wait(previous: state.holders[id]!.call)
            }
            switch step {
            case .acquired(let token):
                return token
            case .wait(let previous):
                await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                    let queued = state.withLock { state -> Bool in
                        guard state.holders[id] != nil else { return false }
                        state.holders[id]!.waiters.append(continuation)
                        return true
                    }
                    if queued { previous.cancel() } else { continuation.resume() }
                }
            }
        }
    }

    /// Lets go of `id` (if `token` still holds it) and wakes those waiting for it.
    func release(_ id: String, token: Int) {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            guard let holder = state.holders[id], holder.token == token else { return [] }
            state.holders[id] = nil
            return holder.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    /// The calls holding an id now.
    var calls: [AsyncCall] { state.withLock { $0.holders.values.map(\.call) } }
}
