import Glibc
import Switchyard

/// A regular file as a ``TransferSource``. It stays open while the value lives (the
/// descriptor is closed when the last copy goes away).
public struct FileTransferSource: TransferSource {
    public let path: String
    public let size: UInt64
    /// `path`, size, modification time (ns) and inode: another version of the file has
    /// another identity.
    public let identity: String
    private let file: OpenFile

    /// Opens `path`.
    /// - Throws: `notFound` (no such file), `permissionDenied`, `invalidArgument` (not a
    ///   regular file), `internal`/`i/o error` otherwise.
    public init(path: String) throws {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            let code = errno
            let message = "cannot open \(path): \(String(cString: strerror(code)))"
            switch code {
            case ENOENT, ENOTDIR: throw TransportError(code: .notFound, reason: .ioError, message: message)
            case EACCES, EPERM: throw TransportError(code: .permissionDenied, reason: .permission, message: message)
            default: throw TransportError(code: .internal, reason: .ioError, message: message)
            }
        }
        let file = OpenFile(fd: fd)
        let info = try file.stat(path)
        guard info.st_mode & S_IFMT == S_IFREG else {
            throw TransportError(code: .invalidArgument, reason: .ioError, message: "\(path) is not a regular file")
        }
        self.path = path
        self.file = file
        self.size = UInt64(info.st_size)
        self.identity = Self.identity(path: path, info)
    }

    public func read(at offset: UInt64, count: Int) throws -> [UInt8] {
        let wanted = Int(min(UInt64(count), size > offset ? size - offset : 0))
        return try [UInt8](unsafeUninitializedCapacity: wanted) { buffer, initialized in
            initialized = try read(at: offset, into: UnsafeMutableRawBufferPointer(buffer))
        }
    }

    public func read(at offset: UInt64, into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
        let wanted = Int(min(UInt64(buffer.count), size > offset ? size - offset : 0))
        var filled = 0
        while filled < wanted {
            let n = pread(file.fd, buffer.baseAddress! + filled, wanted - filled, off_t(offset) + off_t(filled))
            if n < 0 {
                if errno == EINTR { continue }
                throw TransportError(code: .internal, reason: .ioError, message: "read \(path): \(String(cString: strerror(errno)))")
            }
            if n == 0 { break }
            filled += n
        }
        return filled
    }

    public func checkUnchanged() throws {
        let now = Self.identity(path: path, try file.stat(path))
        guard now == identity else {
            throw TransportError(code: .failedPrecondition, reason: .sourceChanged, message: "\(path) changed since it was opened (\(identity) -> \(now))")
        }
    }

    private static func identity(path: String, _ info: stat) -> String {
        let mtime = Int64(info.st_mtim.tv_sec) * 1_000_000_000 + Int64(info.st_mtim.tv_nsec)
        return "file:\(path) size \(info.st_size) mtime \(mtime) inode \(info.st_ino)"
    }

    /// The descriptor's owner. `@unchecked Sendable`: `fd` is immutable and only read
    /// with `pread`/`fstat`, which are safe from any thread.
    private final class OpenFile: @unchecked Sendable {
        let fd: Int32
        init(fd: Int32) { self.fd = fd }
        deinit { close(fd) }
        func stat(_ path: String) throws -> Glibc.stat {
            var info = Glibc.stat()
            guard fstat(fd, &info) == 0 else {
                throw TransportError(code: .internal, reason: .ioError, message: "fstat \(path): \(String(cString: strerror(errno)))")
            }
            return info
        }
    }
}
