internal import CSwitchyardOpenSSL
public import Switchyard

/// A ``TLSConfiguration`` made real: an OpenSSL `SSL_CTX` with the certificate, key and
/// trust roots loaded. Make one per configuration and share it: every connection of a
/// side draws its session from it. Loading happens here, once, so a bad file fails when
/// the context is made, not on the first connection.
///
/// `@unchecked Sendable`: the `SSL_CTX` is set up completely in `init` and never changed
/// afterwards; OpenSSL makes sessions from a shared, unchanging context safely from any
/// thread (`SSL_new` takes its own reference under OpenSSL's locks).
public final class TLSContext: @unchecked Sendable {
    /// The configuration this context was made from.
    public let configuration: TLSConfiguration
    let context: OpaquePointer
    /// The server's ALPN list as the shim's callback reads it (length, then wire format);
    /// owned here because OpenSSL keeps only the pointer.
    private let serverProtocolList: UnsafeMutableRawBufferPointer?

    /// Loads the configuration's files into a new OpenSSL context.
    /// - Throws: `invalidArgument`, reason `invalid option`: for a configuration that
    ///   fails ``TLSConfiguration/validate()``, and for a certificate chain, private key
    ///   or CA bundle that cannot be read or is not valid PEM, or a key that does not
    ///   match its certificate; the message names the file and gives OpenSSL's reason.
    ///   `internal` if OpenSSL cannot make a context at all.
    public init(configuration: TLSConfiguration) throws(TransportError) {
        try configuration.validate()
        self.configuration = configuration
        ERR_clear_error()
        let method = configuration.role == .client ? TLS_client_method() : TLS_server_method()
        guard let context = SSL_CTX_new(method) else {
            throw TransportError(
                code: .internal, reason: .tlsHandshake,
                message: "OpenSSL could not make a TLS context: \(OpenSSLErrors.drain().summary)")
        }
        self.context = context
        var protocolList: UnsafeMutableRawBufferPointer?
        do {
            try Self.setUp(context, configuration, serverProtocolList: &protocolList)
        } catch {
            SSL_CTX_free(context)
            protocolList?.deallocate()
            throw error
        }
        self.serverProtocolList = protocolList
    }

    deinit {
        SSL_CTX_free(context)
        serverProtocolList?.deallocate()
    }

    private static func setUp(
        _ context: OpaquePointer, _ configuration: TLSConfiguration,
        serverProtocolList: inout UnsafeMutableRawBufferPointer?
    ) throws(TransportError) {
        func version(_ version: TLSConfiguration.Version) -> Int32 {
            version == .tls12 ? switchyard_ssl_version_tls1_2() : switchyard_ssl_version_tls1_3()
        }
        guard switchyard_ssl_ctx_set_min_proto_version(context, version(configuration.minimumVersion)) == 1,
            switchyard_ssl_ctx_set_max_proto_version(context, version(configuration.maximumVersion)) == 1
        else {
            throw fileError("OpenSSL refused the protocol versions \(configuration.minimumVersion)...\(configuration.maximumVersion)")
        }
        // Writes are whole (no partial writes: the session's BIO never pushes back), and the
        // buffers OpenSSL keeps between records are released when idle.
        _ = switchyard_ssl_ctx_set_mode(context, Int(SSL_MODE_RELEASE_BUFFERS))
        _ = SSL_CTX_set_options(context, switchyard_ssl_op_no_renegotiation())
        if configuration.role == .server {
            // No TLS 1.3 session tickets: nothing here resumes sessions, and a ticket is
            // data the server sends unasked right after the handshake; a client that
            // never reads it and closes makes its kernel answer with a reset (unread data
            // in the receive buffer), which the server would see instead of close_notify.
            _ = SSL_CTX_set_num_tickets(context, 0)
            // Nor a session cache: no session is ever resumed, so every handshake would
            // only add its session to a cache (and flush it every 255 handshakes) for
            // nothing.
            switchyard_ssl_ctx_disable_session_cache(context)
        }

        if let chain = configuration.certificateChainFile, let key = configuration.privateKeyFile {
            guard SSL_CTX_use_certificate_chain_file(context, chain) == 1 else {
                throw fileError("cannot load the certificate chain '\(chain)' (PEM)")
            }
            guard SSL_CTX_use_PrivateKey_file(context, key, SSL_FILETYPE_PEM) == 1 else {
                // OpenSSL checks the key against the certificate as it loads it.
                let last = ERR_peek_last_error()
                if switchyard_err_get_lib(last) == UInt(ERR_LIB_X509) && switchyard_err_get_reason(last) == UInt(X509_R_KEY_VALUES_MISMATCH) {
                    throw fileError("the private key '\(key)' does not match the certificate '\(chain)'")
                }
                throw fileError("cannot load the private key '\(key)' (PEM)")
            }
            guard SSL_CTX_check_private_key(context) == 1 else {
                throw fileError("the private key '\(key)' does not match the certificate '\(chain)'")
            }
        }

        let verifies =
            configuration.role == .client
            ? configuration.serverVerification != .none
            : configuration.clientAuthentication != .none
        if verifies {
            switch configuration.trustRoots.source {
            case .system:
                guard SSL_CTX_set_default_verify_paths(context) == 1 else {
                    throw fileError("cannot load the system trust store")
                }
            case .pemFile(let path):
                guard SSL_CTX_load_verify_locations(context, path, nil) == 1 else {
                    throw fileError("cannot load the CA bundle '\(path)' (PEM)")
                }
                if configuration.role == .server {
                    // The CA names a server sends in its CertificateRequest.
                    if let names = SSL_load_client_CA_file(path) { SSL_CTX_set_client_CA_list(context, names) }
                }
            }
        }
        var mode = verifies ? SSL_VERIFY_PEER : SSL_VERIFY_NONE
        if configuration.role == .server && configuration.clientAuthentication == .required {
            mode |= SSL_VERIFY_FAIL_IF_NO_PEER_CERT
        }
        SSL_CTX_set_verify(context, mode, nil)

        if !configuration.applicationProtocols.isEmpty {
            var wire = [UInt8]()
            for name in configuration.applicationProtocols {
                wire.append(UInt8(name.utf8.count))
                wire.append(contentsOf: name.utf8)
            }
            if configuration.role == .client {
                // Returns 0 on success (unlike its neighbours).
                guard SSL_CTX_set_alpn_protos(context, wire, UInt32(wire.count)) == 0 else {
                    throw fileError("OpenSSL refused the application protocols \(configuration.applicationProtocols)")
                }
            } else {
                let list = UnsafeMutableRawBufferPointer.allocate(byteCount: wire.count + 2, alignment: 1)
                list[0] = UInt8(wire.count & 0xff)
                list[1] = UInt8(wire.count >> 8)
                for (index, byte) in wire.enumerated() { list[index + 2] = byte }
                serverProtocolList = list
                switchyard_ssl_ctx_set_alpn_server(context, list.baseAddress!.assumingMemoryBound(to: UInt8.self))
            }
        }
    }

    /// A configuration error with OpenSSL's reason appended.
    private static func fileError(_ what: String) -> TransportError {
        let errors = OpenSSLErrors.drain()
        return TransportError(
            code: .invalidArgument, reason: .invalidOption,
            message: errors.isEmpty ? what : "\(what): \(errors.summary)",
            native: errors.native)
    }
}
