public import ServiceLifecycle
public import SwitchyardNetlink

/// A ``SwitchyardNetlink/NetlinkConnectivityMonitor`` as a `Service`: a resource with a
/// lifetime (its own thread and netlink socket) that others follow.
///
/// `run()` waits until the group shuts it down, gracefully or by cancellation, then
/// closes the monitor (``SwitchyardNetlink/NetlinkConnectivityMonitor/close()``: the
/// thread ends and the socket closes before `run()` returns). A group shuts its services
/// down in the reverse of their order: list the monitor before the services that follow
/// it (channels, a ``Switchyard/SiteReachability``), and it stops after them.
extension NetlinkConnectivityMonitor: Service {
    public func run() async throws {
        await waitForShutdown()
        close()
    }
}
