public import ServiceLifecycle
import SwitchyardCalls

/// A ``TransferServer`` as a `Service`, with its ``Switchyard/CallServer``'s semantics:
/// graceful shutdown stops accepting at once (``TransferServer/close()``) and lets open
/// transfer calls go on; `run()` returns once every call ended and its handler returned,
/// so what a call synced is on disk. Cancellation ends the open calls at once
/// (``TransferServer/closeNow()``: their senders see `unavailable` and resume later from
/// what was synced). `run()` never throws.
extension TransferServer: Service {
    public func run() async throws {
        await withGracefulShutdownHandler {
            await self.serve()
        } onGracefulShutdown: {
            self.close()
        }
    }
}
