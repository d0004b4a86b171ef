import Glibc

/// An output descriptor written with `write(2)`, unbuffered, so progress shows as it
/// happens and nothing is lost at `exit` (and the C `stdout`/`stderr` globals are not
/// concurrency-safe).
struct Output: Sendable {
    let descriptor: Int32

    static let standardOutput = Output(descriptor: 1)
    static let standardError = Output(descriptor: 2)

    init(descriptor: Int32) {
        self.descriptor = descriptor
    }

    /// Creates (or truncates) the file at `path` for writing.
    init(creating path: String) throws(OutputError) {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else { throw OutputError(errno: errno) }
        self.descriptor = descriptor
    }

    func write(_ text: String) {
        write(Array(text.utf8))
    }

    func write(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let written = Glibc.write(descriptor, buffer.baseAddress! + offset, buffer.count - offset)
                if written < 0 && errno == EINTR { continue }
                if written <= 0 { return }
                offset += written
            }
        }
    }

    func close() {
        _ = Glibc.close(descriptor)
    }
}

/// Why a file could not be opened (or a program run): the C library's words for its errno.
struct OutputError: Error, CustomStringConvertible {
    var errno: Int32

    var description: String {
        guard let text = strerror(errno) else { return "errno \(errno)" }
        return String(decoding: UnsafeRawBufferPointer(start: text, count: strlen(text)), as: UTF8.self)
    }
}
