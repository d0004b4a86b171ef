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
        guard let address = try SocketAddress(literal: endpoint) else {
            throw Failure(description: "\(endpoint) is not an IP literal")
        }
        let fd = socket(address.family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw Failure(description: "socket() failed: \(String(cString: strerror(errno)))") }
        self.fd = fd
    }

    /// Starts a nonblocking connect to `endpoint`; it needs no new descriptor.
    func startConnect(to endpoint: Endpoint) throws {
        guard let address = try SocketAddress(literal: endpoint) else {
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
