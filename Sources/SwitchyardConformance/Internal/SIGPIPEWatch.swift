import Glibc
import Synchronization

/// How many `SIGPIPE`s the process received while a ``SIGPIPEWatch`` was on.
private let receivedSIGPIPEs = Atomic<Int>(0)

/// Watches for `SIGPIPE` while a scenario writes to a peer that went away.
///
/// A backend must never raise it (it writes with `MSG_NOSIGNAL`), and the kit never
/// ignores it (``ConformanceKit/prepareProcess()``). With its default disposition a
/// `SIGPIPE` would kill the whole test process; while the watch is on, a handler counts
/// it instead, so the scenario fails with a message. Whatever the disposition was (also
/// `SIG_IGN`, which a harness may have set and which would hide the signal) comes back
/// when the watch ends.
///
/// A thread that blocks `SIGPIPE` (the libuv backend's loop threads do, since libuv's
/// own `uv_write` uses `writev`) keeps one it raised pending instead of running the
/// handler; ``pendingOnThreads()`` finds those in `/proc/self/task/*/status`.
enum SIGPIPEWatch {
    /// What a watch saw.
    struct Seen: Sendable {
        /// How many `SIGPIPE`s the process received while the watch was on.
        var received: Int
        /// Whether `SIGPIPE` was ignored before the watch began.
        var wasIgnored: Bool
    }

    /// Runs `body` with a counting `SIGPIPE` handler installed, then restores the
    /// disposition from before (also when `body` throws).
    static func watching<T>(_ body: () async throws -> T) async rethrows -> (T, Seen) {
        let before = receivedSIGPIPEs.load(ordering: .relaxed)
        let previous = signal(SIGPIPE) { _ in receivedSIGPIPEs.add(1, ordering: .relaxed) }
        defer { signal(SIGPIPE, previous) }
        // SIG_IGN is the handler value 1 (a C macro Swift cannot import).
        let wasIgnored = previous.map { unsafeBitCast($0, to: Int.self) == 1 } ?? false
        let result = try await body()
        return (result, Seen(received: receivedSIGPIPEs.load(ordering: .relaxed) - before, wasIgnored: wasIgnored))
    }

    /// The threads (their names) that hold a `SIGPIPE` pending because they block it.
    static func pendingOnThreads() -> [String] {
        guard let directory = opendir("/proc/self/task") else { return [] }
        defer { closedir(directory) }
        var threads: [String] = []
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            guard Int(name) != nil, let status = readSmallFile("/proc/self/task/\(name)/status") else { continue }
            var threadName = name
            var pending = false
            for line in status.split(separator: "\n") {
                if line.hasPrefix("Name:") {
                    threadName = "\(line.dropFirst(5).trimmingCharacters(inSet: " \t")) (\(name))"
                } else if line.hasPrefix("SigPnd:"), let mask = UInt64(line.dropFirst(7).trimmingCharacters(inSet: " \t"), radix: 16) {
                    pending = mask & (1 << UInt64(SIGPIPE - 1)) != 0
                }
            }
            if pending { threads.append(threadName) }
        }
        return threads
    }

    private static func readSmallFile(_ path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 8192)
        let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        guard count > 0 else { return nil }
        return String(decoding: buffer[..<count], as: UTF8.self)
    }
}

extension Substring {
    fileprivate func trimmingCharacters(inSet characters: String) -> String {
        String(drop { characters.contains($0) }.reversed().drop { characters.contains($0) }.reversed())
    }
}
