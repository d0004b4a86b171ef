public import Switchyard

/// The name-resolution rules every backend keeps, written once.
///
/// - IP literals never reach a resolver.
/// - Names under the special-use `.invalid` top-level domain fail at once without a
///   query, as RFC 6761 section 6.4 asks of resolver libraries: `unavailable`, reason
///   `name resolution`.
/// - Any other failure to resolve fails the connect at once with the same code and
///   reason (never after a timeout).
public enum NameResolution {
    /// Throws `unavailable`/`name resolution` for a name that must never resolve.
    public static func checkResolvable(_ host: String) throws(TransportError) {
        let lowered = host.lowercased()
        if lowered == "invalid" || lowered.hasSuffix(".invalid") || lowered.hasSuffix(".invalid.") {
            throw TransportError.nameResolution(host, detail: "names under .invalid never resolve (RFC 6761)")
        }
    }
}
