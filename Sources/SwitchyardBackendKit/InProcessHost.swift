package import Switchyard

/// How a backend whose network lives in the process (the in-memory and the simulated
/// ones) turns an endpoint's host into the canonical literal its tables are keyed by.
///
/// There is no DNS in such a network: IP literals stand for themselves (in canonical form, so
/// `::0:1` and `::1` are one address), `localhost` (and names under `.localhost`, RFC
/// 6761) resolve to `127.0.0.1` then `::1`, and every other name fails at once with
/// `unavailable`, reason `name resolution`, as a resolver that knows no such name would.
package enum InProcessHost {
    /// The IPv4 wildcard a listener may bind.
    package static let ipv4Wildcard = "0.0.0.0"
    /// The IPv6 wildcard a listener may bind; like a dual-stack Linux socket it also
    /// accepts connects to IPv4 addresses.
    package static let ipv6Wildcard = "::"

    /// The addresses `host` stands for, in the order a connect tries them.
    /// - Throws: `invalidArgument`/`invalid address` for a malformed host;
    ///   `unavailable`/`name resolution` for any name other than `localhost`.
    package static func resolve(_ host: String, backend: String) throws(TransportError) -> [String] {
        try Endpoint.validate(host: host)
        if let v4 = IPAddress.parseIPv4(host) { return [IPAddress.formatIPv4(v4)] }
        if let (v6, zone) = IPAddress.parseIPv6(host) {
            return [IPAddress.formatIPv6(v6) + (zone.map { "%" + $0 } ?? "")]
        }
        var name = host.lowercased()
        if name.hasSuffix(".") { name.removeLast() }
        if name == "localhost" || name.hasSuffix(".localhost") { return ["127.0.0.1", "::1"] }
        if name == "invalid" || name.hasSuffix(".invalid") {
            throw .nameResolution(host, detail: "names under .invalid never resolve (RFC 6761)")
        }
        throw .nameResolution(host, detail: "the \(backend) backend has no DNS; only IP literals and localhost resolve")
    }

    /// Whether `host` (canonical) is an IPv6 address.
    package static func isIPv6(_ host: String) -> Bool { host.contains(":") }

    /// The address a connect to `host` reaches: a wildcard means the loopback address of
    /// its family, as on Linux. Connection addresses are therefore never wildcards.
    package static func connectTarget(_ host: String) -> String {
        switch host {
        case ipv4Wildcard: "127.0.0.1"
        case ipv6Wildcard: "::1"
        default: host
        }
    }

    /// Whether a listener bound to `bound` accepts connects to `target`.
    package static func covers(_ bound: String, _ target: String) -> Bool {
        bound == target || bound == ipv6Wildcard || (bound == ipv4Wildcard && !isIPv6(target))
    }

    /// Whether two bindings of the same port conflict (one would be `address in use`).
    package static func overlaps(_ a: String, _ b: String) -> Bool {
        covers(a, b) || covers(b, a)
    }
}
