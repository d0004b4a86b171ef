import Foundation
import Switchyard
import SwitchyardCalls
import SwitchyardBSD
import SwitchyardTransfer
import SwitchyardUV
import Synchronization
import Testing

/// Transfers over real sockets on loopback, on each socket backend (and mixed), with the
/// receiver's connection reset under the transfer and a folder as storage (fsync and all).
@Suite("Transfers over bsd and libuv on loopback", .serialized, .timeLimit(.minutes(2)))
struct TransferBackendTests {
    static func transport(_ name: String) throws -> any Transport {
        let configuration = TransportConfiguration(eventLoopCount: 2)
        return name == "bsd" ? try BSDTransport(configuration: configuration) : try UVTransport(configuration: configuration)
    }

    @Test("32 MiB with the call reset twice: SHA-256 matches, resumed twice, at most one window resent per break",
          arguments: [("bsd", "bsd"), ("libuv", "libuv"), ("libuv", "bsd")])
    func resets(client: String, server serverName: String) async throws {
        let clientTransport = try Self.transport(client)
        let serverTransport = try Self.transport(serverName)
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let storage = HookedStorage(try DirectoryTransferStorage(directory: directory))
        let server = try await TransferServer.start(transport: serverTransport, on: loopback, storage: storage)
        breakCalls(of: server, at: [8 << 20, 20 << 20], in: storage)

        let bytes = testBytes(32 << 20, seed: 7)
        let sourcePath = directory + "-source.bin"
        #expect(FileManager.default.createFile(atPath: sourcePath, contents: Data(bytes)))
        defer { try? FileManager.default.removeItem(atPath: sourcePath) }
        let options = TransferOptions(retryDelay: .milliseconds(10))
        let transfer = Transfer(channel: CallChannel(target: server.localAddress, transport: clientTransport), options: options)
        let reports = Task {
            var last: TransferProgress?
            for await report in transfer.progress { last = report }
            return last
        }
        let result = try await transfer.send(file: sourcePath)
        let sha = TransferChunkDigest.root(of: bytes)
        #expect(result.sha256 == sha)
        #expect(result.resumes == 2)
        #expect(result.bytesResent <= UInt64(result.resumes * options.window))
        #expect(result.bytesSent == UInt64(bytes.count) + result.bytesResent)
        let received = try #require(FileManager.default.contents(atPath: directory + "/" + result.id))
        #expect(TransferChunkDigest.root(of: Array(received)) == sha)
        let last = try #require(await reports.value)
        #expect(last.bytesAcknowledged == UInt64(bytes.count) && last.resumes == 2 && last.bytesResent == result.bytesResent)
        print("transfer \(client)->\(serverName): 32 MiB, resumes \(result.resumes), resent \(result.bytesResent) bytes, \(result.duration)")
        server.close()
        await clientTransport.shutdownNow()
        await serverTransport.shutdownNow()
    }

    @Test("The sender's network switches twice (wifi, cellular, wifi): its calls end (connectivity changed) and it resumes",
          arguments: ["bsd", "libuv"])
    func connectivitySwitch(backend: String) async throws {
        let transport = try Self.transport(backend)
        let storage = HookedStorage(MemoryTransferStorage())
        let server = try await TransferServer.start(transport: transport, on: loopback, storage: storage)
        let monitor = ManualConnectivityMonitor(initial: ConnectivityPath(category: .wifi, interface: "wlan0"))
        let switches = Mutex([(UInt64(6 << 20), ConnectivityCategory.cellular, "wwan0"), (UInt64(14 << 20), .wifi, "wlan0")])
        storage.onWrite { written in
            let next = switches.withLock { switches -> (UInt64, ConnectivityCategory, String)? in
                guard let first = switches.first, written >= first.0 else { return nil }
                return switches.removeFirst()
            }
            if let next { monitor.report(ConnectivityPath(category: next.1, interface: next.2)) }
        }
        let bytes = testBytes(24 << 20, seed: 8)
        let options = TransferOptions(retryDelay: .milliseconds(10))
        let channel = CallChannel(target: server.localAddress, transport: transport, monitor: monitor)
        let result = try await Transfer(channel: channel, options: options).send(source: MemoryTransferSource(bytes), id: "switch.bin")
        #expect(result.resumes == 2)
        #expect(result.sha256 == TransferChunkDigest.root(of: bytes))
        #expect(result.bytesResent <= UInt64(result.resumes * options.window))
        #expect((storage.inner as! MemoryTransferStorage).completedFile(id: "switch.bin") == bytes)
        server.close()
        await transport.shutdownNow()
    }

    @Test("A sender that ignores acknowledgements cannot make the receiver buffer more than a chunk and a read",
          arguments: ["bsd", "libuv"])
    func boundedReceiver(backend: String) async throws {
        let transport = try Self.transport(backend)
        try await floodReceiver(transport: transport, label: backend)
        await transport.shutdownNow()
    }

    @Test("With no receiver, the sender gives up after its tries: unavailable, resume impossible", arguments: ["bsd", "libuv"])
    func givesUp(backend: String) async throws {
        let transport = try Self.transport(backend)
        // A port that was just listening and is closed now: connects are refused at once.
        let listener = try await transport.listen(on: loopback)
        let target = listener.localAddress
        listener.close()
        let options = TransferOptions(maximumAttempts: 3, retryDelay: .milliseconds(5))
        let transfer = Transfer(channel: CallChannel(target: target, transport: transport), options: options)
        do {
            _ = try await transfer.send(source: MemoryTransferSource(testBytes(1000)), id: "nobody.bin")
            Issue.record("a transfer without a receiver succeeded")
        } catch let error as TransportError {
            #expect(error.code == .unavailable && error.reason == .resumeImpossible)
            #expect(error.message.contains("3 call(s)"))
            // The refused connects' native code (ECONNREFUSED) is said once, not in the
            // message and again after it.
            let native = try #require(error.native, "\(error)")
            #expect(String(describing: error).components(separatedBy: "\(native)").count == 2, "\(error)")
        }
        await transport.shutdownNow()
    }

    @Test("A reconnect timeout bounds the retrying, however many tries are left", arguments: ["bsd", "libuv"])
    func reconnectTimeout(backend: String) async throws {
        let transport = try Self.transport(backend)
        let listener = try await transport.listen(on: loopback)
        let target = listener.localAddress
        listener.close()
        let options = TransferOptions(maximumAttempts: 1_000, reconnectTimeout: .milliseconds(300), retryDelay: .milliseconds(20), maximumRetryDelay: .milliseconds(50))
        let transfer = Transfer(channel: CallChannel(target: target, transport: transport), options: options)
        let clock = ContinuousClock()
        let start = clock.now
        await #expect(throws: TransportError.self) { try await transfer.send(source: MemoryTransferSource(testBytes(1000)), id: "late.bin") }
        let waited = clock.now - start
        #expect(waited >= .milliseconds(300) && waited < .seconds(2))
        await transport.shutdownNow()
    }
}
