public import Glibc
public import CSwitchyardPosix
public import Switchyard

/// A socket address (IPv4 or IPv6) in `sockaddr_storage`, convertible to and from
/// `Endpoint` without the resolver.
public struct SystemSocketAddress: Sendable, CustomStringConvertible {
    private var storage: sockaddr_storage
    public private(set) var length: socklen_t

    public init(storage: sockaddr_storage, length: socklen_t) {
        self.storage = storage
        self.length = length
    }

    public init(_ address: UnsafePointer<sockaddr>, length: socklen_t) {
        var storage = sockaddr_storage()
        withUnsafeMutableBytes(of: &storage) { target in
            target.copyMemory(from: UnsafeRawBufferPointer(start: address, count: Int(length)))
        }
        self.init(storage: storage, length: length)
    }

    /// The address of an endpoint whose host is an IP literal; nil for a host name.
    /// - Throws: `invalidArgument`/`invalid address` for an IPv6 zone that names no
    ///   interface, a port outside 0...65535 (`Endpoint.port` is a `var`: a program may
    ///   have set it so), and a path endpoint (the toolkit's `NameResolution.checkHostAndPort(_:)`).
    public init?(literal endpoint: Endpoint) throws(TransportError) {
        if endpoint.path != nil { try endpoint.checkHostAndPort() }
        try endpoint.checkPort()
        var storage = sockaddr_storage()
        if let v4 = IPAddress.parseIPv4(endpoint.host) {
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = UInt16(endpoint.port).bigEndian
            withUnsafeMutableBytes(of: &address.sin_addr) { $0.copyBytes(from: v4) }
            withUnsafeMutableBytes(of: &storage) { target in withUnsafeBytes(of: address) { target.copyMemory(from: $0) } }
            self.init(storage: storage, length: socklen_t(MemoryLayout<sockaddr_in>.size))
        } else if let (v6, zone) = IPAddress.parseIPv6(endpoint.host) {
            var address = sockaddr_in6()
            address.sin6_family = sa_family_t(AF_INET6)
            address.sin6_port = UInt16(endpoint.port).bigEndian
            withUnsafeMutableBytes(of: &address.sin6_addr) { $0.copyBytes(from: v6) }
            if let zone {
                let index = if_nametoindex(zone)
                if index == 0 {
                    if let numeric = UInt32(zone) { address.sin6_scope_id = numeric } else {
                        throw TransportError(
                            code: .invalidArgument, reason: .invalidAddress,
                            message: "invalid IPv6 zone \"\(zone)\" in \(endpoint): no interface has that name (a zone is an interface's name or index)")
                    }
                } else {
                    address.sin6_scope_id = index
                }
            }
            withUnsafeMutableBytes(of: &storage) { target in withUnsafeBytes(of: address) { target.copyMemory(from: $0) } }
            self.init(storage: storage, length: socklen_t(MemoryLayout<sockaddr_in6>.size))
        } else {
            return nil
        }
    }

    /// The address family: AF_INET, AF_INET6 or AF_UNIX.
    public var family: CInt { CInt(storage.ss_family) }

    /// Whether the host part is the unspecified address (`0.0.0.0` or `::`), as in a
    /// wildcard bind.
    public var isUnspecified: Bool {
        withUnsafeBytes(of: storage) { raw -> Bool in
            switch CInt(storage.ss_family) {
            case AF_INET:
                return raw.load(as: sockaddr_in.self).sin_addr.s_addr == 0
            case AF_INET6:
                let address = raw.load(as: sockaddr_in6.self)
                return withUnsafeBytes(of: address.sin6_addr) { $0.allSatisfy { $0 == 0 } }
            default:
                return false
            }
        }
    }

    /// Calls `body` with the address as `sockaddr` and its length.
    public func withSockaddr<R>(_ body: (UnsafePointer<sockaddr>, socklen_t) throws -> R) rethrows -> R {
        try withUnsafeBytes(of: storage) { raw in
            try body(raw.baseAddress!.assumingMemoryBound(to: sockaddr.self), length)
        }
    }

    /// The endpoint this address names: a numeric host and port for AF_INET and
    /// AF_INET6, a path endpoint (`Endpoint(unixPath:)`) for AF_UNIX.
    public var endpoint: Endpoint {
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
            case AF_UNIX:
                // A path, `@name` for a name in Linux's abstract namespace (sun_path
                // starts with a NUL), or an empty path for an unnamed socket.
                let offset = MemoryLayout.offset(of: \sockaddr_un.sun_path)!
                let end = min(Int(length), raw.count)
                guard end > offset else { return Endpoint(unixPath: "") }
                let path = UnsafeRawBufferPointer(rebasing: raw[offset..<end])
                if path[0] == 0 {
                    return Endpoint(unixPath: "@" + String(decoding: path.dropFirst(), as: UTF8.self))
                }
                return Endpoint(unixPath: String(decoding: path.prefix { $0 != 0 }, as: UTF8.self))
            default:
                return Endpoint(host: "unknown-family-\(storage.ss_family)", port: 0)
            }
        }
    }

    public var description: String { endpoint.description }
}
