import SwitchyardPosix

/// Creates an epoll instance and an eventfd registered in it for input under the data
/// word `wakeData`: what an epoll loop needs to be woken from other threads
/// (`eventfd_write(wakeup, 1)`; when the ready list reports `wakeData`, `eventfd_read`
/// takes the count). Both are close-on-exec and the eventfd nonblocking; on
/// failure neither stays open. The caller closes both when the loop has stopped.
public func epollCreateWithWakeup(wakeData: UInt64) throws(SyscallError) -> (epoll: CInt, wakeup: CInt) {
    let epoll = try Posix.epollCreate()
    let wakeup: CInt
    do {
        wakeup = try Posix.eventfdCreate()
    } catch {
        try? Posix.close(epoll)
        throw error
    }
    do {
        try Posix.epollControl(epoll, Posix.epollAdd, wakeup, events: Posix.Events.input, data: wakeData)
    } catch {
        try? Posix.close(wakeup)
        try? Posix.close(epoll)
        throw error
    }
    return (epoll, wakeup)
}
