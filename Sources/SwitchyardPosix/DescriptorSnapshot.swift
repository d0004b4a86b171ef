import Glibc

/// The process's open file descriptors, read from `/proc/self/fd`, with what each
/// points at (`socket:[123]`, `anon_inode:[eventfd]`, a path): what the conformance kit
/// and the tests compare to find a descriptor that leaked.
package struct DescriptorSnapshot: Sendable {
    /// Descriptor number to its `readlink` target.
    package var targets: [Int32: String]

    package var count: Int { targets.count }

    /// Reads the current table. The directory's own descriptor is left out.
    package static func take() -> DescriptorSnapshot {
        var targets: [Int32: String] = [:]
        guard let directory = opendir("/proc/self/fd") else { return DescriptorSnapshot(targets: [:]) }
        defer { closedir(directory) }
        let own = dirfd(directory)
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            guard let fd = Int32(name), fd != own else { continue }
            targets[fd] = readTarget("/proc/self/fd/\(name)")
        }
        return DescriptorSnapshot(targets: targets)
    }

    private static func readTarget(_ path: String) -> String {
        var buffer = [CChar](repeating: 0, count: 4096)
        let length = readlink(path, &buffer, buffer.count - 1)
        guard length >= 0 else { return "(closed while reading)" }
        return String(decoding: buffer[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Descriptors open now that were not open (with the same target) in `earlier`.
    package func opened(since earlier: DescriptorSnapshot) -> [(fd: Int32, target: String)] {
        targets
            .filter { earlier.targets[$0.key] != $0.value }
            .map { (fd: $0.key, target: $0.value) }
            .sorted { $0.fd < $1.fd }
    }
}
