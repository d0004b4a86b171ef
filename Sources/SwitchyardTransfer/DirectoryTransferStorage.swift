import Crypto
import Glibc
import Switchyard
import Synchronization

/// A ``TransferStorage`` in a folder: a finished transfer is the file `DIR/<id>`; while
/// it runs its bytes are in `DIR/.partial/<id>` and its record in
/// `DIR/.partial/<id>.state` (one line: `v1 SIZE SHA256HEX DURABLEOFFSET COMPLETE`).
///
/// Durability: ``sync(id:through:)`` fsyncs the data file, then replaces the record
/// (written to a temporary file, fsynced, renamed, the folder fsynced), so a durable
/// offset on disk never runs ahead of the bytes. ``record(for:)`` truncates the data
/// file to the durable offset (and starts the transfer over if the file is shorter). Errors are `internal`, reason `i/o error`, with the
/// errno (`permissionDenied` for `EACCES`/`EPERM`).
public final class DirectoryTransferStorage: TransferStorage {
    /// The folder finished files go to.
    public let directory: String
    private var partial: String { directory + "/.partial" }
    /// Open data files, by id.
    private let files = Mutex<[String: Int32]>([:])

    /// Uses `directory` (created if missing, with its `.partial` folder).
    /// - Throws: the `mkdir` error.
    public init(directory: String) throws {
        self.directory = directory
        for path in [directory, directory + "/.partial"] where mkdir(path, 0o755) != 0 && errno != EEXIST {
            throw Self.error("mkdir \(path)")
        }
    }

    deinit {
        files.withLock { files in
            for fd in files.values { close(fd) }
        }
    }

    /// The path of the finished file for `id`.
    public func path(of id: String) -> String { directory + "/" + id }

    public func record(for id: String) throws -> TransferRecord? {
        guard let text = try? readText(statePath(id)) else { return nil }
        let fields = text.split(separator: " ").map(String.init)
        guard fields.count == 5, fields[0] == "v1", let size = UInt64(fields[1]),
              let sha = TransferDigest.bytes(hex: fields[2]), sha.count == TransferDigest.byteCount,
              let durable = UInt64(fields[3]), durable <= size else {
            throw TransportError(code: .internal, reason: .ioError, message: "unreadable transfer state \(statePath(id))")
        }
        var record = TransferRecord(id: id, size: size, sha256: sha, durableOffset: durable, isComplete: fields[4] == "1")
        if !record.isComplete {
            let fd = try file(id)
            var info = stat()
            guard fstat(fd, &info) == 0 else { throw Self.error("fstat \(dataPath(id))") }
            if UInt64(info.st_size) < durable {
                // The data file lost bytes the record calls durable (removed or cut by
                // hand): start over rather than fill the gap with zeros.
                record.durableOffset = 0
                try saveState(record)
            }
            guard ftruncate(fd, off_t(record.durableOffset)) == 0 else { throw Self.error("ftruncate \(dataPath(id))") }
        }
        return record
    }

    public func create(_ record: TransferRecord) throws {
        closeFile(record.id)
        unlink(dataPath(record.id))
        let fd = try file(record.id)
        guard fsync(fd) == 0 else { throw Self.error("fsync \(dataPath(record.id))") }
        try saveState(record)
    }

    public func write(_ bytes: ArraySlice<UInt8>, at offset: UInt64, id: String) throws {
        let fd = try file(id)
        var done = 0
        while done < bytes.count {
            let n = bytes.withUnsafeBytes { buffer in
                pwrite(fd, buffer.baseAddress! + done, buffer.count - done, off_t(offset) + off_t(done))
            }
            if n < 0 {
                if errno == EINTR { continue }
                throw Self.error("pwrite \(dataPath(id))")
            }
            done += n
        }
    }

    public func sync(id: String, through offset: UInt64) throws {
        let fd = try file(id)
        guard fsync(fd) == 0 else { throw Self.error("fsync \(dataPath(id))") }
        guard var record = try stateRecord(id) else { throw TransportError(code: .internal, reason: .ioError, message: "no state for \(id)") }
        record.durableOffset = offset
        try saveState(record)
    }

    public func digest(id: String) throws -> [UInt8] {
        let fd = try file(id)
        var hasher = SHA256()
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        var offset: off_t = 0
        while true {
            let n = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress!, $0.count, offset) }
            if n < 0 {
                if errno == EINTR { continue }
                throw Self.error("pread \(dataPath(id))")
            }
            if n == 0 { break }
            hasher.update(data: buffer[0..<n])
            offset += off_t(n)
        }
        return Array(hasher.finalize())
    }

    public func complete(id: String) throws {
        guard var record = try stateRecord(id) else { throw TransportError(code: .internal, reason: .ioError, message: "no state for \(id)") }
        closeFile(id)
        guard rename(dataPath(id), path(of: id)) == 0 else { throw Self.error("rename \(dataPath(id))") }
        record.isComplete = true
        record.durableOffset = record.size
        try saveState(record)
    }

    public func discard(id: String) throws {
        closeFile(id)
        unlink(dataPath(id))
        unlink(statePath(id))
        try syncDirectory(partial)
    }

    // MARK: files

    private func dataPath(_ id: String) -> String { partial + "/" + id }
    private func statePath(_ id: String) -> String { partial + "/" + id + ".state" }

    private func file(_ id: String) throws -> Int32 {
        try files.withLock { files in
            if let fd = files[id] { return fd }
            let fd = open(dataPath(id), O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
            guard fd >= 0 else { throw Self.error("open \(dataPath(id))") }
            files[id] = fd
            return fd
        }
    }

    private func closeFile(_ id: String) {
        if let fd = files.withLock({ $0.removeValue(forKey: id) }) { close(fd) }
    }

    private func stateRecord(_ id: String) throws -> TransferRecord? {
        guard let text = try? readText(statePath(id)) else { return nil }
        let fields = text.split(separator: " ").map(String.init)
        guard fields.count == 5, let size = UInt64(fields[1]), let sha = TransferDigest.bytes(hex: fields[2]),
              let durable = UInt64(fields[3]) else { return nil }
        return TransferRecord(id: id, size: size, sha256: sha, durableOffset: durable, isComplete: fields[4] == "1")
    }

    private func saveState(_ record: TransferRecord) throws {
        let line = "v1 \(record.size) \(TransferDigest.hex(record.sha256)) \(record.durableOffset) \(record.isComplete ? 1 : 0)"
        let temporary = statePath(record.id) + ".new"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw Self.error("open \(temporary)") }
        defer { close(fd) }
        let bytes = Array(line.utf8)
        let written = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress!, $0.count) }
        guard written == bytes.count else { throw Self.error("write \(temporary)") }
        guard fsync(fd) == 0 else { throw Self.error("fsync \(temporary)") }
        guard rename(temporary, statePath(record.id)) == 0 else { throw Self.error("rename \(temporary)") }
        try syncDirectory(partial)
        if record.isComplete { try syncDirectory(directory) }
    }

    private func syncDirectory(_ path: String) throws {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw Self.error("open \(path)") }
        defer { close(fd) }
        guard fsync(fd) == 0 else { throw Self.error("fsync \(path)") }
    }

    private func readText(_ path: String) throws -> String {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw Self.error("open \(path)") }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 512)
        let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress!, $0.count) }
        guard n >= 0 else { throw Self.error("read \(path)") }
        return String(decoding: buffer[0..<n], as: UTF8.self)
    }

    static func error(_ what: String) -> TransportError {
        let code = errno
        let text = String(cString: strerror(code))
        let native = TransportError.NativeError(domain: .errno, code: code, name: "errno \(code)")
        if code == EACCES || code == EPERM {
            return TransportError(code: .permissionDenied, reason: .permission, message: "\(what): \(text)", native: native)
        }
        return TransportError(code: .internal, reason: .ioError, message: "\(what): \(text)", native: native)
    }
}
