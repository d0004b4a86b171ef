public import Switchyard
public import SwitchyardNetlink

/// A client tool following the network (`echo-client --reconnect`, `transfer-client
/// --follow-network`): a netlink monitor for the tool's channel, whose rule then ends the
/// calls on a changed network at once; the path at the start and each change are told as
/// the tool tells them. Where no monitor can be made (no netlink), ``monitor`` is nil, the
/// tool is told why, and it goes on recovering from broken connections only.
public final class FollowedNetwork: Sendable {
    /// The monitor to give the tool's `CallChannel`, or nil.
    public let monitor: NetlinkConnectivityMonitor?
    private let observation: ConnectivityObservation?

    /// - Parameters:
    ///   - now: told the path when the monitor starts.
    ///   - changed: told each change of path, on the monitor's thread.
    ///   - unavailable: told why there is no monitor.
    public init(
        now: (ConnectivityPath) -> Void, changed: @escaping @Sendable (ConnectivityPath) -> Void,
        unavailable: (TransportError) -> Void
    ) {
        do {
            let netlink = try NetlinkConnectivityMonitor()
            now(netlink.current)
            observation = netlink.observe(changed)
            monitor = netlink
        } catch {
            unavailable(error)
            observation = nil
            monitor = nil
        }
    }

    /// Stops telling changes and closes the monitor.
    public func stop() {
        observation?.cancel()
        monitor?.close()
    }
}
