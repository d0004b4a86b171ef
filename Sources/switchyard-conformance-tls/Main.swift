// switchyard-conformance-tls: the kit's command-line runner with the TLS pairs (`--tls`,
// `--pair bsd+tls:libuv+tls`) of SwitchyardConformanceTLS, on the system OpenSSL 3
// (libssl-dev). Otherwise the same tool as switchyard-conformance, which runs this one
// when TLS pairs are asked for; `swift package conformance` builds and runs it then. The
// tool is Sources/SwitchyardConformanceTool (its header comment says the options and exit
// statuses). With Switchyard's package trait TLS off it has no TLS pairs and says so.

#if TLS
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
#else
import Glibc

@main
enum Main {
    static func main() {
        let message = """
            switchyard-conformance-tls: error: this build has no TLS pairs: Switchyard's package trait \
            TLS is off. Add "TLS" to the traits of the package's dependency on switchyard \
            (`.package(..., traits: ["TLS"])`; it needs the system OpenSSL 3, Debian libssl-dev).

            """
        fputs(message, stderr)
        exit(2)
    }
}
#endif
