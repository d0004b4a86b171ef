import CLibUV
import Glibc
import Switchyard

/// An IPv4 or IPv6 socket address in `sockaddr_storage`, made from an ``Endpoint``
/// literal or read back from libuv, and turned into an ``Endpoint`` without the resolver.
/// Formatting uses the core's ``IPAddress``, so both backends print addresses alike.
struct UVSocketAddress: Sendable, CustomStringConvertible {
    private var storage = sockaddr_storage()

    /// A copy of the address at `address` (from libuv or `getaddrinfo`).
    init(_ address: UnsafePointer<sockaddr>) {
        let length = CInt(address.pointee.sa_family) == AF_INET6
            ? MemoryLayout<sockaddr_in6>.size : MemoryLayout<sockaddr_in>.size
        withUnsafeMutableBytes(of: &storage) { target in
            target.copyMemory(from: UnsafeRawBufferPointer(start: address, count: length))
        }
    }

    private init(storage: sockaddr_storage) {
        self.storage = storage
    }

    /// The address of an endpoint whose host is an IP literal; nil for a host name.
    /// - Throws: `invalidArgument`/`invalid address` for an IPv6 zone that names no interface.
    init?(literal endpoint: Endpoint) throws(TransportError) {
        var storage = sockaddr_storage()
        if let v4 = IPAddress.parseIPv4(endpoint.host) {
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = UInt16(endpoint.port).bigEndian
            withUnsafeMutableBytes(of: &address.sin_addr) { $0.copyBytes(from: v4) }
            withUnsafeMutableBytes(of: &storage) { target in withUnsafeBytes(of: address) { target.copyMemory(from: $0) } }
        } else if let (v6, zone) = IPAddress.parseIPv6(endpoint.host) {
            var address = sockaddr_in6()
            address.sin6_family = sa_family_t(AF_INET6)
            address.sin6_port = UInt16(endpoint.port).bigEndian
            withUnsafeMutableBytes(of: &address.sin6_addr) { $0.copyBytes(from: v6) }
            if let zone {
                let index = if_nametoindex(zone)
                if index != 0 {
                    address.sin6_scope_id = index
                } else if let numeric = UInt32(zone) {
                    address.sin6_scope_id = numeric
                } else {
                    throw TransportError(code: .invalidArgument, reason: .invalidAddress, message: "no interface named '\(zone)' for \(endpoint)")
                }
            }
            withUnsafeMutableBytes(of: &storage) { target in withUnsafeBytes(of: address) { target.copyMemory(from: $0) } }
        } else {
            return nil
        }
        self.init(storage: storage)
    }

    /// Reads an address with a libuv getter (`uv_tcp_getsockname`/`uv_tcp_getpeername`).
    /// Returns the libuv error code on failure.
    static func read(_ getter: (UnsafeMutablePointer<sockaddr>, UnsafeMutablePointer<CInt>) -> CInt) -> Result<UVSocketAddress, UVStatus> {
        var storage = sockaddr_storage()
        var length = CInt(MemoryLayout<sockaddr_storage>.size)
        let status = withUnsafeMutablePointer(to: &storage) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { getter($0, &length) }
        }
        if status < 0 { return .failure(UVStatus(status)) }
        return .success(UVSocketAddress(storage: storage))
    }

    /// AF_INET or AF_INET6.
    var family: CInt { CInt(storage.ss_family) }

    /// Calls `body` with the address as `sockaddr`.
    func withSockaddr<R>(_ body: (UnsafePointer<sockaddr>) throws -> R) rethrows -> R {
        try withUnsafeBytes(of: storage) { raw in
            try body(raw.baseAddress!.assumingMemoryBound(to: sockaddr.self))
        }
    }

    /// The endpoint (numeric host) this address names.
    var endpoint: Endpoint {
        withUnsafeBytes(of: storage) { raw -> Endpoint in
            switch CInt(storage.ss_family) {
            case AF_INET:
                let address = raw.load(as: sockaddr_in.self)
                let bytes = withUnsafeBytes(of: address.sin_addr) { Array($0) }
                return Endpoint(host: IPAddress.formatIPv4(bytes), port: Int(UInt16(bigEndian: address.sin_port)))
            case AF_INET6:
                let address = raw.load(as: sockaddr_in6.self)
                let bytes = withUnsafeBytes(of: address.sin6_addr) { Array($0) }
                var host = IPAddress.formatIPv6(bytes)
                if address.sin6_scope_id != 0 {
                    var name = [CChar](repeating: 0, count: Int(IF_NAMESIZE) + 1)
                    if if_indextoname(address.sin6_scope_id, &name) != nil {
                        host += "%" + String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
                    } else {
                        host += "%\(address.sin6_scope_id)"
                    }
                }
                return Endpoint(host: host, port: Int(UInt16(bigEndian: address.sin6_port)))
            default:
                return Endpoint(host: "unknown-family-\(storage.ss_family)", port: 0)
            }
        }
    }

    var description: String { endpoint.description }
}

/// A libuv status code (negative on failure), as an `Error` for `Result`.
struct UVStatus: Error, Sendable {
    let code: Int32
    init(_ code: Int32) { self.code = code }
}
