#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// How the tools write to standard error and fail: straight to descriptor 2 (no
/// buffering to lose at `exit`), and `TOOL: error: MESSAGE` with exit status 1.
public enum ToolOutput {
    /// Writes `text` to standard error, all of it (retrying after a signal).
    public static func writeStandardError(_ text: String) {
        var text = text
        text.withUTF8 { bytes in
            var offset = 0
            while offset < bytes.count {
                let n = write(2, bytes.baseAddress! + offset, bytes.count - offset)
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { return }
                offset += n
            }
        }
    }

    /// Says `TOOL: error: MESSAGE` on standard error and exits with status 1.
    public static func fail(tool: String, _ message: String) -> Never {
        writeStandardError("\(tool): error: \(message)\n")
        exit(1)
    }
}
