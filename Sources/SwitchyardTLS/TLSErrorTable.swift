internal import CSwitchyardOpenSSL
public import Switchyard

extension TransportError.Reason {
    /// The TLS handshake failed for a reason other than a certificate: no shared version,
    /// cipher or application protocol, a handshake alert from the peer, the handshake
    /// timeout, or the peer closing during the handshake. (No core reason says "the
    /// security handshake failed"; `protocol violation` is kept for peers that send
    /// garbage, which is a different thing to fix.)
    public static let tlsHandshake = TransportError.Reason("tls handshake")
    /// A certificate was refused: this side could not verify the peer's (the message
    /// holds OpenSSL's X509 verify result: expired, unknown CA, wrong host name, ...), the
    /// peer refused this side's (an alert such as `unknown ca` or `certificate required`),
    /// or a client that must present one did not. (No core reason names an identity
    /// check; a caller must tell it from a transient fault: retrying will not help.)
    public static let certificate = TransportError.Reason("certificate")
    /// The peer ended the TCP stream without TLS's `close_notify`: whatever it sent last
    /// may have been cut short by someone in the path (a truncation attack looks the
    /// same). Kept apart from a clean end of stream, which `close_notify` makes, and from
    /// `reset`, which the kernel reports.
    public static let truncated = TransportError.Reason("truncated")
}

extension TransportError.NativeError.Domain {
    /// An OpenSSL error: the code is the reason of the first error in OpenSSL's queue
    /// (`ERR_GET_REASON`), the name its text.
    public static let openssl = TransportError.NativeError.Domain("openssl")
    /// An X509 verify result (`X509_V_ERR_...`, from `SSL_get_verify_result`), the name
    /// its text (`X509_verify_cert_error_string`).
    public static let x509 = TransportError.NativeError.Domain("x509")
}

/// How every TLS failure becomes a ``TransportError``: the one table of SwitchyardTLS
/// (also in `docs/ERRORS.md`). The wrapped connection's own errors (reset, stalled,
/// shutdown, ...) pass through unchanged.
///
/// | failure | code | reason | message and native error |
/// | --- | --- | --- | --- |
/// | the peer's certificate did not verify (expired, not yet valid, unknown or untrusted CA, self-signed, wrong host name or IP) | `unavailable` | `certificate` | OpenSSL's X509 verify result text; native `x509` with its `X509_V_ERR_` code |
/// | a server that requires a client certificate got none | `unavailable` | `certificate` | "the client sent no certificate"; native `openssl` |
/// | the peer refused this side's certificate (alerts `bad certificate`, `unsupported certificate`, `certificate revoked`, `certificate expired`, `certificate unknown`, `unknown ca`, `certificate required`) | `unavailable` | `certificate` | the alert's text; native `openssl` |
/// | the peer sent bytes that are not TLS records (plaintext, an HTTP request, a record too long, a bad record type or version) or a record that does not decrypt | `unavailable` | `protocol violation` | OpenSSL's reason text; native `openssl` |
/// | any other handshake failure (no shared version or cipher, no shared ALPN protocol, another alert) | `unavailable` | `tls handshake` | OpenSSL's reason text; native `openssl` |
/// | any other failure after the handshake (an unexpected alert or message) | `unavailable` | `protocol violation` | OpenSSL's reason text; native `openssl` |
/// | the peer closed the TCP stream during the handshake | `unavailable` | `tls handshake` | "closed during the handshake" |
/// | the peer closed the TCP stream after the handshake without `close_notify` | `unavailable` | `truncated` | "without close_notify" |
/// | the handshake took longer than ``TLSConfiguration/handshakeTimeout`` | `deadlineExceeded` | `tls handshake` | the timeout |
/// | the task awaiting the handshake was cancelled | `cancelled` | `task cancelled` | |
/// | a certificate, key or CA bundle that cannot be loaded, a key that does not match | `invalidArgument` | `invalid option` | names the file, with OpenSSL's reason |
/// | OpenSSL failed inside (out of memory, a state it should not reach) | `internal` | `tls handshake` or `protocol violation` | OpenSSL's reason text |
///
/// All are `unavailable` except where the caller or a deadline is the cause: a TLS
/// failure ends this connection, and a fresh one (after the peer's or this side's
/// configuration is fixed) is what may work, which is what `unavailable` means to a
/// ``CallChannel``. The `certificate` reason is the one to look at before retrying.
public enum TLSErrorTable {
    /// The failure when the peer closed the TCP stream during the handshake.
    public static func closedDuringHandshake() -> TransportError {
        TransportError(
            code: .unavailable, reason: .tlsHandshake,
            message: "the peer closed the connection during the TLS handshake")
    }

    /// The failure when the peer closed the TCP stream without `close_notify`.
    public static func truncated() -> TransportError {
        TransportError(
            code: .unavailable, reason: .truncated,
            message: "the peer closed the connection without TLS close_notify: the data may have been cut short")
    }

    /// The failure when the handshake outlived its timeout.
    public static func handshakeTimedOut(_ timeout: Duration) -> TransportError {
        TransportError(
            code: .deadlineExceeded, reason: .tlsHandshake,
            message: "the TLS handshake did not finish within \(timeout)")
    }

    /// Record-layer reasons: the bytes were not TLS, or a record did not decrypt.
    static let garbageReasons: Set<Int32> = [
        SSL_R_WRONG_VERSION_NUMBER, SSL_R_HTTP_REQUEST, SSL_R_HTTPS_PROXY_REQUEST,
        SSL_R_PACKET_LENGTH_TOO_LONG, SSL_R_RECORD_LENGTH_MISMATCH, SSL_R_BAD_RECORD_TYPE,
        SSL_R_DECRYPTION_FAILED_OR_BAD_RECORD_MAC, SSL_R_ENCRYPTED_LENGTH_TOO_LONG,
        SSL_R_UNKNOWN_PROTOCOL, SSL_R_BAD_PACKET_LENGTH, SSL_R_BAD_PROTOCOL_VERSION_NUMBER,
        SSL_R_LENGTH_MISMATCH, SSL_R_UNEXPECTED_RECORD,
    ]

    /// TLS alert numbers (RFC 8446, section 6) that mean "your certificate is refused".
    static let certificateAlerts: Set<Int32> = [42, 43, 44, 45, 46, 48, 116]

    /// Maps a failed OpenSSL call: `errors` is OpenSSL's error queue drained right after
    /// it, `verifyResult` the session's `SSL_get_verify_result`.
    static func map(_ errors: OpenSSLErrors, verifyResult: Int, duringHandshake: Bool) -> TransportError {
        let phase = duringHandshake ? "TLS handshake" : "TLS"
        guard let first = errors.first else {
            return TransportError(
                code: .internal, reason: duringHandshake ? .tlsHandshake : .protocolViolation,
                message: "\(phase) failed inside OpenSSL with no error queued")
        }
        let fromSSL = first.library == ERR_LIB_SSL
        if fromSSL && first.reason == SSL_R_CERTIFICATE_VERIFY_FAILED && verifyResult != Int(X509_V_OK) {
            let text = String(cString: X509_verify_cert_error_string(verifyResult))
            return TransportError(
                code: .unavailable, reason: .certificate,
                message: "the peer's certificate did not verify: \(text)",
                native: .init(domain: .x509, code: Int32(truncatingIfNeeded: verifyResult), name: text))
        }
        if fromSSL && first.reason == SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE {
            return TransportError(
                code: .unavailable, reason: .certificate,
                message: "the client sent no certificate, and this server requires one", native: errors.native)
        }
        if fromSSL && first.reason >= SSL_AD_REASON_OFFSET {
            let alert = first.reason - SSL_AD_REASON_OFFSET
            if certificateAlerts.contains(alert) {
                return TransportError(
                    code: .unavailable, reason: .certificate,
                    message: "the peer refused this side's certificate (\(first.text))", native: errors.native)
            }
            return TransportError(
                code: .unavailable, reason: duringHandshake ? .tlsHandshake : .protocolViolation,
                message: "the peer ended the \(phase) with an alert (\(first.text))", native: errors.native)
        }
        if fromSSL && garbageReasons.contains(first.reason) {
            return TransportError(
                code: .unavailable, reason: .protocolViolation,
                message: "the peer sent bytes that are not valid TLS records (\(first.text))", native: errors.native)
        }
        if !fromSSL && first.library != ERR_LIB_X509 && first.library != ERR_LIB_X509V3 {
            // Out of memory, a provider failure: OpenSSL's own trouble, not the peer's.
            return TransportError(
                code: .internal, reason: duringHandshake ? .tlsHandshake : .protocolViolation,
                message: "\(phase) failed inside OpenSSL (\(errors.summary))", native: errors.native)
        }
        return TransportError(
            code: .unavailable, reason: duringHandshake ? .tlsHandshake : .protocolViolation,
            message: "\(phase) failed (\(errors.summary))", native: errors.native)
    }
}

/// OpenSSL's per-thread error queue, drained: the first error is the cause, later ones
/// context. Drained right after each failed call, on the same thread.
struct OpenSSLErrors {
    struct Entry {
        let library: Int32
        let reason: Int32
        let text: String
    }
    private(set) var entries: [Entry] = []

    static func drain() -> OpenSSLErrors {
        var errors = OpenSSLErrors()
        while case let code = ERR_get_error(), code != 0 {
            let library = Int32(truncatingIfNeeded: switchyard_err_get_lib(code))
            let reason = Int32(truncatingIfNeeded: switchyard_err_get_reason(code))
            let text = ERR_reason_error_string(code).map { String(cString: $0) } ?? "error \(reason)"
            errors.entries.append(Entry(library: library, reason: reason, text: text))
        }
        return errors
    }

    var first: Entry? { entries.first }
    var isEmpty: Bool { entries.isEmpty }
    var summary: String { entries.isEmpty ? "no OpenSSL error queued" : entries.map(\.text).joined(separator: "; ") }
    var native: TransportError.NativeError? {
        first.map { .init(domain: .openssl, code: $0.reason, name: $0.text) }
    }
}
