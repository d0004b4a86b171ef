internal import CSwitchyardPosix
import SwitchyardPosix

/// The ready list of an epoll loop, Swift-typed: a buffer allocated once per loop that
/// ``wait(on:timeoutMilliseconds:)`` fills, each entry the event bits (`EPOLLIN` and
/// the rest) and the data word given to `epoll_ctl` for the descriptor. A backend
/// writes its own loop around it without declaring the C `epoll_event`.
///
/// ```swift
/// var ready = EpollReadyEvents(capacity: 256)
/// let count = try ready.wait(on: epfd, timeoutMilliseconds: -1)
/// for index in 0..<count { dispatch(ready[index].data, ready[index].events) }
/// ```
public struct EpollReadyEvents: ~Copyable {
    private let buffer: UnsafeMutablePointer<epoll_event>
    /// The most events one wait returns.
    public let capacity: Int

    public init(capacity: Int) {
        // Programmer misuse only: a backend passes its own constant, no input sets it.
        precondition(
            capacity > 0 && capacity <= Int(CInt.max),
            "EpollReadyEvents(capacity:) was given \(capacity): an epoll ready list holds 1...Int32.max events (a programming error)")
        self.capacity = capacity
        buffer = .allocate(capacity: capacity)
    }

    deinit {
        buffer.deallocate()
    }

    /// Waits up to `timeoutMilliseconds` (-1: until an event) for ready descriptors of
    /// the epoll instance `epfd`; returns how many entries are filled. An interrupted
    /// wait returns 0, so the caller recomputes its timeout.
    public mutating func wait(on epfd: CInt, timeoutMilliseconds: CInt) throws(SyscallError) -> Int {
        try Posix.epollWait(epfd, buffer, capacity: CInt(capacity), timeoutMilliseconds: timeoutMilliseconds)
    }

    /// The entry at `index` (below the count the last wait returned).
    public subscript(index: Int) -> (events: UInt32, data: UInt64) {
        let event = buffer[index]
        return (event.events, event.data.u64)
    }
}
