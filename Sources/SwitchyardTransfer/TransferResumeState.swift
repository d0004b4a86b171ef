import Glibc
public import Switchyard

/// What a sender needs to pick a transfer up again, in another ``Transfer`` or another
/// process (URLSession's resume data is the model): the id, the source's identity, its
/// size, the last offset the receiver acknowledged and the transfer digest of the bytes
/// below it.
///
/// The receiver stays the authority on where to resume (its `resume` answer); the saved
/// offset says how far the last sender got, and the digest lets a new sender refuse a
/// source that changed (`failedPrecondition`, reason `source changed`) before it sends
/// a byte: it hashes the source's first ``acknowledgedOffset`` bytes (only those) to
/// compare.
///
/// Its file form (``encoded``) is UTF-8 text, one `key value` per line after the first
/// line `switchyard-transfer-resume 3`: `id`, `source`, `size`, `leaf-digest` (its
/// ``TransferLeafDigest/description``), `sha256` (hex, the digest), `acknowledged`. A
/// state of version 2 (no `leaf-digest` line) is read as SHA-256's.
public struct TransferResumeState: Sendable, Hashable {
    public var id: String
    /// The source's ``TransferSource/identity`` (a file's path, size, mtime, inode).
    public var sourceIdentity: String
    public var size: UInt64
    /// The transfer digest (``TransferChunkDigest``, 32 bytes) of the source's first
    /// ``acknowledgedOffset`` bytes.
    public var sha256: [UInt8]
    /// Bytes from the start that the receiver acknowledged as durable.
    public var acknowledgedOffset: UInt64
    /// How the send hashed its leaves; a send that resumes from this state hashes so too.
    public var leafDigest: TransferLeafDigest

    public init(id: String, sourceIdentity: String, size: UInt64, sha256: [UInt8], acknowledgedOffset: UInt64, leafDigest: TransferLeafDigest = .standard) {
        self.id = id
        self.sourceIdentity = sourceIdentity
        self.size = size
        self.sha256 = sha256
        self.acknowledgedOffset = acknowledgedOffset
        self.leafDigest = leafDigest
    }

    private static let header = "switchyard-transfer-resume 3"
    /// The header of version 2, whose leaves were all hashed with SHA-256.
    private static let headerSHA256Only = "switchyard-transfer-resume 2"

    /// The state as bytes (see the type's comment).
    public var encoded: [UInt8] {
        let lines = [
            Self.header, "id \(id)", "source \(sourceIdentity)", "size \(size)", "leaf-digest \(leafDigest)",
            "sha256 \(TransferDigest.hex(sha256))", "acknowledged \(acknowledgedOffset)",
        ]
        return Array((lines.joined(separator: "\n") + "\n").utf8)
    }

    /// Decodes ``encoded``.
    /// - Throws: `invalidArgument`, reason `protocol violation`, for anything else.
    public init(decoding bytes: [UInt8]) throws(TransportError) {
        func bad(_ why: String) -> TransportError {
            TransportError(code: .invalidArgument, reason: .protocolViolation, message: "not a transfer resume state: \(why)")
        }
        let lines = String(decoding: bytes, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: true)
        let header = lines.first.map(String.init)
        guard header == Self.header || header == Self.headerSHA256Only else { throw bad("no header line") }
        var fields: [String: String] = [:]
        for line in lines.dropFirst() {
            guard let space = line.firstIndex(of: " ") else { throw bad("line without a value: \(line)") }
            fields[String(line[..<space])] = String(line[line.index(after: space)...])
        }
        guard let id = fields["id"], let source = fields["source"], let size = fields["size"].flatMap({ UInt64($0) }),
              let sha = fields["sha256"].flatMap({ TransferDigest.bytes(hex: $0) }), sha.count == TransferDigest.byteCount,
              let acknowledged = fields["acknowledged"].flatMap({ UInt64($0) }), acknowledged <= size,
              let leafDigest = header == Self.headerSHA256Only ? .sha256 : fields["leaf-digest"].flatMap({ TransferLeafDigest(name: $0) }) else {
            throw bad("a field is missing or malformed")
        }
        self.init(id: id, sourceIdentity: source, size: size, sha256: sha, acknowledgedOffset: acknowledged, leafDigest: leafDigest)
    }

    /// Writes the state to `path` atomically (a temporary file, fsynced, renamed).
    /// - Throws: `internal`/`i/o error` (`permissionDenied` for `EACCES`).
    public func save(to path: String) throws {
        let temporary = path + ".new"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw DirectoryTransferStorage.error("open \(temporary)") }
        defer { close(fd) }
        let bytes = encoded
        let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress!, $0.count) }
        guard written == bytes.count else { throw DirectoryTransferStorage.error("write \(temporary)") }
        guard fsync(fd) == 0 else { throw DirectoryTransferStorage.error("fsync \(temporary)") }
        guard rename(temporary, path) == 0 else { throw DirectoryTransferStorage.error("rename \(temporary)") }
    }

    /// The state saved at `path`, nil if there is no file.
    /// - Throws: the read's error, or `invalidArgument` for a file that is not a state.
    public static func load(from path: String) throws -> TransferResumeState? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            if errno == ENOENT { return nil }
            throw DirectoryTransferStorage.error("open \(path)")
        }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress!, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                throw DirectoryTransferStorage.error("read \(path)")
            }
            if n == 0 { break }
            bytes += buffer[0..<n]
        }
        return try TransferResumeState(decoding: bytes)
    }

    /// Removes the state file at `path` (after the transfer finished); no error if none.
    public static func remove(at path: String) {
        unlink(path)
    }
}
