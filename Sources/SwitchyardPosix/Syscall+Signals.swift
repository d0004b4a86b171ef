// The signal calls of the toolkit (for `ProcessSignals`), as `Posix` wrappers through the
// one syscall helper, like every call in Syscall.swift. The signal handler itself is the
// exception the helper cannot serve: it runs inside a signal, where only
// async-signal-safe calls are allowed, so it makes one raw `write` and touches nothing else.

import Glibc

/// The write end of the signal pipe: set once, before the first handler is installed,
/// then only read (by the handler, which cannot capture context).
nonisolated(unsafe) private var signalPipeWriteEnd: CInt = -1

/// The handler every forwarded signal runs: writes the signal's number as one byte to
/// the pipe. Async-signal-safe: one `write` (to a nonblocking pipe: a full pipe drops
/// the byte instead of blocking the interrupted thread), errno saved and restored.
private func forwardingHandler(_ signal: CInt) {
    let saved = errno
    var byte = UInt8(truncatingIfNeeded: signal)
    _ = Glibc.write(signalPipeWriteEnd, &byte, 1)
    errno = saved
}

extension Posix {
    /// A pipe for forwarding signals: both ends close-on-exec, the write end nonblocking.
    /// Returns it and makes it the pipe ``forwardSignal(_:)`` writes to. Call once per
    /// process.
    static func makeSignalPipe() throws(SyscallError) -> (read: CInt, write: CInt) {
        var fds: [CInt] = [-1, -1]
        _ = try syscallNonBlocking("pipe") { pipe(&fds) }
        do {
            for fd in fds { _ = try syscallNonBlocking("fcntl") { fcntl(fd, F_SETFD, FD_CLOEXEC) } }
            let flags = try syscallNonBlocking("fcntl") { fcntl(fds[1], F_GETFL) }
            _ = try syscallNonBlocking("fcntl") { fcntl(fds[1], F_SETFL, flags | O_NONBLOCK) }
        } catch {
            try? close(fds[0])
            try? close(fds[1])
            throw error
        }
        signalPipeWriteEnd = fds[1]
        return (fds[0], fds[1])
    }

    /// Installs the forwarding handler for `signal` (with `SA_RESTART`, so interrupted
    /// calls of other threads resume) and returns the action it replaced.
    static func forwardSignal(_ signal: CInt) throws(SyscallError) -> sigaction {
        var action = sigaction()
        action.__sigaction_handler.sa_handler = forwardingHandler
        sigemptyset(&action.sa_mask)
        action.sa_flags = SA_RESTART
        var previous = sigaction()
        _ = try syscallNonBlocking("sigaction") { () -> CInt in sigaction(signal, &action, &previous) }
        return previous
    }

    /// Puts back the action ``forwardSignal(_:)`` replaced.
    static func restoreSignal(_ signal: CInt, _ previous: sigaction) {
        var previous = previous
        _ = try? syscallNonBlocking("sigaction") { () -> CInt in sigaction(signal, &previous, nil) }
    }

    /// Reads one byte from a blocking descriptor; nil at end of file.
    static func readByte(_ fd: CInt) throws(SyscallError) -> UInt8? {
        var byte: UInt8 = 0
        switch try syscall("read", { Glibc.read(fd, &byte, 1) }) {
        case .done(let count): return count == 1 ? byte : nil
        case .wouldBlock: throw SyscallError(call: "read", errno: EAGAIN)
        }
    }

    /// Stops the whole process (`SIGSTOP` to itself, which cannot be caught) until a
    /// `SIGCONT`; returns once continued.
    package static func stopProcess() {
        _ = try? syscallNonBlocking("kill") { kill(getpid(), SIGSTOP) }
    }
}
