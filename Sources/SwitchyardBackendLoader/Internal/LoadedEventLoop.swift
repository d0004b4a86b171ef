import CSwitchyardBackendABI
import Switchyard
import SwitchyardBackendKit

/// The host's face of one of a loaded backend's event loops: one object per library
/// loop per transport (``LoadedTransportCore/loop(_:)``), so every connection on a loop
/// has the same ``Connection/eventLoop``. It is a `TaskExecutor` like every loop: a job
/// runs on the library's loop thread.
///
/// Safety of `@unchecked Sendable`: immutable; the handle may be used from any thread.
final class LoadedEventLoop: TransportEventLoop, @unchecked Sendable {
    private let library: BackendLibrary
    private let handle: OpaquePointer

    /// Takes over one reference to `handle` (the caller retained it).
    init(library: BackendLibrary, handle: ForeignHandle) {
        self.library = library
        self.handle = handle.pointer
    }

    deinit { library.table.loop_release!(handle) }

    var inEventLoop: Bool { library.table.loop_in_event_loop!(handle) }

    func execute(_ work: @escaping @Sendable () -> Void) {
        library.table.loop_execute!(
            handle,
            { OnceContext.take($0, as: WorkBox.self, what: "a loop task's run or drop")?.work() },
            { _ = OnceContext.take($0, as: WorkBox.self, what: "a loop task's run or drop") },
            OnceContext.register(WorkBox(work)))
    }
}

/// Work for a library's loop, held until it runs or is dropped.
private final class WorkBox {
    let work: @Sendable () -> Void
    init(_ work: @escaping @Sendable () -> Void) { self.work = work }
}
