import Synchronization
import Switchyard

/// How a channel follows its `ConnectivityMonitor` (behaviour 2 of the design): on a
/// change of category, or of the path under its connection (`PathChange` has the rule),
/// the calls on the old path end with the change's error, then the connection on it is
/// closed, so the next call connects afresh over the new path.
///
/// The monitor's report and a call that starts right after it race: the monitor calls
/// its observers one after another, and the code that heard the report first may start a
/// call before the channel's observer ran. So a starting call also applies the
/// monitor's current path (``apply(_:)``): a call that starts after the report never
/// uses the connection on the old path. Applying the same path twice changes nothing.
final class ChannelPathFollower: Sendable {
    private let last: Mutex<ConnectivityPath>
    private let calls: CallSet
    private let slot: ChannelConnectionSlot

    init(from path: ConnectivityPath, calls: CallSet, slot: ChannelConnectionSlot) {
        self.last = Mutex(path)
        self.calls = calls
        self.slot = slot
    }

    /// The monitor now reports `path`.
    func apply(_ path: ConnectivityPath) {
        let change = last.withLock { last in
            defer { last = path }
            return PathChange(from: last, to: path)
        }
        guard let error = change.error else { return }
        // The calls first, so that they end with the change and not with the
        // connection's close that follows.
        for call in calls.all where change.ends(connectionFrom: call.connection.localAddress) {
            call.terminate(with: error)
        }
        slot.drop(with: error) { change.ends(connectionFrom: $0) }
    }
}
