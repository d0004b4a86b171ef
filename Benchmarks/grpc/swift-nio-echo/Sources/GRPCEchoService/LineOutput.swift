#if canImport(Glibc)
    import Glibc
#endif

/// Where the executables' lines go: written with one `write(2)` each, unbuffered, so a
/// harness reading a pipe sees `listening on PORT` at once (no stdio buffer or its
/// shared state is involved).
public enum LineOutput: Int32, Sendable {
    case standardOutput = 1
    case standardError = 2

    /// Writes `text` and a newline; a short or failed write is retried on `EINTR` only.
    public func write(_ text: String) {
        var line = text + "\n"
        line.withUTF8 { bytes in
            var offset = 0
            while offset < bytes.count {
                let written = Glibc.write(self.rawValue, bytes.baseAddress.map { $0 + offset }, bytes.count - offset)
                if written < 0 && errno == EINTR { continue }
                guard written > 0 else { return }
                offset += written
            }
        }
    }
}
