import CSwitchyardEpollGuard
import CSwitchyardPosix
import Glibc
import Testing

/// The epoll guard (`Sources/CSwitchyardEpollGuard`): the process's own `epoll_ctl`,
/// which keeps libuv from aborting on a reclaimed descriptor.
@Suite("The epoll guard", .serialized)
struct EpollGuardTests {
    @Test("This test binary exports the guard's epoll_ctl, so libuv's call binds to it")
    func guardIsActive() {
        #expect(csy_epoll_guard_is_active() == 1)
    }

    @Test("On a guarded epoll descriptor, ADD or MOD failing with ENOENT, EPERM or EBADF reports success, is recorded, and wakes the loop")
    func guardedFailures() throws {
        let epfd = epoll_create1(CInt(EPOLL_CLOEXEC))
        try #require(epfd >= 0)
        defer { _ = close(epfd) }
        let wakes = UnsafeMutablePointer<Int>.allocate(capacity: 1)
        wakes.pointee = 0
        defer { wakes.deallocate() }
        let slot = csy_epoll_guard_register(epfd, { $0!.assumingMemoryBound(to: Int.self).pointee += 1 }, wakes)
        try #require(slot >= 0)
        defer { csy_epoll_guard_unregister(slot) }

        var ends: [CInt] = [-1, -1]
        try #require(pipe(&ends) == 0)
        defer { for end in ends { _ = close(end) } }
        let null = open("/dev/null", O_RDWR | O_CLOEXEC)
        defer { _ = close(null) }
        var event = epoll_event()
        event.events = EPOLLIN.rawValue
        // MOD of a descriptor never added: ENOENT. ADD of /dev/null: EPERM. A closed number: EBADF.
        #expect(epoll_ctl(epfd, CInt(EPOLL_CTL_MOD), ends[0], &event) == 0)
        #expect(epoll_ctl(epfd, CInt(EPOLL_CTL_ADD), null, &event) == 0)
        #expect(epoll_ctl(epfd, CInt(EPOLL_CTL_ADD), 100_000, &event) == 0)
        #expect(wakes.pointee == 3)
        // A success is the system call's: the pipe is really added.
        #expect(epoll_ctl(epfd, CInt(EPOLL_CTL_ADD), ends[0], &event) == 0)
        // DEL failures and other errors pass through (EEXIST: libuv's own fallback to MOD).
        #expect(epoll_ctl(epfd, CInt(EPOLL_CTL_ADD), ends[0], &event) == -1 && errno == EEXIST)
        #expect(epoll_ctl(epfd, CInt(EPOLL_CTL_DEL), ends[1], &event) == -1 && errno == ENOENT)
        #expect(wakes.pointee == 3)

        var fds = [CInt](repeating: -1, count: 8)
        var codes = [CInt](repeating: 0, count: 8)
        let taken = csy_epoll_guard_take(slot, &fds, &codes, 8)
        #expect(taken == 3)
        #expect(Array(fds.prefix(3)) == [ends[0], null, 100_000])
        #expect(Array(codes.prefix(3)) == [ENOENT, EPERM, EBADF])
        #expect(csy_epoll_guard_take(slot, &fds, &codes, 8) == 0)
    }

    @Test("More failures than the record holds are reported lost once, so the loop checks every connection")
    func lostRecords() throws {
        let epfd = epoll_create1(CInt(EPOLL_CLOEXEC))
        try #require(epfd >= 0)
        defer { _ = close(epfd) }
        let slot = csy_epoll_guard_register(epfd, { _ in }, nil)
        try #require(slot >= 0)
        defer { csy_epoll_guard_unregister(slot) }
        var event = epoll_event()
        for fd in CInt(100_000)..<100_100 {
            #expect(epoll_ctl(epfd, CInt(EPOLL_CTL_MOD), fd, &event) == 0)
        }
        var fds = [CInt](repeating: -1, count: 8)
        var codes = [CInt](repeating: 0, count: 8)
        #expect(csy_epoll_guard_take(slot, &fds, &codes, 8) == -1)
        #expect(csy_epoll_guard_take(slot, &fds, &codes, 8) == 0)
    }

    @Test("Any other epoll descriptor gets epoll_ctl's own failure")
    func unguardedFailures() throws {
        let epfd = epoll_create1(CInt(EPOLL_CLOEXEC))
        try #require(epfd >= 0)
        defer { _ = close(epfd) }
        let null = open("/dev/null", O_RDWR | O_CLOEXEC)
        defer { _ = close(null) }
        var event = epoll_event()
        event.events = EPOLLIN.rawValue
        #expect(epoll_ctl(epfd, CInt(EPOLL_CTL_ADD), null, &event) == -1 && errno == EPERM)
        #expect(epoll_ctl(epfd, CInt(EPOLL_CTL_MOD), 100_000, &event) == -1 && errno == EBADF)
    }
}
