import CLibUV

/// libuv's process-wide, one-time state.
enum UVProcess {
    /// The first `uv_loop_init` in a process opens a pipe that libuv keeps for the life
    /// of the process (the lock of its signal handling). Making and closing one loop here,
    /// once, when the backend is registered or first used, opens it up front, so it is
    /// not opened in the middle of someone's count of open descriptors (a leak check).
    static let prepared: Bool = {
        let loop = UnsafeMutablePointer<uv_loop_t>.allocate(capacity: 1)
        defer { loop.deallocate() }
        guard uv_loop_init(loop) == 0 else { return false }
        return uv_loop_close(loop) == 0
    }()
}
