// switchyard-conformance-tls: the kit's command-line runner with the TLS pairs (`--tls`,
// `--pair bsd+tls:libuv+tls`) of SwitchyardConformanceTLS, on the system OpenSSL 3
// (libssl-dev). Otherwise the same tool as switchyard-conformance, which runs this one
// when TLS pairs are asked for; `swift package conformance` builds and runs it then. The
// tool is Sources/SwitchyardConformanceTool (its header comment says the options and exit
// statuses).

import SwitchyardConformance
import SwitchyardConformanceTLS
import SwitchyardConformanceTool

@main
enum Main {
    static func main() async {
        await ConformanceTool.main(
            tls: ConformanceToolTLS(
                makeCertificates: { () throws(ConformanceSelectionError) in try ConformanceTLS.makeTestCertificates() },
                removeCertificates: ConformanceTLS.removeTestCertificates,
                selectPairs: ConformanceTLS.selectPairs,
                pair: ConformanceTLS.pair))
    }
}
