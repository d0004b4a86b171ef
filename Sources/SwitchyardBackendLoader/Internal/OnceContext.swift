import Synchronization
import SwitchyardBackendKit

/// Contexts for the callbacks a backend library must call exactly once (a write's or an
/// output shutdown's `done`, a connect's or a listen's `done`, a shutdown's `done`, a
/// loop task's `run` or `drop`), handed over as tokens rather than pointers.
///
/// A library that breaks the interface's contract and calls one of them a second time
/// then finds no token, instead of making the host touch freed memory and crash: the
/// call is dropped and recorded as a contract violation, which the conformance kit
/// reports as a failure of the scenario that caused it
/// (``LoadableBackend/takeContractViolations()``). One lock per callback: this is the
/// loaded path only, which already allocates a box per callback.
enum OnceContext {
    /// A registered object. Safety of `@unchecked Sendable`: the registry only keeps it;
    /// whoever takes it back (once) is the only one to use it, as with the retained
    /// pointer this replaces.
    private struct Held: @unchecked Sendable {
        let object: AnyObject
    }
    private struct Registry {
        var next: UInt = 1
        var live: [UInt: Held] = [:]
    }
    private static let registry = Mutex(Registry())
    private static let violations = Mutex<[String]>([])

    /// A token for `object`, kept until ``take(_:as:what:)`` takes it back.
    static func register(_ object: AnyObject) -> UnsafeMutableRawPointer {
        let token = registry.withLock { registry in
            let token = registry.next
            registry.next += 1
            registry.live[token] = Held(object: object)
            return token
        }
        return UnsafeMutableRawPointer(bitPattern: token)!
    }

    /// The object registered under `context`, once; nil (and a recorded violation
    /// naming `what`) for a token already taken or never given.
    static func take<T: AnyObject>(_ context: UnsafeMutableRawPointer?, as type: T.Type, what: String) -> T? {
        let token = UInt(bitPattern: context)
        if let held = registry.withLock({ $0.live.removeValue(forKey: token) }) {
            return held.object as? T
        }
        violations.withLock {
            $0.append("a backend library called \(what) with a context it had already used or was never given (it must call it exactly once); the call was ignored")
        }
        return nil
    }

    /// The violations recorded since the last call, oldest first.
    static func takeViolations() -> [String] {
        violations.withLock { violations in
            defer { violations.removeAll() }
            return violations
        }
    }
}
