import Glibc
import Switchyard
import SwitchyardPosix
import Testing

@Suite("Socket addresses")
struct SocketAddressTests {
    /// A `sockaddr_un` of `pathBytes` (as they stand in `sun_path`), `length` long.
    private func unixAddress(_ pathBytes: [UInt8], length: Int) -> SystemSocketAddress {
        var storage = sockaddr_storage()
        withUnsafeMutableBytes(of: &storage) { raw in
            raw.storeBytes(of: sa_family_t(AF_UNIX), as: sa_family_t.self)
            let offset = MemoryLayout.offset(of: \sockaddr_un.sun_path)!
            UnsafeMutableRawBufferPointer(rebasing: raw[offset...]).copyBytes(from: pathBytes)
        }
        return SystemSocketAddress(storage: storage, length: socklen_t(length))
    }

    private var pathOffset: Int { MemoryLayout.offset(of: \sockaddr_un.sun_path)! }

    @Test("An AF_UNIX address is a path endpoint: a file path, @name for an abstract name, empty when unnamed")
    func unixEndpoints() {
        let file = Array("/run/app.sock".utf8) + [0]
        #expect(unixAddress(file, length: pathOffset + file.count).endpoint == Endpoint(unixPath: "/run/app.sock"))
        let abstract = [0] + Array("switchyard-1".utf8)
        #expect(unixAddress(abstract, length: pathOffset + abstract.count).endpoint == Endpoint(unixPath: "@switchyard-1"))
        #expect(unixAddress([], length: pathOffset).endpoint == Endpoint(unixPath: ""))
        #expect(unixAddress([], length: MemoryLayout<sa_family_t>.size).endpoint == Endpoint(unixPath: ""))
    }

    @Test("The address the kernel reports for a socket bound to a path is that path")
    func boundSocketReportsItsPath() throws {
        let path = "/tmp/switchyard-socketaddress-\(getpid()).sock"
        unlink(path)
        defer { unlink(path) }
        let socket = Socket(takingOwnershipOf: try Posix.socket(family: AF_UNIX, type: Posix.streamSocket))
        let bytes = Array(path.utf8) + [0]
        let reported = Result { () throws(SyscallError) -> Endpoint in
            try Posix.bind(socket.descriptor, unixAddress(bytes, length: pathOffset + bytes.count))
            return try Posix.localAddress(socket.descriptor).endpoint
        }
        socket.close()
        #expect(try reported.get() == Endpoint(unixPath: path))
    }

    @Test("An IPv4 address is still its numeric host and port")
    func ipv4Endpoint() throws {
        let address = try #require(try SystemSocketAddress(literal: Endpoint(host: "127.0.0.1", port: 8080)))
        #expect(address.endpoint == Endpoint(host: "127.0.0.1", port: 8080))
    }

    @Test("Errnos with no mapping of their own still have their names in messages")
    func errnoNames() {
        #expect(ErrnoTable.name(of: ENOENT) == "ENOENT")
        #expect(ErrnoTable.name(of: ECONNREFUSED) == "ECONNREFUSED")
        #expect(SyscallError(call: "connect", errno: ENOENT).description.hasPrefix("connect: ENOENT"))
        #expect(ErrnoTable.error(SyscallError(call: "connect", errno: ENOENT), while: "connecting").native?.name == "ENOENT")
    }
}
