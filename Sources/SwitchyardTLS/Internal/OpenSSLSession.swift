internal import CSwitchyardOpenSSL
import Switchyard

/// One OpenSSL `SSL` over one BIO of the shim's `switchyard_tls_io`: OpenSSL decrypts
/// straight from the bytes the wrapped connection lends (``lend(_:_:)``) and writes its
/// records into one reusable buffer that the caller hands to the wrapped connection
/// (``withOutput(_:)``); the wrapped connection does all the I/O. Used on one thread at a
/// time (the connection's loop), so OpenSSL's per-thread error queue read after each call
/// is that call's.
final class OpenSSLSession {
    private let ssl: OpaquePointer
    /// What the BIO reads from and writes to (owned here; the BIO, owned by `ssl`, points
    /// at it).
    private let io: UnsafeMutablePointer<switchyard_tls_io>
    let context: TLSContext

    enum Progress {
        case done
        case wantsInput
        case failed(TransportError)
    }

    /// Why a ``read(into:)`` stopped.
    enum ReadStop {
        /// The buffer is full; more may be waiting.
        case full
        case wantsInput
        case closeNotify
        case failed(TransportError)
    }

    /// Why the last read stopped, when it stopped with bytes in the buffer: told on the
    /// next read, after those bytes were delivered.
    private var deferredStop: ReadStop?

    /// The BIO method, made once. `nonisolated(unsafe)`: set once (a `static let` is
    /// initialised once, thread-safely) and only read afterwards; OpenSSL reads a
    /// `BIO_METHOD` from any thread.
    nonisolated(unsafe) private static let method: OpaquePointer? = switchyard_tls_io_method_new()

    /// A session for `context`'s role; a client's `serverName` is sent as SNI (unless it
    /// is an IP literal) and, with full verification, checked against the certificate.
    init(context: TLSContext, serverName: String?) throws(TransportError) {
        switchyard_err_clear()
        let io = UnsafeMutablePointer<switchyard_tls_io>.allocate(capacity: 1)
        io.initialize(to: switchyard_tls_io())
        guard let ssl = SSL_new(context.context) else {
            io.deallocate()
            throw TransportError(
                code: .resourceExhausted, reason: .resourceLimit,
                message: "OpenSSL could not make a TLS session: \(OpenSSLErrors.drain().summary)")
        }
        // From here deinit frees both.
        self.ssl = ssl
        self.io = io
        self.context = context
        guard let method = Self.method, let bio = switchyard_tls_io_bio_new(method, io) else {
            throw TransportError(
                code: .resourceExhausted, reason: .resourceLimit,
                message: "OpenSSL could not make a TLS session's BIO: \(OpenSSLErrors.drain().summary)")
        }
        SSL_set_bio(ssl, bio, bio)
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

    deinit {
        SSL_free(ssl)
        switchyard_tls_io_free(io)
        io.deallocate()
    }

    /// Runs `body` (handshake steps, reads) with `bytes`, ciphertext from the network,
    /// readable by OpenSSL in place; what OpenSSL did not read by the end is copied and
    /// read first next time. `bytes` is used only during the call.
    func lend<R>(_ bytes: UnsafeRawBufferPointer, _ body: () -> R) -> R {
        io.pointee.lent = bytes.baseAddress?.assumingMemoryBound(to: UInt8.self)
        io.pointee.lentCount = bytes.count
        defer {
            let kept = switchyard_tls_io_end_loan(io)
            precondition(kept == 1, "out of memory for \(bytes.count) bytes of TLS input")
        }
        return body()
    }

    /// Runs `body` with the ciphertext OpenSSL produced for the peer since the last call,
    /// if any, then empties the buffer (`body` hands the bytes on; the buffer is reused).
    /// Returns whether there was any.
    func withOutput(_ body: (UnsafeRawBufferPointer) -> Void) -> Bool {
        let count = io.pointee.outCount
        guard count > 0 else { return false }
        body(UnsafeRawBufferPointer(start: io.pointee.out, count: count))
        io.pointee.outCount = 0
        return true
    }

    /// Frees the output buffer once its records were handed on (``withOutput(_:)``): after
    /// the handshake, whose flight (the certificate chain: most of a kilobyte with an EC
    /// key, several with RSA) it grew to and no later write needs, so an idle connection
    /// does not keep it. The next write makes a buffer of its own size.
    func releaseOutputBuffer() {
        switchyard_tls_io_release_output(io)
    }

    /// The bytes the output buffer holds room for.
    var outputBufferCapacity: Int { io.pointee.outCapacity }

    /// Bytes from the peer held here: ciphertext not yet processed, plus decrypted bytes
    /// of the current record not yet read.
    var bufferedInboundBytes: Int {
        Int(io.pointee.heldEnd - io.pointee.heldStart) + io.pointee.lentCount + Int(SSL_pending(ssl))
    }

    /// Advances the handshake with what was fed.
    func handshake() -> Progress {
        switchyard_err_clear()
        let result = SSL_do_handshake(ssl)
        if result == 1 { return .done }
        switch SSL_get_error(ssl, result) {
        case SSL_ERROR_WANT_READ, SSL_ERROR_WANT_WRITE: return .wantsInput
        default: return .failed(failure(duringHandshake: true))
        }
    }

    /// Decrypts into `buffer` what OpenSSL can, record after record, until the buffer is
    /// full or OpenSSL stops (needs input, the peer's close_notify, an error); returns the
    /// bytes decrypted and why it stopped. A close_notify or failure that came after some
    /// bytes is returned with them and again, alone, by the next call: for a caller that
    /// delivered the bytes and then could not act on it (its user stopped reading).
    func read(into buffer: UnsafeMutableRawBufferPointer) -> (count: Int, stop: ReadStop) {
        if let stop = deferredStop {
            switch stop {
            case .closeNotify, .failed:
                deferredStop = nil
                return (0, stop)
            case .full, .wantsInput:
                deferredStop = nil
            }
        }
        var filled = 0
        // Once: a read that succeeds leaves nothing in the queue.
        switchyard_err_clear()
        while filled < buffer.count {
            var count = 0
            if SSL_read_ex(ssl, buffer.baseAddress! + filled, buffer.count - filled, &count) == 1 {
                filled += count
                continue
            }
            let stop: ReadStop
            switch SSL_get_error(ssl, 0) {
            case SSL_ERROR_WANT_READ, SSL_ERROR_WANT_WRITE: stop = .wantsInput
            case SSL_ERROR_ZERO_RETURN: stop = .closeNotify
            default: stop = .failed(failure(duringHandshake: false))
            }
            if filled > 0 {
                deferredStop = stop
            }
            return (filled, stop)
        }
        return (filled, .full)
    }

    /// Encrypts all of `bytes` (the BIO never pushes back, so the write is whole).
    func write(_ bytes: UnsafeRawBufferPointer) -> TransportError? {
        guard bytes.count > 0 else { return nil }
        switchyard_err_clear()
        var written = 0
        if SSL_write_ex(ssl, bytes.baseAddress, bytes.count, &written) == 1 && written == bytes.count { return nil }
        return failure(duringHandshake: false)
    }

    /// Encrypts the bytes `fill` writes into a buffer of `capacity` bytes on the stack (it
    /// returns how many): parts gathered so that they share records, as one write would.
    func write(gathering capacity: Int, _ fill: (UnsafeMutableRawBufferPointer) -> Int) -> TransportError? {
        withUnsafeTemporaryAllocation(byteCount: capacity, alignment: 1) { buffer in
            write(UnsafeRawBufferPointer(rebasing: buffer[..<fill(buffer)]))
        }
    }

    /// Queues this side's `close_notify` (take it with ``withOutput(_:)``).
    func shutdown() {
        switchyard_err_clear()
        _ = SSL_shutdown(ssl)
        switchyard_err_clear()
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
