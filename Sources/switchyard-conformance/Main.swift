// switchyard-conformance: the kit's command-line runner, without the TLS pairs and so
// without OpenSSL: a backend author runs it with no libssl-dev. Asked for TLS pairs
// (`--tls`, `--pair bsd+tls:libuv+tls`), it runs switchyard-conformance-tls from its own
// directory in its place. The tool is Sources/SwitchyardConformanceTool (its header
// comment says the options and exit statuses).

import SwitchyardConformanceTool

@main
enum Main {
    static func main() async {
        await ConformanceTool.main(tls: nil)
    }
}
