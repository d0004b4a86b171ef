import Glibc
package import Switchyard
import Synchronization

/// Signals delivered to Swift code, safely: the process's one signal pipe.
///
/// ## Contract
///
/// - The handler installed for each observed signal only writes the signal's number to
///   a nonblocking pipe (async-signal-safe: no allocation, no lock, no Swift runtime);
///   one thread of its own (`sy-signals`) reads the pipe and calls the observers, in the
///   order the signals arrived. Observers run on that thread, one at a time: they must
///   not block (hand the work to a task; ``stream(_:)`` does).
/// - Signals of one kind that arrive faster than the thread reads them may be merged,
///   as the kernel merges pending signals.
/// - A signal's handler is installed when its first observer registers and the action
///   it replaced (a default, `SIG_IGN`, another handler) is put back when its last
///   observer is cancelled. The pipe and the thread, once made, live as long as the
///   process.
/// - Only this type should install handlers for the signals it observes: another
///   `sigaction` for them replaces its handler. (The tools observe `SIGTSTP` and
///   `SIGCONT` here, through ``LifecycleSignals``; `SIGTERM` and `SIGINT` belong to their
///   swift-service-lifecycle `ServiceGroup`, which traps them through dispatch sources.)
package enum ProcessSignals {
    /// Calls `observer` with each of `signals` that arrives, until the observation is
    /// cancelled.
    /// - Throws: when the pipe or a handler cannot be made, the errno's `TransportError`
    ///   (`docs/ERRORS.md`; `SIGKILL` and `SIGSTOP` cannot be caught: `EINVAL`); when the
    ///   thread cannot start, `resourceExhausted`/`resource limit`.
    package static func observe(
        _ signals: [CInt], _ observer: @escaping @Sendable (CInt) -> Void
    ) throws(TransportError) -> SignalObservation {
        let id = try registry.withLock { state throws(TransportError) -> UInt64 in
            if state.pipe == nil {
                let pipe: (read: CInt, write: CInt)
                do throws(SyscallError) {
                    pipe = try Posix.makeSignalPipe()
                } catch {
                    throw ErrnoTable.error(error, while: "making the signal pipe")
                }
                guard runOnNewThread(name: "sy-signals", { readSignals(from: pipe.read) }) else {
                    try? Posix.close(pipe.read)
                    try? Posix.close(pipe.write)
                    throw TransportError(code: .resourceExhausted, reason: .resourceLimit, message: "could not start the signal thread")
                }
                state.pipe = pipe
            }
            for signal in signals where state.installed[signal] == nil {
                do throws(SyscallError) {
                    state.installed[signal] = try Posix.forwardSignal(signal)
                } catch {
                    throw ErrnoTable.error(error, while: "installing a handler for signal \(signal)")
                }
            }
            state.nextID += 1
            state.observers[state.nextID] = Observer(signals: Set(signals), body: observer)
            return state.nextID
        }
        return SignalObservation { cancel(id) }
    }

    /// The arriving `signals` as an async sequence (unbounded: signals are few). The
    /// observation ends when the sequence's iteration ends.
    package static func stream(_ signals: [CInt]) throws(TransportError) -> AsyncStream<CInt> {
        let (stream, continuation) = AsyncStream<CInt>.makeStream()
        let observation = try observe(signals) { continuation.yield($0) }
        continuation.onTermination = { _ in observation.cancel() }
        return stream
    }

    private final class Observer: Sendable {
        let signals: Set<CInt>
        let body: @Sendable (CInt) -> Void
        init(signals: Set<CInt>, body: @escaping @Sendable (CInt) -> Void) {
            self.signals = signals
            self.body = body
        }
    }

    private struct State {
        var pipe: (read: CInt, write: CInt)?
        /// The actions the forwarding handler replaced, by signal.
        var installed: [CInt: sigaction] = [:]
        var observers: [UInt64: Observer] = [:]
        var nextID: UInt64 = 0
    }
    private static let registry = Mutex(State())

    private static func cancel(_ id: UInt64) {
        registry.withLock { state in
            guard let observer = state.observers.removeValue(forKey: id) else { return }
            for signal in observer.signals where !state.observers.values.contains(where: { $0.signals.contains(signal) }) {
                if let previous = state.installed.removeValue(forKey: signal) {
                    Posix.restoreSignal(signal, previous)
                }
            }
        }
    }

    /// The signal thread: reads signal numbers and calls their observers, in order.
    private static func readSignals(from fd: CInt) {
        while true {
            let byte: UInt8?
            do {
                byte = try Posix.readByte(fd)
            } catch {
                return
            }
            guard let byte else { return }
            let signal = CInt(byte)
            let observers = registry.withLock { state in
                state.observers.sorted { $0.key < $1.key }.map(\.value).filter { $0.signals.contains(signal) }
            }
            for observer in observers { observer.body(signal) }
        }
    }
}

/// An observation of signals; cancel it to stop the calls (and, for the last observer of
/// a signal, to put its previous action back).
package final class SignalObservation: Sendable {
    private let onCancel: Mutex<(@Sendable () -> Void)?>
    init(onCancel: @escaping @Sendable () -> Void) { self.onCancel = Mutex(onCancel) }
    /// Stops the calls. Idempotent.
    package func cancel() {
        let action = onCancel.withLock { action in
            defer { action = nil }
            return action
        }
        action?()
    }
}
