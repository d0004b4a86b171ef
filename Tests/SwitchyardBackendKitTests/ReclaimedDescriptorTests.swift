import Glibc
import Switchyard
import SwitchyardBackendKit
import Testing
import SwitchyardPosix

/// A connected pair of stream sockets, closed by ``close()``.
private struct SocketPair {
    var first: CInt
    var second: CInt

    init() throws {
        var fds: [CInt] = [-1, -1]
        try #require(socketpair(AF_UNIX, CInt(SOCK_STREAM.rawValue) | CInt(SOCK_CLOEXEC.rawValue), 0, &fds) == 0)
        first = fds[0]
        second = fds[1]
    }

    func close() {
        _ = Glibc.close(first)
        _ = Glibc.close(second)
    }
}

/// Puts `replacement` (then closed) in place of `fd` with dup2, as code that reclaims a
/// descriptor would.
private func replace(_ fd: CInt, with replacement: CInt) throws {
    try #require(replacement >= 0)
    try #require(dup2(replacement, fd) == fd)
    _ = close(replacement)
}

private let resetError = TransportError(
    code: .unavailable, reason: .reset, message: "writing to peer: send failed",
    native: TransportError.NativeError(domain: .errno, code: EPIPE, name: "EPIPE"))

@Suite("A socket's identity tells a reclaimed descriptor from a broken connection")
struct ReclaimedDescriptorTests {
    @Test("A socket's identity is its device and inode; anything but a socket has none")
    func identityOfASocket() throws {
        let pair = try SocketPair()
        defer { pair.close() }
        let identity = try #require(SocketIdentity(descriptor: pair.first))
        var status = stat()
        try #require(fstat(pair.first, &status) == 0)
        #expect(identity == SocketIdentity(device: UInt64(status.st_dev), inode: UInt64(status.st_ino)))
        #expect(identity != SocketIdentity(descriptor: pair.second))
        let null = open("/dev/null", O_RDWR | O_CLOEXEC)
        defer { _ = close(null) }
        #expect(SocketIdentity(descriptor: null) == nil)
        #expect(SocketIdentity(descriptor: -1) == nil)
    }

    @Test("The same socket checks same, and its errors stay what the table made them")
    func sameSocket() throws {
        let pair = try SocketPair()
        defer { pair.close() }
        let identity = try #require(SocketIdentity(descriptor: pair.first))
        #expect(identity.check(pair.first) == .same)
        let error = identity.connectionError(resetError, descriptor: pair.first)
        #expect(error == resetError)
    }

    @Test(
        "Every kind of replacement dup2 can put in place of the socket checks replaced, and an error then ends the connection reclaimed",
        arguments: ["a fresh socket", "/dev/null", "a regular file", "a pipe"])
    func replaced(kind: String) throws {
        let pair = try SocketPair()
        defer { pair.close() }
        let identity = try #require(SocketIdentity(descriptor: pair.first))
        var kept: CInt = -1
        defer { if kept >= 0 { _ = close(kept) } }
        let expected: String
        switch kind {
        case "a fresh socket":
            try replace(pair.first, with: socket(AF_INET, CInt(SOCK_STREAM.rawValue) | CInt(SOCK_CLOEXEC.rawValue), 0))
            expected = "another socket"
        case "/dev/null":
            try replace(pair.first, with: open("/dev/null", O_RDWR | O_CLOEXEC))
            expected = "a character device"
        case "a regular file":
            var template = Array("/tmp/switchyard-identity-XXXXXX".utf8CString)
            let file = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
            template.withUnsafeBufferPointer { _ = unlink($0.baseAddress!) }
            try replace(pair.first, with: file)
            expected = "a regular file"
        default:
            var ends: [CInt] = [-1, -1]
            try #require(pipe(&ends) == 0)
            kept = ends[0]
            try replace(pair.first, with: ends[1])
            expected = "a pipe"
        }
        #expect(identity.check(pair.first) == .replaced(by: expected))
        let error = identity.connectionError(resetError, descriptor: pair.first)
        #expect(error.code == .unavailable)
        #expect(error.reason == .reclaimed)
        #expect(error.native == resetError.native, "the native error is kept")
        #expect(error.message.contains(expected))
    }

    @Test("A closed descriptor checks closed, and an error on it ends the connection reclaimed")
    func closed() throws {
        let pair = try SocketPair()
        defer { _ = close(pair.second) }
        let identity = try #require(SocketIdentity(descriptor: pair.first))
        _ = close(pair.first)
        #expect(identity.check(pair.first) == .closed)
        #expect(identity.connectionError(resetError, descriptor: pair.first).reason == .reclaimed)
    }

    @Test("A file status compares by device and inode, and names the file type for messages")
    func statusComparison() {
        let identity = SocketIdentity(device: 8, inode: 42)
        let socketType = UInt32(S_IFSOCK)
        #expect(identity.check(FileStatus(device: 8, inode: 42, mode: socketType | 0o777)) == .same)
        #expect(identity.check(FileStatus(device: 8, inode: 43, mode: socketType)) == .replaced(by: "another socket"))
        #expect(identity.check(FileStatus(device: 9, inode: 42, mode: socketType)) == .replaced(by: "another socket"))
        #expect(identity.check(FileStatus(device: 8, inode: 42, mode: UInt32(S_IFIFO))) == .same)
        #expect(identity.check(FileStatus(device: 5, inode: 1, mode: UInt32(S_IFIFO))) == .replaced(by: "a pipe"))
        #expect(FileStatus(device: 0, inode: 0, mode: socketType).isSocket)
        #expect(!FileStatus(device: 0, inode: 0, mode: UInt32(S_IFREG)).isSocket)
    }

    @Test("ECONNABORTED, what the kernel gives a socket it destroyed (ss -K), is reclaimed in the errno table")
    func destroyedSocketIsReclaimed() {
        let error = ErrnoTable.error(errno: ECONNABORTED, message: "reading")
        #expect(error.code == .unavailable)
        #expect(error.reason == .reclaimed)
    }

    @Test("Sends fail on anything that is not a socket, where write(2) would succeed")
    func sendRefusesNonSockets() throws {
        let null = open("/dev/null", O_RDWR | O_CLOEXEC)
        defer { _ = close(null) }
        let bytes: [UInt8] = [1, 2, 3]
        #expect(bytes.withUnsafeBytes { write(null, $0.baseAddress, $0.count) } == 3)
        let error = #expect(throws: SyscallError.self) {
            try bytes.withUnsafeBytes { _ = try Posix.send(null, $0) }
        }
        #expect(error?.errno == ENOTSOCK)
    }
}
