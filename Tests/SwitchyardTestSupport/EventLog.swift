import Switchyard
import Synchronization

/// What happened, in order, recorded from any task or thread.
public final class EventLog: Sendable {
    private let list = Mutex<[String]>([])

    public init() {}

    /// Records `event` after those recorded so far.
    public func add(_ event: String) { list.withLock { $0.append(event) } }

    /// Every event so far, in order.
    public var all: [String] { list.withLock { $0 } }

    /// Waits (polling every 5 ms) until `event` happened.
    /// - Throws: `deadlineExceeded` naming the event and what did happen, after `timeout`.
    public func wait(for event: String, timeout: Duration = .seconds(10)) async throws {
        let until = ContinuousClock.now + timeout
        while !all.contains(event) {
            guard ContinuousClock.now < until else {
                throw TransportError(code: .deadlineExceeded, reason: .init("test"), message: "no '\(event)' in \(all)")
            }
            try await Task.sleep(for: .milliseconds(5))
        }
    }
}
