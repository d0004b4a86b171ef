import Glibc
import Switchyard
import SwitchyardBackendKit

/// A Unix-domain socket address (`sockaddr_un`) and the ``Endpoint`` it stands for.
/// (The other way, an address the kernel reported, is the toolkit's
/// ``SystemSocketAddress/endpoint``.)
///
/// - `unix:/run/app.sock` (or a relative path): a socket file.
/// - `unix:@name`: a name in Linux's abstract namespace (`sun_path` starts with a NUL;
///   no file, gone with the last socket bound to it). `ss -x` shows them the same way.
/// - An unnamed socket (a peer that never bound a name) is `Endpoint(unixPath: "")`.
struct UnixAddress {
    /// The address in the toolkit's form, for `UnixSystem.bind`, `UnixSystem.connect`.
    let socketAddress: SystemSocketAddress
    /// The endpoint it came from or stands for.
    let endpoint: Endpoint

    /// The address of a path endpoint.
    /// - Throws: `invalidArgument`/`invalid address`, naming the endpoint, for a host
    ///   and port, or a path that is empty or longer than ``Endpoint/maximumPathLength``.
    init(_ endpoint: Endpoint) throws(TransportError) {
        guard let path = endpoint.path else {
            throw TransportError(
                code: .invalidArgument, reason: .invalidAddress,
                message: "\(endpoint) is a host and port; the unix backend connects and listens on a socket path (unix:/path)")
        }
        try Endpoint.validate(path: path)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        let abstract = bytes.first == UInt8(ascii: "@")
        withUnsafeMutableBytes(of: &address.sun_path) { target in
            if abstract {
                // A leading NUL, then the name without its '@'; no terminator.
                target[0] = 0
                UnsafeMutableRawBufferPointer(rebasing: target[1...]).copyBytes(from: bytes.dropFirst())
            } else {
                target.copyBytes(from: bytes)
                target[bytes.count] = 0
            }
        }
        // An abstract name is exactly as long as the address says; a path counts its NUL.
        let length = Self.pathOffset + bytes.count + (abstract ? 0 : 1)
        var storage = sockaddr_storage()
        withUnsafeMutableBytes(of: &storage) { target in
            withUnsafeBytes(of: address) { target.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[..<length])) }
        }
        socketAddress = SystemSocketAddress(storage: storage, length: socklen_t(length))
        self.endpoint = endpoint
    }

    /// Where `sun_path` starts in a `sockaddr_un`.
    static let pathOffset = MemoryLayout.offset(of: \sockaddr_un.sun_path)!

    /// Whether this is a name in the abstract namespace (no file to remove).
    var isAbstract: Bool { endpoint.path?.hasPrefix("@") ?? false }

    /// The socket file's path; nil for an abstract name.
    var filePath: String? { isAbstract ? nil : endpoint.path }
}
