// The checks of an endpoint given to a backend of hosts and ports, written once: the
// toolkit's `NameResolution` states them for backend authors, and the libc layer's socket
// address conversion applies them too.

extension Endpoint {
    /// Checks that the endpoint is a host and port (not a Unix-domain path), the host a
    /// literal or a well-formed name, the port within 0...65535.
    /// - Throws: `invalidArgument`/`invalid address`, naming the endpoint.
    package func checkHostAndPort() throws(TransportError) {
        if path != nil {
            throw TransportError(
                code: .invalidArgument, reason: .invalidAddress,
                message: "\(self) is a Unix-domain socket path; this backend connects and listens on a host and port")
        }
        try checkPort()
        try Endpoint.validate(host: host)
    }

    /// Checks the port: `Endpoint.port` is a `var`, so a program can set it outside
    /// 0...65535 after `Endpoint(host:port:)` checked it.
    /// - Throws: `invalidArgument`/`invalid address`: `invalid port "70000" (0...65535) in host:70000`.
    package func checkPort() throws(TransportError) {
        do {
            try Endpoint.validate(port: port)
        } catch {
            var error = error
            error.message += " in \(self)"
            throw error
        }
    }
}
