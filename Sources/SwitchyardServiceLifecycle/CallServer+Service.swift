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
