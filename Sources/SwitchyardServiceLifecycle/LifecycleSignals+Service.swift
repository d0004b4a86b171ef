public import ServiceLifecycle
public import SwitchyardBackendKit

/// ``SwitchyardBackendKit/LifecycleSignals`` as a `Service`: it drives its `Lifecycle`
/// from `SIGTSTP` and `SIGCONT` from the moment it is made until the group shuts it down,
/// gracefully or by cancellation; then `run()` cancels it
/// (``SwitchyardBackendKit/LifecycleSignals/cancel()``: the signals' previous actions
/// come back) and returns. List it after the servers whose listeners its lifecycle owns,
/// so it stops first: no suspend or resume reopens a listener during their shutdown.
extension LifecycleSignals: Service {
    public func run() async throws {
        await waitForShutdown()
        cancel()
    }
}
