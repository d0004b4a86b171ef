import SwitchyardBackendKit
import Testing
import SwitchyardPosix

@Suite("Epoll ready list")
struct EpollReadyEventsTests {
    @Test("A wait reports the ready descriptor's data word and event bits, and nothing once it is drained")
    func reportsReadyDescriptor() throws {
        let epoll = Socket(takingOwnershipOf: try Posix.epollCreate())
        let wake = Socket(takingOwnershipOf: try Posix.eventfdCreate())
        let outcome = Result { () throws(SyscallError) -> (Int, UInt64, UInt32, Int) in
            var ready = EpollReadyEvents(capacity: 4)
            try Posix.epollControl(epoll.descriptor, Posix.epollAdd, wake.descriptor, events: Posix.Events.input, data: 42)
            try Posix.eventfdSignal(wake.descriptor)
            let count = try ready.wait(on: epoll.descriptor, timeoutMilliseconds: 1000)
            let (events, data) = ready[0]
            try Posix.eventfdDrain(wake.descriptor)
            let after = try ready.wait(on: epoll.descriptor, timeoutMilliseconds: 0)
            return (count, data, events, after)
        }
        wake.close()
        epoll.close()
        let (count, data, events, after) = try outcome.get()
        #expect(count == 1)
        #expect(data == 42)
        #expect(events & Posix.Events.input != 0)
        #expect(after == 0)
    }
}
