// SwitchyardServiceLifecycle: Switchyard's long-running parts as swift-service-lifecycle
// `Service`s, and ShutdownSignals for the tools.
//
// What is a Service, and why:
// - CallServer (here) and TransferServer (in SwitchyardTransfer): they serve until told to
//   stop, and a stop has two speeds: graceful (stop accepting, let open calls finish)
//   and at once (cancel them).
// - NetlinkConnectivityMonitor: a resource with a lifetime (a thread and a netlink
//   socket) that others follow, so its end is ordered after theirs in a group.
// - SiteReachability: background work (probes at start, on changes, with backoff) that
//   runs until stopped.
// - LifecycleSignals: drives a Lifecycle from SIGTSTP/SIGCONT until cancelled; in a group
//   it stops first, so no suspend or resume touches a listener during the shutdown.
// What is not:
// - Lifecycle: state (listeners and connections to suspend and resume), no work of its
//   own; LifecycleSignals or the app drives it.
// - A SuspendableListener (or any Listener): it accepts for a server; the server that
//   owns it is the Service (echo-server's raw mode has its own, RawEchoServer).
// - Transport: its event loops outlive every service that uses them, and its own
//   shutdown(gracePeriod:) already is graceful-then-forced; a tool shuts it down after
//   its group returns. (An `any Transport` could not conform anyway.)
// - CallChannel: a client's calls belong to the caller's tasks, which cancel them.

public import ServiceLifecycle
public import Switchyard

/// A ``Switchyard/CallServer`` as a `Service`: it serves until the group shuts it down.
///
/// - **Graceful shutdown** stops accepting at once (``Switchyard/CallServer/close()``:
///   the listener closes, so new connects are refused); open calls go on, and `run()`
///   returns once every call ended and every call's task returned.
/// - **Cancellation** (of the task in `run()`, a group's cancellation, or a graceful
///   shutdown escalated by `maximumGracefulShutdownDuration`) ends everything at once
///   (``Switchyard/CallServer/closeNow()``): open calls end `cancelled`, the calls' tasks
///   are cancelled, and `run()` returns once they returned.
///
/// `run()` never throws. The server serves from its `start`, before `run()`; the group
/// decides when it stops.
extension CallServer: Service {
    public func run() async throws {
        await withGracefulShutdownHandler {
            await self.serve()
        } onGracefulShutdown: {
            self.close()
        }
    }
}
