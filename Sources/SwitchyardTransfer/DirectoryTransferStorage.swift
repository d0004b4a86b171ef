import Glibc
import Switchyard
import Synchronization

/// A ``TransferStorage`` in a folder: a finished transfer is the file `DIR/<id>`; while
/// it runs its bytes are in `DIR/.partial/<id>` and its record in
/// `DIR/.partial/<id>.state` (one line: `v3 SIZE LEAFDIGEST DIGESTHEX DURABLEOFFSET
/// COMPLETE`, the leaf digest's name as ``TransferLeafDigest/description`` says, the
/// digest `-` until the file is complete; a `v2` line, which has no leaf digest, is read
/// as SHA-256's), its leaf digests (32 bytes per 64 KiB leaf) in
/// `DIR/.partial/<id>.digests`.
///
/// Durability: ``sync(id:through:)`` fsyncs the data and digest files, then replaces the record
/// (written to a temporary file, fsynced, renamed, the folder fsynced), so a durable
/// offset on disk never runs ahead of the bytes. ``record(for:)`` truncates the data
/// and digest files to the durable offset (and starts the transfer over if either is
/// shorter). Errors are `internal`, reason `i/o error`, with the
/// errno (`permissionDenied` for `EACCES`/`EPERM`).
public final class DirectoryTransferStorage: TransferStorage {
    /// The folder finished files go to.
    public let directory: String
    private var partial: String { directory + "/.partial" }
    /// Open data and digest files, by path.
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
        // A record of protocol version 1 (a whole-file SHA-256, no leaf digests): the
        // transfer starts over (``create(_:)`` replaces it).
        if text.hasPrefix("v1 ") { return nil }
        guard var record = Self.parse(text, id: id) else {
            throw TransportError(code: .internal, reason: .ioError, message: "unreadable transfer state \(statePath(id))")
        }
        if !record.isComplete {
            let data = try file(dataPath(id))
            let digests = try file(digestPath(id))
            let leaves = off_t(TransferChunkDigest.leafCount(size: record.durableOffset) * TransferLeafDigest.byteCount)
            if try size(of: data, dataPath(id)) < off_t(record.durableOffset) || (try size(of: digests, digestPath(id))) < leaves {
                // The files lost bytes the record calls durable (removed or cut by
                // hand): start over rather than fill the gap with zeros.
                record.durableOffset = 0
                try saveState(record)
            }
            guard ftruncate(data, off_t(record.durableOffset)) == 0 else { throw Self.error("ftruncate \(dataPath(id))") }
            let kept = off_t(TransferChunkDigest.leafCount(size: record.durableOffset) * TransferLeafDigest.byteCount)
            guard ftruncate(digests, kept) == 0 else { throw Self.error("ftruncate \(digestPath(id))") }
        }
        return record
    }

    public func create(_ record: TransferRecord) throws {
        for path in [dataPath(record.id), digestPath(record.id)] {
            closeFile(path)
            unlink(path)
            guard fsync(try file(path)) == 0 else { throw Self.error("fsync \(path)") }
        }
        try saveState(record)
    }

    public func write(_ bytes: ArraySlice<UInt8>, at offset: UInt64, id: String) throws {
        try write(bytes, at: offset, path: dataPath(id))
    }

    public func writeLeafDigests(_ digests: [UInt8], fromLeaf index: Int, id: String) throws {
        try write(digests[...], at: UInt64(index * TransferLeafDigest.byteCount), path: digestPath(id))
    }

    public func leafDigests(id: String) throws -> [UInt8] {
        let fd = try file(digestPath(id))
        return try read(fd, digestPath(id), at: 0, count: Int(try size(of: fd, digestPath(id))))
    }

    public func read(id: String, at offset: UInt64, count: Int) throws -> [UInt8] {
        try read(try file(dataPath(id)), dataPath(id), at: offset, count: count)
    }

    /// The most bytes one `pwrite` takes. A 1 MiB chunk is written in four: on ext4 (Linux
    /// 6.18, this project's benchmark VM) one 1 MiB `pwrite` while the last sync's
    /// `fsync` of the same file runs cost up to five times the CPU of four 256 KiB ones
    /// (a 1 GiB transfer to disk: 499-679 MiB/s and 1.2-1.8 CPU-s per GiB in the
    /// receiver, against 913-1034 MiB/s and 0.8-0.9 s; Benchmarks/README.md).
    static let writePiece = 256 << 10

    private func write(_ bytes: ArraySlice<UInt8>, at offset: UInt64, path: String) throws {
        let fd = try file(path)
        var done = 0
        while done < bytes.count {
            let n = bytes.withUnsafeBytes { buffer in
                pwrite(fd, buffer.baseAddress! + done, min(Self.writePiece, buffer.count - done), off_t(offset) + off_t(done))
            }
            if n < 0 {
                if errno == EINTR { continue }
                throw Self.error("pwrite \(path)")
            }
            done += n
        }
    }

    public func sync(id: String, through offset: UInt64) throws {
        for path in [dataPath(id), digestPath(id)] {
            guard fsync(try file(path)) == 0 else { throw Self.error("fsync \(path)") }
        }
        guard var record = try stateRecord(id) else { throw TransportError(code: .internal, reason: .ioError, message: "no state for \(id)") }
        record.durableOffset = offset
        try saveState(record)
    }

    public func complete(id: String, sha256: [UInt8]) throws {
        guard var record = try stateRecord(id) else { throw TransportError(code: .internal, reason: .ioError, message: "no state for \(id)") }
        closeFile(dataPath(id))
        closeFile(digestPath(id))
        guard rename(dataPath(id), path(of: id)) == 0 else { throw Self.error("rename \(dataPath(id))") }
        record.isComplete = true
        record.durableOffset = record.size
        record.sha256 = sha256
        try saveState(record)
        unlink(digestPath(id))
    }

    public func discard(id: String) throws {
        for path in [dataPath(id), digestPath(id)] {
            closeFile(path)
            unlink(path)
        }
        unlink(statePath(id))
        try syncDirectory(partial)
    }

    // MARK: files

    private func dataPath(_ id: String) -> String { partial + "/" + id }
    private func statePath(_ id: String) -> String { partial + "/" + id + ".state" }
    private func digestPath(_ id: String) -> String { partial + "/" + id + ".digests" }

    private func file(_ path: String) throws -> Int32 {
        try files.withLock { files in
            if let fd = files[path] { return fd }
            let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
            guard fd >= 0 else { throw Self.error("open \(path)") }
            files[path] = fd
            return fd
        }
    }

    private func closeFile(_ path: String) {
        if let fd = files.withLock({ $0.removeValue(forKey: path) }) { close(fd) }
    }

    private func size(of fd: Int32, _ path: String) throws -> off_t {
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw Self.error("fstat \(path)") }
        return info.st_size
    }

    private func read(_ fd: Int32, _ path: String, at offset: UInt64, count: Int) throws -> [UInt8] {
        try [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            initialized = 0
            while initialized < count {
                let n = pread(fd, buffer.baseAddress! + initialized, count - initialized, off_t(offset) + off_t(initialized))
                if n < 0 {
                    if errno == EINTR { continue }
                    throw Self.error("pread \(path)")
                }
                if n == 0 { break }
                initialized += n
            }
        }
    }

    private static func parse(_ text: String, id: String) -> TransferRecord? {
        var fields = text.split(separator: " ").map(String.init)
        // Protocol version 2 hashed every leaf with SHA-256 and did not say so.
        if fields.first == "v2" && fields.count == 5 { fields.insert(TransferLeafDigest.sha256.description, at: 2) }
        guard fields.count == 6, fields[0] == "v2" || fields[0] == "v3", let size = UInt64(fields[1]),
              let leafDigest = TransferLeafDigest(name: fields[2]),
              let durable = UInt64(fields[4]), durable <= size else { return nil }
        let sha: [UInt8]
        if fields[3] == "-" {
            sha = []
        } else {
            guard let bytes = TransferDigest.bytes(hex: fields[3]), bytes.count == TransferDigest.byteCount else { return nil }
            sha = bytes
        }
        return TransferRecord(id: id, size: size, sha256: sha, durableOffset: durable, isComplete: fields[5] == "1", leafDigest: leafDigest)
    }

    private func stateRecord(_ id: String) throws -> TransferRecord? {
        guard let text = try? readText(statePath(id)) else { return nil }
        return Self.parse(text, id: id)
    }

    private func saveState(_ record: TransferRecord) throws {
        let digest = record.sha256.isEmpty ? "-" : TransferDigest.hex(record.sha256)
        let line = "v3 \(record.size) \(record.leafDigest) \(digest) \(record.durableOffset) \(record.isComplete ? 1 : 0)"
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
        let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress!, $0.count) }
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
