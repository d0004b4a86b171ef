import CSwitchyardBackendABI
import Switchyard
import Synchronization
import SwitchyardBackendKit

/// A connect or listen through a library's table, awaited by the calling task and
/// cancelled with it: the task's cancellation reaches the library's `operation_cancel`,
/// which cancels the library's own task, so the library's backend answers as its
/// contract says (`cancelled`, reason `task cancelled`).
final class LoadedOperation: Sendable {
    private let continuation: CheckedContinuation<ForeignHandle, any Error>

    private init(_ continuation: CheckedContinuation<ForeignHandle, any Error>) {
        self.continuation = continuation
    }

    /// The library's `done`: a handle, or the error.
    func finish(_ handle: OpaquePointer?, _ error: UnsafePointer<sy_error>?) {
        if let handle {
            continuation.resume(returning: ForeignHandle(pointer: handle))
        } else {
            continuation.resume(throwing: TransportError(abi: error))
        }
    }

    /// Starts the operation with `start(context)`, which passes `context` to the table's
    /// function with a `done` that calls ``finish(_:_:)``, and returns the operation handle.
    static func run(
        _ library: BackendLibrary, _ start: (UnsafeMutableRawPointer) -> OpaquePointer?
    ) async throws -> OpaquePointer {
        try await runSendable(library, start).pointer
    }

    private static func runSendable(
        _ library: BackendLibrary, _ start: (UnsafeMutableRawPointer) -> OpaquePointer?
    ) async throws -> ForeignHandle {
        let pending = Pending(library)
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                pending.started(start(OnceContext.register(LoadedOperation(continuation))))
            }
        } onCancel: {
            pending.cancel()
        }
    }

    /// The operation handle, and a cancellation that may come before it.
    ///
    /// Safety of `@unchecked Sendable`: the state is behind a mutex; the handle may be
    /// used from any thread (the ABI says so).
    private final class Pending: @unchecked Sendable {
        private enum State {
            case starting
            case cancelledWhileStarting
            case started(ForeignHandle?)
        }
        private let library: BackendLibrary
        private let state = Mutex(State.starting)

        init(_ library: BackendLibrary) { self.library = library }

        deinit {
            if case .started(let operation?) = state.withLock({ $0 }) {
                library.table.operation_release!(operation.pointer)
            }
        }

        func started(_ pointer: OpaquePointer?) {
            let operation = pointer.map(ForeignHandle.init(pointer:))
            let cancelNow = state.withLock { state in
                defer { state = .started(operation) }
                if case .cancelledWhileStarting = state { return true }
                return false
            }
            if cancelNow, let operation { library.table.operation_cancel!(operation.pointer) }
        }

        func cancel() {
            let operation: ForeignHandle? = state.withLock { state in
                switch state {
                case .starting:
                    state = .cancelledWhileStarting
                    return nil
                case .cancelledWhileStarting:
                    return nil
                case .started(let operation):
                    return operation
                }
            }
            if let operation { library.table.operation_cancel!(operation.pointer) }
        }
    }
}
