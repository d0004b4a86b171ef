package import Switchyard
package import SwitchyardConformance

/// The TLS pairs, as the build of the tool that has them hands them in.
///
/// `switchyard-conformance-tls` gives them, from `SwitchyardConformanceTLS` (on the
/// system OpenSSL 3); `switchyard-conformance` has none, so that running the kit needs no
/// `libssl-dev`, and hands a selection that asks for TLS to that build. The parsing of
/// `+tls` names, the certificates and the pairs stay `SwitchyardConformanceTLS`'s: this
/// is only the way in.
package struct ConformanceToolTLS: Sendable {
    /// Makes the throwaway test certificates into a new directory and returns its path
    /// (`ConformanceTLS.makeTestCertificates()`).
    package var makeCertificates: @Sendable () throws(ConformanceSelectionError) -> String
    /// Removes a directory ``makeCertificates`` made.
    package var removeCertificates: @Sendable (String) -> Void
    /// Makes the `--pair` values that name TLS pairs (`bsd+tls:libuv+tls`) into pairs,
    /// asking for the certificate directory when one needs it, and returns them with the
    /// other values, left for the plaintext selection
    /// (`ConformanceTLS.selectPairs(registry:pairs:certificateDirectory:)`).
    package var selectPairs:
        @Sendable (
            _ registry: BackendRegistry, _ pairs: [String], _ certificateDirectory: () throws(ConformanceSelectionError) -> String
        ) throws(ConformanceSelectionError) -> (tls: [ConformancePair], plain: [String])
    /// The TLS pair over a client and a server plaintext backend, with the certificates of
    /// the directory (`ConformanceTLS.pair(client:server:certificateDirectory:)`).
    package var pair:
        @Sendable (_ client: TransportBackend, _ server: TransportBackend, _ certificateDirectory: String) throws(TransportError) ->
            ConformancePair

    package init(
        makeCertificates: @escaping @Sendable () throws(ConformanceSelectionError) -> String,
        removeCertificates: @escaping @Sendable (String) -> Void,
        selectPairs:
            @escaping @Sendable (BackendRegistry, [String], () throws(ConformanceSelectionError) -> String) throws(ConformanceSelectionError) -> (
                tls: [ConformancePair], plain: [String]
            ),
        pair: @escaping @Sendable (TransportBackend, TransportBackend, String) throws(TransportError) -> ConformancePair
    ) {
        self.makeCertificates = makeCertificates
        self.removeCertificates = removeCertificates
        self.selectPairs = selectPairs
        self.pair = pair
    }
}
