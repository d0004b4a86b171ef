import Synchronization
public import Switchyard

// A channel registered with a Lifecycle (`Lifecycle.register(_:)`): after a suspend's
// grace phase its open calls end with `unavailable` (suspended) and it refuses new calls
// at once until the resume ends; the next call after that connects afresh.

/// Whether a channel may start calls: set while its lifecycle is suspended.
final class ChannelSuspension: Sendable {
    private let state = Mutex<TransportError?>(nil)

    /// The error new calls get now, if suspended.
    var refusal: TransportError? { state.withLock { $0 } }

    /// Throws the refusal, if suspended.
    func check() throws(TransportError) {
        if let refusal { throw refusal }
    }

    func refuse(with error: TransportError?) {
        state.withLock { $0 = error }
    }
}

extension CallChannel {
    /// Refuses new calls with `error`, then ends every open call with it (in that order:
    /// a call still connecting is refused by `startCall` after it connected).
    func suspend(with error: TransportError) {
        var error = error
        error.message = "the call to \(target) ended: \(error.message)"
        suspension.refuse(with: error)
        for call in calls.all { call.terminate(with: error) }
        // The next call after the resume connects afresh.
        slot.drop(with: error) { _ in true }
    }

    /// Makes calls again.
    func resumeCalls() {
        suspension.refuse(with: nil)
    }
}

extension Lifecycle {
    /// Registers `channel`: after a suspend's grace phase its open calls end with
    /// `unavailable` (suspended), and it refuses new calls until the resume ends.
    @discardableResult
    public func register(_ channel: CallChannel) -> LifecycleRegistration {
        add(ChannelParticipant(channel))
    }
}

/// A channel as a lifecycle participant; holds it weakly.
final class ChannelParticipant: LifecycleParticipant {
    private struct State { weak var channel: CallChannel? }
    private let state: Mutex<State>

    init(_ channel: CallChannel) { state = Mutex(State(channel: channel)) }

    private var channel: CallChannel? { state.withLock { $0.channel } }

    func lifecycleSuspend(_ error: TransportError) -> Bool {
        channel?.suspend(with: error)
        return true
    }

    func lifecycleDidResume() { channel?.resumeCalls() }
    func lifecycleUnregistered() { channel?.resumeCalls() }
    var lifecycleIsGone: Bool { channel == nil }
}
