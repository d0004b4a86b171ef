import Foundation
import Testing

@testable import SwitchyardConformance

/// How the fault networks' commands report a failure: the command, its exit status and
/// the tool's own words on standard error. None of these needs root.
@Suite("Fault network commands")
struct FaultNetworkTests {
    @Test("A command that fails says the command, its exit status and what the tool wrote on standard error")
    func failureSaysWhy() throws {
        let command = ["ip", "link", "show", "dev", "sykit-no-such-link"]
        let failure = try #require(FaultNetwork.failure(running: command))
        #expect(failure == "`ip link show dev sykit-no-such-link` failed with exit status 1: Device \"sykit-no-such-link\" does not exist.")
        let thrown = #expect(throws: FaultNetwork.NetworkError.self) { try FaultNetwork.check(command) }
        #expect(thrown?.message == failure)
        #expect(FaultNetwork.run(command) == false)
    }

    @Test("Several lines on standard error are kept, joined; a command that succeeds is no failure")
    func severalLinesAndSuccess() throws {
        // `ip -batch` stops at the first bad line and names it, after its own error.
        let path = NSTemporaryDirectory() + "sykit-batch-test-\(getpid())"
        try "link show dev lo\nlink show dev sykit-no-such-link\n".write(toFile: path, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let failure = try #require(FaultNetwork.failure(running: ["ip", "-batch", path]))
        #expect(
            failure == "`ip -batch \(path)` failed with exit status 1: Device \"sykit-no-such-link\" does not exist. / Command failed \(path):2")
        #expect(FaultNetwork.failure(running: ["ip", "link", "show", "dev", "lo"]) == nil)
    }

    @Test("A tool that is not installed is said so")
    func notInstalled() {
        #expect(
            FaultNetwork.failure(running: ["sykit-no-such-tool", "x"])
                == "`sykit-no-such-tool x` failed: sykit-no-such-tool is not installed (looked in /usr/sbin, /sbin, /usr/bin and /bin)")
    }
}
