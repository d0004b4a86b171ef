import Foundation
import Subprocess
import Glibc
import Testing

/// transfer-server and transfer-client as a user runs them: separate processes over
/// loopback, the stored copy compared byte for byte, the transfer digest checked against Python's hashlib
/// (a tool Switchyard did not write), and a sender killed mid-transfer and restarted
/// with the same `--resume-state`.
@Suite("transfer-server and transfer-client", .serialized, .timeLimit(.minutes(3)))
struct TransferToolsTests {
    @Test("transfer-client sends a file whole into the server's folder", arguments: socketBackends)
    func sendsWholeFile(backend: String) async throws {
        let work = try TemporaryFolder()
        let file = work.path + "/whole.bin"
        let size = 32 << 20
        try writeRandomFile(file, size: size)
        let dir = work.path + "/received"
        let (server, port) = try await startTransferServer(backend: backend, dir: dir)
        defer { server.killIfRunning() }

        let client = try Subprocess(
            try Products.path("transfer-client"), ["send", file, "--backend", backend, "--port", String(port)],
            name: "transfer-client(\(backend))")
        _ = try await client.waitForLine(containing: "sent \(size) bytes", timeout: .seconds(90))
        let summarized = ContinuousClock.now
        let ending = await client.wait(timeout: .seconds(30))
        #expect(ending == .exit(0), "\(client.report)\n\(server.report)")
        // It leaves once it is done: its channel's idle connection is closed, not waited
        // on for the whole 1 s grace period of the transport's shutdown.
        let lingered = ContinuousClock.now - summarized
        #expect(lingered < .milliseconds(800), "exited \(lingered) after its summary line\n\(client.report)")

        let summary = try #require(TransferSummary(client.stdout), "no summary line\n\(client.report)")
        let sha256 = try await transferDigest(file)
        #expect(summary == TransferSummary(sent: UInt64(size), resent: 0, resumes: 0, sha256: sha256), "\(client.report)")
        // Exactly one summary line, and it is the last; plain progress lines (stdout is a
        // pipe), the last one at 100%.
        let lines = client.stdout.split(separator: "\n").map(String.init)
        #expect(lines.filter { $0.hasPrefix("sent ") }.count == 1 && lines.last?.hasPrefix("sent ") == true, "\(client.report)")
        #expect(!client.stdout.contains("\r") && !client.stdout.contains("\u{1B}"), "no terminal redraws into a pipe\n\(client.report)")
        let progress = lines.compactMap(ProgressLine.init)
        #expect(progress.count >= 2 && progress.last?.acknowledged == UInt64(size), "\(client.report)")

        #expect(try Data(contentsOf: URL(fileURLWithPath: dir + "/whole.bin")) == Data(contentsOf: URL(fileURLWithPath: file)), "the stored copy differs")
        _ = try await server.waitForLine(containing: "transfer-server: received whole.bin (\(size) bytes, sha256 \(sha256)) -> \(dir)/whole.bin", timeout: .seconds(5))
        await expectCleanStop(server)
        #expect(server.stdout.contains("transfer-server: stopped"), "\(server.report)")
    }

    /// The sender is SIGKILLed once the server acknowledged a good part of the file. To
    /// kill it mid-transfer whatever the machine's speed, the server is stopped (SIGSTOP)
    /// as soon as a progress line shows a fifth acknowledged, so nothing more moves while
    /// the client dies; then it continues, and a new client with the same arguments
    /// finishes from the saved state and the server's durable offset.
    @Test("A killed transfer-client restarted with the same --resume-state finishes without starting over, hashing as it began", arguments: socketBackends)
    func killedSenderResumes(backend: String) async throws {
        let work = try TemporaryFolder()
        let file = work.path + "/resumed.bin"
        let size = 48 << 20
        try writeRandomFile(file, size: size)
        let dir = work.path + "/received"
        let state = work.path + "/resumed.state"
        let (server, port) = try await startTransferServer(backend: backend, dir: dir)
        defer {
            server.send(SIGCONT)
            server.killIfRunning()
        }
        let arguments = ["send", file, "--backend", backend, "--port", String(port), "--resume-state", state]

        // The first client hashes its leaves with SHA-256; the second is not told, and
        // goes on as the resume state says (else the server would start over).
        let first = try Subprocess(try Products.path("transfer-client"), arguments + ["--leaf-digest", "sha256"], name: "transfer-client #1 (\(backend))")
        defer { first.killIfRunning() }
        let acknowledged = try await waitForProgress(of: first, atLeast: UInt64(size / 5))
        server.send(SIGSTOP)
        first.send(SIGKILL)
        let ending = await first.wait(timeout: .seconds(20))
        server.send(SIGCONT)
        try #require(ending == .signal(SIGKILL), "the first client should die mid-transfer, not \(ending)\n\(first.report)")
        #expect(TransferSummary(first.stdout) == nil, "\(first.report)")
        let saved = try String(contentsOfFile: state, encoding: .utf8)
        #expect(saved.hasPrefix("switchyard-transfer-resume 3\n") && saved.contains("id resumed.bin\n") && saved.contains("\nleaf-digest sha256\n"), "the resume state: \(saved)")
        #expect(!FileManager.default.fileExists(atPath: dir + "/resumed.bin"), "the server finished a file the client never finished")

        let second = try Subprocess(try Products.path("transfer-client"), arguments, name: "transfer-client #2 (\(backend))")
        defer { second.killIfRunning() }
        #expect(await second.wait(timeout: .seconds(90)) == .exit(0), "\(second.report)\n\(server.report)")
        let summary = try #require(TransferSummary(second.stdout), "no summary line\n\(second.report)")
        let sha256 = try await transferDigest(file, leafDigest: "sha256")
        #expect(summary.sha256 == sha256, "\(second.report)")
        // It did not start over: at most what the server had not acknowledged when the
        // first client died was sent again.
        #expect(summary.sent > 0 && summary.sent <= UInt64(size) - acknowledged, "acknowledged \(acknowledged) of \(size) before the kill\n\(second.report)")
        #expect(summary.resumes >= 1, "a start from the server's offset counts as a resume\n\(second.report)")
        let firstLine = try #require(second.stdout.split(separator: "\n").lazy.compactMap { ProgressLine(String($0)) }.first, "\(second.report)")
        #expect(firstLine.acknowledged >= acknowledged && firstLine.acknowledged + summary.sent == UInt64(size), "\(second.report)")

        #expect(try Data(contentsOf: URL(fileURLWithPath: dir + "/resumed.bin")) == Data(contentsOf: URL(fileURLWithPath: file)), "the stored copy differs")
        #expect(!FileManager.default.fileExists(atPath: state), "the resume state is removed once the file is sent")
        _ = try await server.waitForLine(containing: "transfer-server: received resumed.bin (\(size) bytes, sha256 \(sha256))", timeout: .seconds(5))
        await expectCleanStop(server)
    }

    /// On a terminal (a pseudo-terminal from util-linux's `script`) the progress is one
    /// line redrawn in place: carriage returns and erase-to-end-of-line, no plain lines;
    /// the summary line follows on a line of its own.
    @Test("On a terminal transfer-client redraws one progress bar in place", arguments: socketBackends)
    func progressBarOnTerminal(backend: String) async throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/script") else {
            print("skipped: the progress bar test needs /usr/bin/script (bsdutils) for a pseudo-terminal")
            return
        }
        let work = try TemporaryFolder()
        let file = work.path + "/bar.bin"
        let size = 16 << 20
        try writeRandomFile(file, size: size)
        let (server, port) = try await startTransferServer(backend: backend, dir: work.path + "/received")
        defer { server.killIfRunning() }
        let command = [try Products.path("transfer-client"), "send", file, "--backend", backend, "--port", String(port)]
        let client = try Subprocess("/usr/bin/script", ["-qec", command.joined(separator: " "), "/dev/null"], name: "transfer-client(\(backend)) on a terminal")
        #expect(await client.wait(timeout: .seconds(60)) == .exit(0), "\(client.report)\n\(server.report)")
        let output = client.stdout
        #expect(output.contains("\r[") && output.contains("\u{1B}[K") && output.contains("MiB/s  ETA ") && output.contains("resumes 0"), "\(client.report)")
        #expect(output.contains("[########################] 100.0% 16.0/16.0 MiB"), "\(client.report)")
        #expect(!output.contains("progress:"), "\(client.report)")
        let summary = TransferSummary(output.replacingOccurrences(of: "\r", with: ""))
        #expect(summary == TransferSummary(sent: UInt64(size), resent: 0, resumes: 0, sha256: try await transferDigest(file)), "\(client.report)")
        await expectCleanStop(server, with: SIGINT)
    }

    /// The receiver dies instead (SIGKILL) and a new transfer-server starts on the same
    /// folder and port; the client, held still meanwhile (SIGSTOP) so that the transfer
    /// is surely unfinished, resumes in the same process from what the first server
    /// synced: one resume, at most one window (4 MiB) sent again.
    @Test("transfer-client resumes against a restarted transfer-server on the same folder", arguments: socketBackends)
    func resumesAfterServerRestart(backend: String) async throws {
        let work = try TemporaryFolder()
        let file = work.path + "/restart.bin"
        let size = 48 << 20
        try writeRandomFile(file, size: size)
        let dir = work.path + "/received"
        let (server, port) = try await startTransferServer(backend: backend, dir: dir)
        defer { server.killIfRunning() }
        let client = try Subprocess(
            try Products.path("transfer-client"),
            ["send", file, "--backend", backend, "--port", String(port), "--reconnect-timeout", "30"],
            name: "transfer-client(\(backend))")
        defer {
            client.send(SIGCONT)
            client.killIfRunning()
        }
        let acknowledged = try await waitForProgress(of: client, atLeast: UInt64(size / 5))
        client.send(SIGSTOP)
        #expect(await server.stop(with: SIGKILL) == .signal(SIGKILL), "\(server.report)")

        let restarted = try Subprocess(
            try Products.path("transfer-server"), ["--dir", dir, "--backend", backend, "--host", "127.0.0.1", "--port", String(port)],
            name: "transfer-server #2 (\(backend))", hardTimeout: .seconds(150))
        defer { restarted.killIfRunning() }
        _ = try await restarted.waitForLine(containing: "listening on 127.0.0.1:\(port)")
        client.send(SIGCONT)
        #expect(await client.wait(timeout: .seconds(90)) == .exit(0), "\(client.report)\n\(restarted.report)")
        let summary = try #require(TransferSummary(client.stdout), "no summary line\n\(client.report)")
        let sha256 = try await transferDigest(file)
        #expect(summary.sha256 == sha256 && summary.resumes == 1, "\(client.report)")
        #expect(summary.resent <= 4 << 20 && summary.sent == UInt64(size) + summary.resent, "acknowledged \(acknowledged) before the restart\n\(client.report)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: dir + "/restart.bin")) == Data(contentsOf: URL(fileURLWithPath: file)), "the stored copy differs")
        _ = try await restarted.waitForLine(containing: "transfer-server: received restart.bin (\(size) bytes, sha256 \(sha256))", timeout: .seconds(5))
        await expectCleanStop(restarted)
    }

    /// transfer-client across a real switch of network, in namespaces
    /// (``transferAcrossSwitchScript``): the client's default route moves from a
    /// `wlan0`-named link to a `wwan0`-named one mid-transfer and the old link goes
    /// down. With `--follow-network` the client must say so and resume at once; with
    /// `--stall-timeout 2` instead, the dead connection counts as broken after 2 s.
    /// Either way it resumes over the new path, sends at most one window again, and
    /// delivers the file intact. Needs root and iproute2; elsewhere it says so and passes.
    @Test("transfer-client resumes over the new path after a switch from wifi to cellular", arguments: socketBackends, ["--follow-network", "--stall-timeout 2"])
    func acrossNetworkSwitch(backend: String, flags: String) async throws {
        guard ReconnectTests.canBuildNamespaces else {
            print("skipped: transfer-client across a switch needs root and iproute2")
            return
        }
        let work = try TemporaryFolder()
        let size = 48 << 20
        try writeRandomFile(work.path + "/switch.bin", size: size)
        let directory = (try Products.path("transfer-client") as NSString).deletingLastPathComponent
        let run = try Subprocess(
            "/bin/bash", ["-c", Self.transferAcrossSwitchScript, "transfer-across-switch", directory, backend, work.path, String(size / 5), flags],
            name: "transfer across a switch (\(backend), \(flags))", hardTimeout: .seconds(90))
        let ending = await run.wait(timeout: .seconds(90))
        let output = (try? String(contentsOfFile: work.path + "/client.out", encoding: .utf8)) ?? ""
        let errors = (try? String(contentsOfFile: work.path + "/client.err", encoding: .utf8)) ?? ""
        let what = "\(run.report)\n--- client ---\n\(output)\(errors)"
        #expect(ending == .exit(0), "\(what)")
        if flags == "--follow-network" {
            #expect(errors.contains("transfer-client: network: wifi (wlan0-") && errors.contains("network changed to cellular (wwan0-"), "\(what)")
        } else {
            #expect(!errors.contains("network"), "no monitor without --follow-network\n\(what)")
        }
        let summary = try #require(TransferSummary(output), "no summary line\n\(what)")
        #expect(summary.sha256 == (try await transferDigest(work.path + "/switch.bin")), "\(what)")
        #expect(summary.resumes >= 1 && summary.resent <= 4 << 20 && summary.sent == UInt64(size) + summary.resent, "\(what)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: work.path + "/received/switch.bin")) == Data(contentsOf: URL(fileURLWithPath: work.path + "/switch.bin")), "the stored copy differs")
    }

    /// Makes two namespaces (the client's with `wlan0-N`, default route first, and
    /// `wwan0-N`, each a veth to the server's, which holds the server address on its
    /// loopback), starts transfer-server in one and `transfer-client send`
    /// in the other, and switches the client's network once a fifth
    /// is acknowledged (the server held still meanwhile so the transfer is surely
    /// unfinished). Arguments: BIN_DIR BACKEND WORK_DIR (holding switch.bin) MIN_BYTES
    /// [CLIENT_FLAGS, default --follow-network].
    /// The client's output goes to WORK_DIR/client.out and client.err.
    static let transferAcrossSwitchScript = #"""
set -euo pipefail
bin=$1
backend=$2
work=$3
id=$(( $$ % 100000 ))
client=sy-tx-c-$id
server=sy-tx-s-$id
server_pid=""
client_pid=""
cleanup() {
    [ -n "$client_pid" ] && kill -KILL "$client_pid" 2>/dev/null || true
    [ -n "$server_pid" ] && { kill -CONT "$server_pid"; kill -KILL "$server_pid"; } 2>/dev/null || true
    ip netns del "$client" 2>/dev/null || true
    ip netns del "$server" 2>/dev/null || true
}
trap cleanup EXIT
ip netns add "$client"
ip netns add "$server"
ip link add "wlan0-$id" type veth peer name "sw-$id"
ip link add "wwan0-$id" type veth peer name "sc-$id"
ip link set "wlan0-$id" netns "$client"
ip link set "wwan0-$id" netns "$client"
ip link set "sw-$id" netns "$server"
ip link set "sc-$id" netns "$server"
ip -n "$server" link set lo up
ip -n "$server" addr add 10.214.100.1/32 dev lo
ip -n "$server" addr add 10.214.1.1/24 dev "sw-$id"
ip -n "$server" addr add 10.214.2.1/24 dev "sc-$id"
ip -n "$server" link set "sw-$id" up
ip -n "$server" link set "sc-$id" up
ip -n "$client" link set lo up
ip -n "$client" addr add 10.214.1.2/24 dev "wlan0-$id"
ip -n "$client" addr add 10.214.2.2/24 dev "wwan0-$id"
ip -n "$client" link set "wlan0-$id" up
ip -n "$client" link set "wwan0-$id" up
ip -n "$client" route add default via 10.214.1.1 dev "wlan0-$id"

ip netns exec "$server" "$bin/transfer-server" --backend "$backend" --dir "$work/received" --host 10.214.100.1 --port 7008 >"$work/server.out" 2>&1 &
server_pid=$!
for _ in $(seq 100); do grep -q listening "$work/server.out" && break; sleep 0.05; done
ip netns exec "$client" timeout 60 "$bin/transfer-client" send "$work/switch.bin" --backend "$backend" ${5:---follow-network} \
    --host 10.214.100.1 --port 7008 >"$work/client.out" 2>"$work/client.err" &
client_pid=$!
# Once a fifth is acknowledged, hold the server still (so the transfer is surely
# unfinished), switch the client's network, and let the server go on.
for _ in $(seq 1000); do
    awk -v min="$4" '$1 == "progress:" && $2 >= min { found = 1 } END { exit !found }' "$work/client.out" && break
    sleep 0.01
done
kill -STOP "$server_pid"
ip -n "$client" route replace default via 10.214.2.1 dev "wwan0-$id"
ip -n "$client" link set "wlan0-$id" down
sleep 0.3
kill -CONT "$server_pid"
status=0
wait "$client_pid" || status=$?
client_pid=""
echo "client exit $status"
exit $status
"""#

    /// SIGINT mid-transfer (the server held still with SIGSTOP so that the transfer is
    /// surely unfinished): the client stops, keeps the resume state, says how to resume
    /// and exits 1. Then the file changes, and resuming it is refused.
    @Test("SIGINT stops transfer-client with the resume state kept; a changed file is then refused, not spliced", arguments: socketBackends)
    func interruptKeepsResumeState(backend: String) async throws {
        let work = try TemporaryFolder()
        let file = work.path + "/interrupted.bin"
        let size = 32 << 20
        try writeRandomFile(file, size: size)
        let state = work.path + "/interrupted.state"
        let (server, port) = try await startTransferServer(backend: backend, dir: work.path + "/received")
        defer {
            server.send(SIGCONT)
            server.killIfRunning()
        }
        let client = try Subprocess(
            try Products.path("transfer-client"),
            ["send", file, "--backend", backend, "--port", String(port), "--resume-state", state],
            name: "transfer-client(\(backend))")
        defer { client.killIfRunning() }
        _ = try await waitForProgress(of: client, atLeast: 1)
        server.send(SIGSTOP)
        let ending = await client.stop(with: SIGINT)
        server.send(SIGCONT)
        #expect(ending == .exit(1), "\(client.report)")
        #expect(client.stderr.contains("SIGINT") && client.stderr.contains("cancelled") && client.stderr.contains("the resume state is in \(state)"), "\(client.report)")
        #expect(TransferSummary(client.stdout) == nil, "\(client.report)")
        let saved = try String(contentsOfFile: state, encoding: .utf8)
        #expect(saved.contains("id interrupted.bin\n") && !saved.contains("acknowledged \(size)\n"), "the resume state: \(saved)")

        // The file changes: resuming would splice two versions, so the client refuses
        // (from its resume state), and so does the server (which knows the id), until it
        // goes under another id.
        let handle = try #require(FileHandle(forWritingAtPath: file))
        try handle.seekToEnd()
        try handle.write(contentsOf: Data("one more line\n".utf8))
        try handle.close()
        let changedFromState = try Subprocess(
            try Products.path("transfer-client"),
            ["send", file, "--backend", backend, "--port", String(port), "--resume-state", state], name: "transfer-client(\(backend)), changed file")
        #expect(await changedFromState.wait(timeout: .seconds(30)) == .exit(1), "\(changedFromState.report)")
        #expect(changedFromState.stderr.contains("source changed") && changedFromState.stderr.contains("another --id"), "\(changedFromState.report)")
        #expect(FileManager.default.fileExists(atPath: state), "\(changedFromState.report)")
        try FileManager.default.removeItem(atPath: state)
        let changed = try Subprocess(
            try Products.path("transfer-client"), ["send", file, "--backend", backend, "--port", String(port)], name: "transfer-client(\(backend)), changed file")
        #expect(await changed.wait(timeout: .seconds(30)) == .exit(1), "\(changed.report)")
        #expect(changed.stderr.contains("source changed") && changed.stderr.contains("refusing to splice"), "\(changed.report)")
        let renamed = try Subprocess(
            try Products.path("transfer-client"), ["send", file, "--backend", backend, "--port", String(port), "--id", "interrupted-2.bin"],
            name: "transfer-client(\(backend)), another id")
        #expect(await renamed.wait(timeout: .seconds(60)) == .exit(0), "\(renamed.report)")
        #expect(TransferSummary(renamed.stdout)?.sha256 == (try await transferDigest(file)), "\(renamed.report)")
        await expectCleanStop(server)
    }

    /// A server that is not there: the client keeps trying for --reconnect-timeout, then
    /// fails with exit 1 and says why.
    @Test("transfer-client gives up after --reconnect-timeout when no server answers", arguments: socketBackends)
    func givesUpWithoutServer(backend: String) async throws {
        let work = try TemporaryFolder()
        let file = work.path + "/lonely.bin"
        try writeRandomFile(file, size: 1 << 20)
        let started = ContinuousClock.now
        let client = try Subprocess(
            try Products.path("transfer-client"),
            ["send", file, "--backend", backend, "--port", String(try closedPort()), "--reconnect-timeout", "1"],
            name: "transfer-client(\(backend))")
        #expect(await client.wait(timeout: .seconds(30)) == .exit(1), "\(client.report)")
        #expect(ContinuousClock.now - started >= .seconds(1), "\(client.report)")
        #expect(client.stderr.contains("unavailable") && client.stderr.contains("resume impossible") && client.stderr.contains("refused"), "\(client.report)")
        #expect(TransferSummary(client.stdout) == nil, "\(client.report)")
    }

    /// FILE, FOLDER, GARBAGE and BADNAME stand for paths made by the test.
    static let badClientArguments: [([String], [String])] = [
        (["send", "MISSING"], ["cannot send", "MISSING", "No such file"]),
        (["send", "FOLDER"], ["cannot send", "FOLDER", "not a regular file"]),
        (["send"], ["file"]),
        (["receive", "FILE"], ["receive"]),
        (["send", "FILE", "--port", "70000"], ["--port", "70000"]),
        (["send", "FILE", "--port", "0"], ["--port"]),
        (["send", "FILE", "--host", "not a host"], ["--host"]),
        (["send", "FILE", "--backend", "nosuch"], ["nosuch", "bsd"]),
        (["send", "FILE", "--reconnect-timeout", "0"], ["--reconnect-timeout"]),
        (["send", "FILE", "--reconnect-timeout", "soon"], ["soon"]),
        (["send", "FILE", "--id", "../etc"], ["--id", "../etc"]),
        (["send", "BADNAME"], ["not a transfer id", "--id"]),
        (["send", "FILE", "--resume-state", "/nonexistent-folder/state"], ["--resume-state", "/nonexistent-folder"]),
        (["send", "FILE", "--resume-state", "GARBAGE"], ["--resume-state", "not a transfer resume state"]),
        (["send", "FILE", "--stall-timeout", "0"], ["--stall-timeout"]),
        (["send", "FILE", "--stall-timeout", "4000"], ["--stall-timeout", "4000"]),
        (["send", "FILE", "--frobnicate"], ["--frobnicate"]),
    ]

    @Test("transfer-client rejects bad arguments and files it cannot send", arguments: badClientArguments)
    func clientRejectsBadArguments(arguments: [String], mentions: [String]) async throws {
        let work = try TemporaryFolder()
        let names = try work.fixtures()
        let client = try Subprocess(try Products.path("transfer-client"), arguments.map { names[$0] ?? $0 })
        let ending = await client.wait(timeout: .seconds(30))
        #expect(ending == .exit(64), "\(arguments): ArgumentParser exits 64 on a usage error, got \(ending)\n\(client.report)")
        for word in mentions {
            #expect(client.stderr.contains(names[word] ?? word), "\(arguments): the message should mention '\(word)'\n\(client.report)")
        }
    }

    static let badServerArguments: [([String], [String])] = [
        ([], ["--dir"]),
        (["--dir", "FILE"], ["--dir", "FILE", "not a folder"]),
        (["--dir", "FOLDER", "--port", "70000"], ["--port", "70000"]),
        (["--dir", "FOLDER", "--port", "-1"], ["--port"]),
        (["--dir", "FOLDER", "--backend", "nosuch"], ["nosuch", "bsd"]),
        (["--dir", "FOLDER", "--host", "bad host!"], ["--host"]),
        (["--dir", "FOLDER", "--event-loops", "0"], ["--event-loops"]),
    ]

    @Test("transfer-server rejects bad arguments", arguments: badServerArguments)
    func serverRejectsBadArguments(arguments: [String], mentions: [String]) async throws {
        let work = try TemporaryFolder()
        let names = try work.fixtures()
        let server = try Subprocess(try Products.path("transfer-server"), arguments.map { names[$0] ?? $0 })
        defer { server.killIfRunning() }
        let ending = await server.wait(timeout: .seconds(30))
        #expect(ending == .exit(64), "\(arguments): ArgumentParser exits 64 on a usage error, got \(ending)\n\(server.report)")
        #expect(!server.stdout.contains("listening on"), "\(arguments)\n\(server.report)")
        for word in mentions {
            #expect(server.stderr.contains(names[word] ?? word), "\(arguments): the message should mention '\(word)'\n\(server.report)")
        }
    }
}

/// Starts `transfer-server` on a free port and returns it with the port it printed.
func startTransferServer(backend: String, dir: String) async throws -> (server: Subprocess, port: Int) {
    let server = try Subprocess(
        try Products.path("transfer-server"), ["--dir", dir, "--backend", backend, "--host", "127.0.0.1", "--port", "0"],
        name: "transfer-server(\(backend))", hardTimeout: .seconds(150))
    return (server, try await listeningPort(of: server, tool: "transfer-server", backend: backend))
}

/// The client's summary line: `sent N bytes, resent R bytes, resumes K, sha256 HEX`.
struct TransferSummary: Equatable {
    var sent: UInt64
    var resent: UInt64
    var resumes: Int
    var sha256: String

    init(sent: UInt64, resent: UInt64, resumes: Int, sha256: String) {
        (self.sent, self.resent, self.resumes, self.sha256) = (sent, resent, resumes, sha256)
    }

    /// The summary line of `output`, if there is one.
    init?(_ output: String) {
        guard let line = output.split(separator: "\n").last(where: { $0.hasPrefix("sent ") }) else { return nil }
        let words = line.split(separator: " ").map(String.init)
        guard words.count == 10, words[2] == "bytes,", words[3] == "resent", words[5] == "bytes,", words[6] == "resumes",
              words[7].hasSuffix(","), words[8] == "sha256", words[9].count == 64,
              let sent = UInt64(words[1]), let resent = UInt64(words[4]), let resumes = Int(words[7].dropLast())
        else { return nil }
        self.init(sent: sent, resent: resent, resumes: resumes, sha256: words[9])
    }
}

/// A plain progress line: `progress: A of T bytes (P%), ...`.
struct ProgressLine {
    var acknowledged: UInt64
    var total: UInt64

    init?(_ line: String) {
        let words = line.split(separator: " ")
        guard words.count > 4, words[0] == "progress:", words[2] == "of",
              let acknowledged = UInt64(words[1]), let total = UInt64(words[3]) else { return nil }
        (self.acknowledged, self.total) = (acknowledged, total)
    }
}

/// Waits until `client` prints a progress line with at least `bytes` acknowledged.
/// - Returns: the acknowledged bytes of that line.
func waitForProgress(of client: Subprocess, atLeast bytes: UInt64, timeout: Duration = .seconds(60)) async throws -> UInt64 {
    let until = ContinuousClock.now + timeout
    while true {
        let lines = client.stdout.split(separator: "\n", omittingEmptySubsequences: false).dropLast()
        if let line = lines.compactMap({ ProgressLine(String($0)) }).first(where: { $0.acknowledged >= bytes }) {
            return line.acknowledged
        }
        guard client.isRunning else { throw SubprocessFailure("\(client.name) ended before \(bytes) bytes were acknowledged\n\(client.report)") }
        guard ContinuousClock.now < until else { throw SubprocessFailure("\(client.name) did not get \(bytes) bytes acknowledged within \(timeout)\n\(client.report)") }
        try await Task.sleep(for: .milliseconds(2))
    }
}

/// `bytes` random bytes in a new file at `path`.
func writeRandomFile(_ path: String, size: Int) throws {
    let random = try #require(FileHandle(forReadingAtPath: "/dev/urandom"))
    defer { try? random.close() }
    let bytes = random.readData(ofLength: size)
    try #require(bytes.count == size)
    try bytes.write(to: URL(fileURLWithPath: path))
}

/// The transfer digest of the file at `path` in hex (the SHA-256 of the digests of its
/// 64 KiB leaves, as `TransferChunkDigest` defines it), computed apart from the library
/// by Python's hashlib and, for XXH3-128 leaves (`leafDigest` "xxh3-128", the default),
/// the system's libxxhash.
func transferDigest(_ path: String, leafDigest: String = "xxh3-128") async throws -> String {
    let script = """
        import ctypes, hashlib, sys
        class XXH128(ctypes.Structure):
            _fields_ = [("low64", ctypes.c_uint64), ("high64", ctypes.c_uint64)]
        xxhash = ctypes.CDLL("libxxhash.so.0")
        xxhash.XXH3_128bits.restype = XXH128
        xxhash.XXH3_128bits.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
        def leaf(block):
            if sys.argv[2] == "sha256":
                return hashlib.sha256(block).digest()
            h = xxhash.XXH3_128bits(block, len(block))
            return h.high64.to_bytes(8, "big") + h.low64.to_bytes(8, "big") + bytes(16)
        leaves = b""
        with open(sys.argv[1], "rb") as f:
            while block := f.read(65536):
                leaves += leaf(block)
        print(hashlib.sha256(leaves).hexdigest())
        """
    let result = try await run(.name("python3"), arguments: ["-c", script, path, leafDigest], output: .string(limit: 4096))
    guard result.terminationStatus.isSuccess, let digest = result.standardOutput.split(separator: "\n").first, digest.count == 64 else {
        throw SubprocessFailure("the transfer digest of \(path) failed: \(result.terminationStatus)")
    }
    return String(digest)
}

/// A fresh folder under the temporary directory, removed when the value goes away.
final class TemporaryFolder {
    let path: String

    init() throws {
        path = NSTemporaryDirectory() + "/switchyard-transfer-tools-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    deinit {
        try? FileManager.default.removeItem(atPath: path)
    }

    /// Paths for the argument tables: FILE (a small file), FOLDER, MISSING, GARBAGE (a
    /// file that is no resume state) and BADNAME (a file whose name is no transfer id).
    func fixtures() throws -> [String: String] {
        let names = [
            "FILE": path + "/small.bin", "FOLDER": path + "/folder", "MISSING": path + "/missing.bin",
            "GARBAGE": path + "/garbage.state", "BADNAME": path + "/a file with spaces.bin",
        ]
        try FileManager.default.createDirectory(atPath: names["FOLDER"]!, withIntermediateDirectories: true)
        try Data("some bytes\n".utf8).write(to: URL(fileURLWithPath: names["FILE"]!))
        try Data("not a state\n".utf8).write(to: URL(fileURLWithPath: names["GARBAGE"]!))
        try Data("some bytes\n".utf8).write(to: URL(fileURLWithPath: names["BADNAME"]!))
        return names
    }
}
