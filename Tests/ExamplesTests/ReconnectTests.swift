import Foundation
import Glibc
import Testing

/// echo-client --reconnect across a real switch of network (namespaces, veths named
/// wlan0-N and wwan0-N, the default route moved mid-run): see
/// reconnect-across-switch.sh. Needs root and iproute2; elsewhere it says so and passes.
@Suite("echo-client --reconnect", .serialized)
struct ReconnectTests {
    static var canBuildNamespaces: Bool {
        getuid() == 0 && ["/usr/sbin/ip", "/usr/bin/ip", "/sbin/ip", "/bin/ip"].contains { FileManager.default.isExecutableFile(atPath: $0) }
    }

    @Test("Calls fail with unavailable across a switch from wifi to cellular and recover on the new path", arguments: socketBackends)
    func acrossSwitch(backend: String) async throws {
        guard Self.canBuildNamespaces else {
            print("skipped: echo-client --reconnect across a switch needs root and iproute2")
            return
        }
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("reconnect-across-switch.sh").path
        let directory = (try Products.path("echo-client") as NSString).deletingLastPathComponent
        let run = try Subprocess("/bin/bash", [script, directory, backend], name: "reconnect-across-switch.sh (\(backend))", hardTimeout: .seconds(90))
        let ending = await run.wait(timeout: .seconds(90))
        let output = run.stdout
        #expect(ending == .exit(0), "\(run.report)")
        #expect(output.contains("network: wifi (wlan0-"), "\(output)")
        #expect(output.contains("network changed to cellular (wwan0-"), "\(output)")
        #expect(output.contains("call failed with unavailable (connectivity changed)"), "\(output)")
        #expect(output.contains("messages 150000"), "\(output)")
        #expect(!output.contains("reconnects 0"), "\(output)")
    }
}
