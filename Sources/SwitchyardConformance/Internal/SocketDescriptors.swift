import Glibc
import SwitchyardPosix

/// Finds the descriptor of one of the process's own TCP connections without any
/// backend's API (a loaded backend's connection crosses a C boundary and shows no
/// descriptor): the kernel's table of TCP sockets (`/proc/net/tcp`, `/proc/net/tcp6`)
/// gives the inode of the established socket with these ports, and `/proc/self/fd`
/// the descriptor whose link is `socket:[inode]`.
enum SocketDescriptors {
    /// The descriptor of the established TCP connection from `localPort` to
    /// `remotePort` (on loopback both ends live in this process: the pair of ports tells
    /// them apart), or nil when there is none.
    static func descriptor(localPort: Int, remotePort: Int) -> Int32? {
        guard let inode = establishedInode(localPort: localPort, remotePort: remotePort) else { return nil }
        let target = "socket:[\(inode)]"
        return DescriptorSnapshot.take().targets.first { $0.value == target }?.key
    }

    /// The inode of the established TCP socket with these ports, from the kernel's tables.
    static func establishedInode(localPort: Int, remotePort: Int) -> UInt64? {
        for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
            guard let text = readFile(table) else { continue }
            for line in text.split(separator: "\n").dropFirst() {
                let fields = line.split(separator: " ", omittingEmptySubsequences: true)
                // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
                guard fields.count > 9, fields[3] == "01",
                      port(of: fields[1]) == localPort, port(of: fields[2]) == remotePort,
                      let inode = UInt64(fields[9]), inode != 0
                else { continue }
                return inode
            }
        }
        return nil
    }

    /// The port of an `ADDRESS:PORT` field (both in hexadecimal).
    private static func port(of field: Substring) -> Int? {
        guard let colon = field.lastIndex(of: ":") else { return nil }
        return Int(field[field.index(after: colon)...], radix: 16)
    }

    private static func readFile(_ path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { break }
            bytes.append(contentsOf: chunk[..<count])
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}

/// What the kit puts in place of a connection's descriptor with `dup2`, the ways a
/// descriptor is reclaimed underneath a connection: code elsewhere in the process closes
/// the number and it is reused, or `dup2`s something over it.
enum DescriptorReplacement: String, Sendable, CaseIterable {
    /// A fresh, unconnected TCP socket (a send fails with `EPIPE`).
    case freshSocket = "a fresh unconnected socket"
    /// `/dev/null`, which takes every `write` (a send fails with `ENOTSOCK`; it cannot be polled).
    case devNull = "/dev/null"
    /// An unlinked regular file, which takes every `write` and cannot be polled.
    case regularFile = "a regular file"
    /// The write end of a pipe whose read end stays open: it takes a `write` (up to its
    /// buffer) and polls writable.
    case pipe = "the write end of a pipe"

    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// Puts a new descriptor of this kind in place of `fd` (`dup2`, atomic: the number is
    /// never free in between). Returns the descriptors the kit keeps open meanwhile (the
    /// pipe's read end) for ``release(_:)``; the replacement at `fd` itself belongs to the
    /// connection now, which closes it when it ends.
    func replace(_ fd: Int32) throws -> [Int32] {
        var kept: [Int32] = []
        let replacement: Int32
        switch self {
        case .freshSocket:
            replacement = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        case .devNull:
            replacement = open("/dev/null", O_RDWR | O_CLOEXEC)
        case .regularFile:
            var template = Array("/tmp/switchyard-reclaimed-XXXXXX".utf8CString)
            replacement = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
            if replacement >= 0 {
                _ = fcntl(replacement, F_SETFD, FD_CLOEXEC)
                template.withUnsafeBufferPointer { _ = unlink($0.baseAddress!) }
            }
        case .pipe:
            var ends: [Int32] = [-1, -1]
            if Glibc.pipe(&ends) == 0 {
                for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
                kept.append(ends[0])
                replacement = ends[1]
            } else {
                replacement = -1
            }
        }
        guard replacement >= 0 else {
            let code = errno
            throw Failure(description: "opening \(rawValue) failed: \(String(cString: strerror(code)))")
        }
        defer { close(replacement) }
        guard dup2(replacement, fd) == fd else {
            let code = errno
            for other in kept { close(other) }
            throw Failure(description: "dup2 of \(rawValue) over descriptor \(fd) failed: \(String(cString: strerror(code)))")
        }
        return kept
    }

    /// Closes the descriptors ``replace(_:)`` kept.
    static func release(_ kept: [Int32]) {
        for fd in kept { close(fd) }
    }
}
