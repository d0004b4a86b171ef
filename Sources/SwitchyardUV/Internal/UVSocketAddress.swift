import CLibUV
import Glibc
import Switchyard
import SwitchyardBackendKit

extension SystemSocketAddress {
    /// A copy of an address libuv or `getaddrinfo` handed over (IPv4 or IPv6).
    init(_ address: UnsafePointer<sockaddr>) {
        let length = CInt(address.pointee.sa_family) == AF_INET6
            ? MemoryLayout<sockaddr_in6>.size : MemoryLayout<sockaddr_in>.size
        self.init(address, length: socklen_t(length))
    }

    /// Reads an address with a libuv getter (`uv_tcp_getsockname`/`uv_tcp_getpeername`).
    /// Returns the libuv error code on failure.
    static func read(_ getter: (UnsafeMutablePointer<sockaddr>, UnsafeMutablePointer<CInt>) -> CInt) -> Result<SystemSocketAddress, UVStatus> {
        var storage = sockaddr_storage()
        var length = CInt(MemoryLayout<sockaddr_storage>.size)
        let status = withUnsafeMutablePointer(to: &storage) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { getter($0, &length) }
        }
        if status < 0 { return .failure(UVStatus(status)) }
        return .success(SystemSocketAddress(storage: storage, length: socklen_t(length)))
    }
}

/// A libuv status code (negative on failure), as an `Error` for `Result`.
struct UVStatus: Error, Sendable {
    let code: Int32
    init(_ code: Int32) { self.code = code }
}
