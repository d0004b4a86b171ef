import Glibc
import Switchyard
import SwitchyardBackendKit

/// A TCP client socket of the kit's own, outside every backend, for scenarios that must
/// hold a socket before they start a connect (the descriptor already exists when the
/// process runs out of them) or see what a peer does without a backend in between.
/// Nonblocking; every wait is bounded by `poll`.
///
/// Safety of `@unchecked Sendable`: a scenario uses each socket from one task at a time
/// (it hands it on only by awaiting the task that used it), so `closed` is never raced.
final class RawClientSocket: @unchecked Sendable {
    let fd: CInt
    private var closed = false

    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// Opens a socket of `endpoint`'s family (an IP literal).
    init(for endpoint: Endpoint) throws {
        guard let address = try SystemSocketAddress(literal: endpoint) else {
            throw Failure(description: "\(endpoint) is not an IP literal")
        }
        let fd = socket(address.family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw Failure(description: "socket() failed: \(String(cString: strerror(errno)))") }
        self.fd = fd
    }

    /// Starts a nonblocking connect to `endpoint`; it needs no new descriptor.
    func startConnect(to endpoint: Endpoint) throws {
        guard let address = try SystemSocketAddress(literal: endpoint) else {
            throw Failure(description: "\(endpoint) is not an IP literal")
        }
        let result = address.withSockaddr { connect(fd, $0, $1) }
        if result != 0, errno != EINPROGRESS {
            throw Failure(description: "connect to \(endpoint) failed: \(String(cString: strerror(errno)))")
        }
    }

    /// Waits up to `milliseconds` for `events`; the events that came (0 on timeout).
    func wait(for events: Int16, milliseconds: Int32) -> Int16 {
        var entry = pollfd(fd: fd, events: events, revents: 0)
        let deadline = ContinuousClock.now + .milliseconds(Int(milliseconds))
        while true {
            let left = ContinuousClock.now.duration(to: deadline)
            let ms = max(0, Int32(left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000))
            let ready = poll(&entry, 1, ms)
            if ready < 0, errno == EINTR { continue }
            return ready > 0 ? entry.revents : 0
        }
    }

    /// The connect's outcome once writable: 0 when connected, else the errno.
    func connectError() -> CInt {
        var code: CInt = 0
        var length = socklen_t(MemoryLayout<CInt>.size)
        guard getsockopt(fd, SOL_SOCKET, SO_ERROR, &code, &length) == 0 else { return errno }
        return code
    }

    /// Sends `bytes` (small: one call); the errno on failure.
    func send(_ bytes: [UInt8]) -> CInt? {
        let sent = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        return sent == bytes.count ? nil : (sent < 0 ? errno : EAGAIN)
    }

    /// Waits for the connect, sends `bytes` and reads them back, all on this thread
    /// (blocked in `poll`, at most `milliseconds` in all); nil when they came back
    /// intact, else what went wrong.
    func echo(_ bytes: [UInt8], milliseconds: Int32) -> String? {
        let deadline = ContinuousClock.now + .milliseconds(Int(milliseconds))
        func left() -> Int32 {
            let rest = ContinuousClock.now.duration(to: deadline)
            return max(0, Int32(rest.components.seconds * 1000 + rest.components.attoseconds / 1_000_000_000_000_000))
        }
        if wait(for: Int16(POLLOUT), milliseconds: left()) == 0 { return "not connected within \(milliseconds) ms" }
        let code = connectError()
        if code != 0 { return "the connect failed: \(String(cString: strerror(code)))" }
        var sent = 0
        while sent < bytes.count {
            let count = bytes[sent...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if count > 0 {
                sent += count
            } else if count < 0, errno == EAGAIN || errno == EINTR {
                if wait(for: Int16(POLLOUT), milliseconds: left()) == 0 { return "send timed out after \(sent) bytes" }
            } else {
                return "send failed: \(String(cString: strerror(errno)))"
            }
        }
        var received: [UInt8] = []
        while received.count < bytes.count {
            switch receive(upTo: bytes.count - received.count) {
            case .bytes(let more): received += more
            case .endOfStream: return "end of stream after \(received.count) of \(bytes.count) bytes"
            case .failed(let error): return "recv failed: \(String(cString: strerror(error)))"
            case .nothing:
                // An echo over loopback comes in milliseconds: nothing for the kit's quiet
                // limit is a failure, saying how much came.
                let quiet = Int32(quietLimit * 1000)
                let wait = min(left(), quiet)
                if self.wait(for: Int16(POLLIN), milliseconds: wait) == 0 {
                    return wait == quiet
                        ? "received \(received.count) of \(bytes.count) bytes, then nothing for \(quiet) ms"
                        : "received \(received.count) of \(bytes.count) bytes within \(milliseconds) ms"
                }
            }
        }
        return received == bytes ? nil : "the echo differs from what was sent"
    }

    /// What one read gave: bytes, end of stream, an errno, or nothing yet.
    enum Received {
        case bytes([UInt8])
        case endOfStream
        case failed(CInt)
        case nothing
    }

    /// Reads once, without waiting.
    func receive(upTo count: Int = 64 * 1024) -> Received {
        var buffer = [UInt8](repeating: 0, count: count)
        let received = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if received > 0 { return .bytes(Array(buffer[..<received])) }
        if received == 0 { return .endOfStream }
        return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? .nothing : .failed(errno)
    }

    /// Closes the descriptor; idempotent.
    func close() {
        guard !closed else { return }
        closed = true
        _ = Glibc.close(fd)
    }

    deinit {
        close()
    }
}
