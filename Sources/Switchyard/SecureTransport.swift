/// A ``Transport`` whose connections are TLS: encrypted, and authenticated as the host
/// connected to. The core speaks no TLS itself; a TLS layer (SwitchyardTLS's
/// `TLSTransport`) declares it, and code in the core that must not send plaintext, such
/// as SwitchyardReachability's `SiteReachability` probing an `https` URL, checks for it.
///
/// ## Contract
///
/// On top of ``Transport``'s: ``Transport/connect(to:options:)`` returns a connection
/// only after a handshake that verified the server's certificate for the endpoint's host
/// (sent as SNI when it is a name), unless the transport was configured to verify a
/// fixed name or less (then that is its documented choice); the connection's bytes are
/// the decrypted application data. A wrapper that forwards to a secure transport may
/// declare it too; one that can connect in plaintext must not.
public protocol SecureTransport: Transport {}
