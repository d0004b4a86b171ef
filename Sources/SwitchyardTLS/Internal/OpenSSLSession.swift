internal import CSwitchyardOpenSSL
import Switchyard

/// One OpenSSL `SSL` over two memory BIOs: ciphertext from the network goes into
/// ``feed(_:)``, ciphertext for the network comes out of ``takeOutput()``; the wrapped
/// connection does all the I/O. Used on one thread at a time (the connection's loop), so
/// OpenSSL's per-thread error queue read after each call is that call's.
final class OpenSSLSession {
    private let ssl: OpaquePointer
    /// Ciphertext from the peer, waiting for OpenSSL (owned by `ssl`).
    private let inbound: OpaquePointer
    /// Ciphertext OpenSSL wrote for the peer (owned by `ssl`).
    private let outbound: OpaquePointer
    let context: TLSContext

    enum Progress {
        case done
        case wantsInput
        case failed(TransportError)
    }

    enum ReadResult {
        case bytes(Int)
        case wantsInput
        case closeNotify
        case failed(TransportError)
    }

    /// A session for `context`'s role; a client's `serverName` is sent as SNI (unless it
    /// is an IP literal) and, with full verification, checked against the certificate.
    init(context: TLSContext, serverName: String?) throws(TransportError) {
        ERR_clear_error()
        guard let ssl = SSL_new(context.context),
            let inbound = BIO_new(BIO_s_mem()),
            let outbound = BIO_new(BIO_s_mem())
        else {
            throw TransportError(
                code: .resourceExhausted, reason: .resourceLimit,
                message: "OpenSSL could not make a TLS session: \(OpenSSLErrors.drain().summary)")
        }
        switchyard_bio_set_mem_eof_retry(inbound)
        switchyard_bio_set_mem_eof_retry(outbound)
        SSL_set_bio(ssl, inbound, outbound)
        self.ssl = ssl
        self.inbound = inbound
        self.outbound = outbound
        self.context = context
        let configuration = context.configuration
        if configuration.role == .client {
            SSL_set_connect_state(ssl)
            if let serverName {
                let isIP = IPAddress.parseIPv4(serverName) != nil || IPAddress.parseIPv6(serverName) != nil
                if !isIP { _ = switchyard_ssl_set_tlsext_host_name(ssl, serverName) }
                if configuration.serverVerification == .full {
                    let param = SSL_get0_param(ssl)
                    let set = isIP ? X509_VERIFY_PARAM_set1_ip_asc(param, serverName) : SSL_set1_host(ssl, serverName)
                    guard set == 1 else {
                        throw TransportError(
                            code: .invalidArgument, reason: .invalidOption,
                            message: "OpenSSL refused '\(serverName)' as the name to verify: \(OpenSSLErrors.drain().summary)")
                    }
                    SSL_set_hostflags(ssl, UInt32(X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS))
                }
            } else if configuration.serverVerification == .full {
                throw TransportError(
                    code: .invalidArgument, reason: .invalidOption,
                    message: "TLS client with full verification but no server name to verify")
            }
        } else {
            SSL_set_accept_state(ssl)
        }
    }

    deinit { SSL_free(ssl) }

    /// Hands ciphertext from the network to OpenSSL (copied into the inbound BIO).
    func feed(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return }
        var offset = 0
        while offset < bytes.count {
            let chunk = Int32(min(bytes.count - offset, Int(Int32.max)))
            let written = BIO_write(inbound, base + offset, chunk)
            precondition(written > 0, "a memory BIO refused bytes (out of memory)")
            offset += Int(written)
        }
    }

    /// Ciphertext OpenSSL produced for the peer since the last call, or nil.
    func takeOutput() -> [UInt8]? {
        let pending = Int(BIO_ctrl_pending(outbound))
        guard pending > 0 else { return nil }
        return [UInt8](unsafeUninitializedCapacity: pending) { buffer, count in
            let read = BIO_read(outbound, buffer.baseAddress, Int32(pending))
            count = max(0, Int(read))
        }
    }

    /// Bytes from the peer held here: ciphertext not yet processed, plus decrypted bytes
    /// of the current record not yet read.
    var bufferedInboundBytes: Int { Int(BIO_ctrl_pending(inbound)) + Int(SSL_pending(ssl)) }

    /// Advances the handshake with what was fed.
    func handshake() -> Progress {
        ERR_clear_error()
        let result = SSL_do_handshake(ssl)
        if result == 1 { return .done }
        switch SSL_get_error(ssl, result) {
        case SSL_ERROR_WANT_READ, SSL_ERROR_WANT_WRITE: return .wantsInput
        default: return .failed(failure(duringHandshake: true))
        }
    }

    /// Decrypts into `buffer`.
    func read(into buffer: UnsafeMutableRawBufferPointer) -> ReadResult {
        ERR_clear_error()
        var count = 0
        if SSL_read_ex(ssl, buffer.baseAddress, buffer.count, &count) == 1 { return .bytes(count) }
        switch SSL_get_error(ssl, 0) {
        case SSL_ERROR_WANT_READ, SSL_ERROR_WANT_WRITE: return .wantsInput
        case SSL_ERROR_ZERO_RETURN: return .closeNotify
        default: return .failed(failure(duringHandshake: false))
        }
    }

    /// Encrypts all of `bytes` (a memory BIO never pushes back, so the write is whole).
    func write(_ bytes: UnsafeRawBufferPointer) -> TransportError? {
        guard bytes.count > 0 else { return nil }
        ERR_clear_error()
        var written = 0
        if SSL_write_ex(ssl, bytes.baseAddress, bytes.count, &written) == 1 && written == bytes.count { return nil }
        return failure(duringHandshake: false)
    }

    /// Queues this side's `close_notify` (take it with ``takeOutput()``).
    func shutdown() {
        ERR_clear_error()
        _ = SSL_shutdown(ssl)
        ERR_clear_error()
    }

    /// The application protocol ALPN settled on, if any.
    var negotiatedProtocol: String? {
        var data: UnsafePointer<UInt8>?
        var length: UInt32 = 0
        SSL_get0_alpn_selected(ssl, &data, &length)
        guard let data, length > 0 else { return nil }
        return String(decoding: UnsafeBufferPointer(start: data, count: Int(length)), as: UTF8.self)
    }

    /// The protocol version the handshake settled on.
    var negotiatedVersion: TLSConfiguration.Version? {
        switch SSL_version(ssl) {
        case switchyard_ssl_version_tls1_2(): .tls12
        case switchyard_ssl_version_tls1_3(): .tls13
        default: nil
        }
    }

    /// Whether the peer presented a certificate (that verified, when this side verifies).
    var peerPresentedCertificate: Bool {
        guard let certificate = SSL_get1_peer_certificate(ssl) else { return false }
        X509_free(certificate)
        return true
    }

    private func failure(duringHandshake: Bool) -> TransportError {
        TLSErrorTable.map(OpenSSLErrors.drain(), verifyResult: Int(SSL_get_verify_result(ssl)), duringHandshake: duringHandshake)
    }
}
