public import ServiceLifecycle
import Switchyard
public import SwitchyardReachability

/// A ``Switchyard/SiteReachability`` as a `Service`: background work (a probe at start
/// and on every change the monitor reports) that runs until the group stops it.
///
/// `run()` starts it (``Switchyard/SiteReachability/start()``; nothing if it was started
/// already), waits until the group shuts it down, gracefully or by cancellation, then
/// stops it (``Switchyard/SiteReachability/stop()``: a running probe is cancelled and
/// its connection closed, every `updates` sequence finishes) and returns once nothing of
/// it runs. Both shutdowns are the same here: a probe is a question about the network
/// now, not work worth finishing.
extension SiteReachability: Service {
    public func run() async throws {
        start()
        await waitForShutdown()
        await stop()
    }
}
