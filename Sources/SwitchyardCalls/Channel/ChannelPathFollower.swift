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
        // The slot lets go of the connection on the old path under the same lock as the
        // path is noted: a call that starts meanwhile, applying the current path, waits
        // for it and then gets a new connection (had the slot let go after the calls
        // ended, a call started as soon as they did could get the old one).
        let (change, detached) = last.withLock { last -> (PathChange, ChannelConnectionSlot.Detached?) in
            let change = PathChange(from: last, to: path)
            last = path
            guard let error = change.error else { return (change, nil) }
            return (change, slot.detach(with: error) { change.ends(connectionFrom: $0) })
        }
        guard let error = change.error, let detached else { return }
        // The calls before the connection closes, so that they end with the change and
        // not with the close.
        for call in calls.all where change.ends(connectionFrom: call.connection.localAddress) {
            call.terminate(with: error)
        }
        detached.finish()
    }
}
