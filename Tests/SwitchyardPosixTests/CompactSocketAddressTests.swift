import Glibc
import Switchyard
import SwitchyardPosix
import Testing

@Suite("Compact socket addresses")
struct CompactSocketAddressTests {
    @Test("IPv4, IPv6 and scoped IPv6 addresses read back as the same endpoint and bytes", arguments: [
        Endpoint(host: "192.0.2.7", port: 443),
        Endpoint(host: "127.0.0.1", port: 0),
        Endpoint(host: "2001:db8::1:2", port: 65535),
        Endpoint(host: "::1", port: 8080),
        Endpoint(host: "fe80::1%lo", port: 9),
    ])
    func inetRoundTrip(endpoint: Endpoint) throws {
        let full = try #require(try SystemSocketAddress(literal: endpoint))
        let compact = CompactSocketAddress(full)
        #expect(compact.endpoint == full.endpoint)
        #expect(compact.endpoint == endpoint)
        let back = compact.address
        #expect(back.family == full.family && back.length == full.length)
        let same = back.withSockaddr { a, aLength in
            full.withSockaddr { b, _ in memcmp(a, b, Int(aLength)) == 0 }
        }
        #expect(same, "the bytes of \(endpoint) changed on the way")
    }

    @Test("A Unix path, longer than an IPv6 address, is kept whole")
    func unixKeptWhole() {
        var storage = sockaddr_storage()
        let path = Array("/run/switchyard/a-path-longer-than-twenty-eight-bytes.sock".utf8) + [0]
        let offset = MemoryLayout.offset(of: \sockaddr_un.sun_path)!
        withUnsafeMutableBytes(of: &storage) { raw in
            raw.storeBytes(of: sa_family_t(AF_UNIX), as: sa_family_t.self)
            UnsafeMutableRawBufferPointer(rebasing: raw[offset...]).copyBytes(from: path)
        }
        let full = SystemSocketAddress(storage: storage, length: socklen_t(offset + path.count))
        #expect(CompactSocketAddress(full).endpoint == Endpoint(unixPath: "/run/switchyard/a-path-longer-than-twenty-eight-bytes.sock"))
    }

    @Test("It takes at most a sockaddr_in6 and its length (plus a tag), not a sockaddr_storage")
    func size() {
        #expect(MemoryLayout<CompactSocketAddress>.size <= MemoryLayout<sockaddr_in6>.size + MemoryLayout<socklen_t>.size + 1)
        #expect(MemoryLayout<SystemSocketAddress>.size > 2 * MemoryLayout<CompactSocketAddress>.size)
    }
}
