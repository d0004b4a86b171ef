import Glibc

@_silgen_name("setns") private func enterNamespace(_ fd: CInt, _ type: CInt) -> CInt

/// Running code in a network namespace made with `ip netns add` (the kit's fault networks,
/// the tests' networks): the one place Switchyard calls `setns`.
package enum NetworkNamespace {
    /// A namespace that could not be entered, and why.
    package struct Failure: Error, CustomStringConvertible {
        package let description: String
    }

    /// Runs `body` on a new thread that entered the network namespace `name`
    /// (`/var/run/netns/NAME`) and returns what it returned: the sockets it opens and the
    /// threads it starts (a transport's loops, a netlink monitor's socket) belong to that
    /// namespace. The thread ends when `body` returns.
    /// - Throws: ``Failure`` when the namespace cannot be opened or entered, or the thread
    ///   cannot start; what `body` throws.
    package static func run<T: Sendable>(in name: String, _ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            let started = runOnNewThread(name: "sy-netns") {
                let fd = open("/var/run/netns/\(name)", O_RDONLY | O_CLOEXEC)
                guard fd >= 0 else {
                    continuation.resume(throwing: Failure(description: "cannot open the network namespace \(name): \(String(cString: strerror(errno)))"))
                    return
                }
                let entered = enterNamespace(fd, 0x4000_0000 /* CLONE_NEWNET */) == 0
                let code = errno
                close(fd)
                guard entered else {
                    continuation.resume(throwing: Failure(description: "cannot enter the network namespace \(name): \(String(cString: strerror(code)))"))
                    return
                }
                continuation.resume(with: Result { try body() })
            }
            if !started {
                continuation.resume(throwing: Failure(description: "cannot start a thread for the network namespace \(name)"))
            }
        }
    }
}
