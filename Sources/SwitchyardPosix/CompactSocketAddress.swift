import Glibc
public import Switchyard

/// A socket address as a connection keeps it for its whole life: an IPv4 or IPv6
/// address in a `sockaddr_in6`'s 28 bytes (a `sockaddr_in` fits in them), not a
/// `sockaddr_storage`'s 128, turned into an ``SystemSocketAddress`` or an `Endpoint` only
/// when asked. A connection keeps two, so this is 200 bytes less per connection than two
/// `SystemSocketAddress`es. Any other family (a Unix path) is kept whole, boxed.
public struct CompactSocketAddress: Sendable {
    private enum Storage: Sendable {
        case inet(sockaddr_in6, length: socklen_t)
        indirect case other(SystemSocketAddress)
    }
    private let storage: Storage

    public init(_ address: SystemSocketAddress) {
        let family = address.family
        guard family == AF_INET || family == AF_INET6, Int(address.length) <= MemoryLayout<sockaddr_in6>.size else {
            storage = .other(address)
            return
        }
        var inet = sockaddr_in6()
        address.withSockaddr { pointer, length in
            withUnsafeMutableBytes(of: &inet) { $0.copyMemory(from: UnsafeRawBufferPointer(start: pointer, count: Int(length))) }
        }
        storage = .inet(inet, length: address.length)
    }

    /// The address in full.
    public var address: SystemSocketAddress {
        switch storage {
        case .inet(let inet, let length):
            withUnsafeBytes(of: inet) { raw in
                SystemSocketAddress(raw.baseAddress!.assumingMemoryBound(to: sockaddr.self), length: length)
            }
        case .other(let address):
            address
        }
    }

    /// The endpoint this address names (``SystemSocketAddress/endpoint``).
    public var endpoint: Endpoint { address.endpoint }
}
