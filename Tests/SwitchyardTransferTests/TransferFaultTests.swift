import Foundation
import Switchyard
import SwitchyardMemory
import SwitchyardTransfer
import Synchronization
import Testing

/// A storage that flips one byte on its way to the inner storage (a disk that lies).
final class CorruptingStorage: TransferStorage {
    let inner = MemoryTransferStorage()
    let at: UInt64
    init(at: UInt64) { self.at = at }
    func record(for id: String) throws -> TransferRecord? { try inner.record(for: id) }
    func create(_ record: TransferRecord) throws { try inner.create(record) }
    func write(_ bytes: ArraySlice<UInt8>, at offset: UInt64, id: String) throws {
        var bytes = Array(bytes)
        if at >= offset, at < offset + UInt64(bytes.count) { bytes[Int(at - offset)] ^= 0x01 }
        try inner.write(bytes[...], at: offset, id: id)
    }
    func sync(id: String, through offset: UInt64) throws { try inner.sync(id: id, through: offset) }
    func digest(id: String) throws -> [UInt8] { try inner.digest(id: id) }
    func complete(id: String) throws { try inner.complete(id: id) }
    func discard(id: String) throws { try inner.discard(id: id) }
}

/// Faults other than a reset, over the memory backend: a corrupted file, the sender
/// suspended, the sending task cancelled.
@Suite("Transfer faults over the memory backend", .serialized, .timeLimit(.minutes(1)))
struct TransferFaultTests {
    @Test("A file whose SHA-256 does not match fails aborted (integrity mismatch) and is discarded")
    func integrity() async throws {
        let transport = try MemoryTransport(configuration: .init(eventLoopCount: 2))
        let storage = CorruptingStorage(at: 1_000_000)
        let server = try await TransferServer.start(transport: transport, on: loopback, storage: storage)
        let transfer = Transfer(channel: CallChannel(target: server.localAddress, transport: transport))
        do {
            _ = try await transfer.send(source: MemoryTransferSource(testBytes(2 << 20)), id: "bad.bin")
            Issue.record("a corrupted file was accepted")
        } catch let error as TransportError {
            #expect(error.code == .aborted && error.reason == .integrityMismatch)
        }
        #expect(try storage.record(for: "bad.bin") == nil)
        server.close()
        await transport.shutdownNow()
    }

    @Test("The sender's lifecycle suspended mid-transfer: its calls fail (suspended) until resume, then it resumes and finishes")
    func suspended() async throws {
        let transport = try MemoryTransport(configuration: .init(eventLoopCount: 2))
        let storage = HookedStorage(MemoryTransferStorage())
        let server = try await TransferServer.start(transport: transport, on: loopback, storage: storage, options: TransferServerOptions(ackInterval: 128 << 10))
        let lifecycle = Lifecycle(gracePeriod: .milliseconds(10))
        let channel = CallChannel(target: server.localAddress, transport: transport)
        let registration = lifecycle.register(channel)
        let fired = Mutex(false)
        storage.onWrite { written in
            guard written >= 2 << 20, fired.withLock({ state in defer { state = true }; return !state }) else { return }
            Task {
                await lifecycle.suspend()
                try await Task.sleep(for: .milliseconds(300))
                try await lifecycle.resume()
            }
        }
        let bytes = testBytes(6 << 20, seed: 9)
        let options = TransferOptions(chunkSize: 64 << 10, window: 512 << 10, retryDelay: .milliseconds(20), maximumRetryDelay: .milliseconds(100))
        let transfer = Transfer(channel: channel, options: options)
        let result = try await transfer.send(source: MemoryTransferSource(bytes), id: "suspended.bin")
        #expect(result.resumes == 1)
        #expect(result.sha256 == TransferDigest.sha256(bytes))
        #expect(result.bytesResent <= UInt64(options.window))
        #expect((storage.inner as! MemoryTransferStorage).completedFile(id: "suspended.bin") == bytes)
        registration.cancel()
        server.close()
        await transport.shutdownNow()
    }

    @Test("A file that changes between two calls of a send is refused by the sender, not spliced")
    func fileChangedBetweenCalls() async throws {
        let transport = try MemoryTransport(configuration: .init(eventLoopCount: 2))
        let storage = HookedStorage(MemoryTransferStorage())
        let server = try await TransferServer.start(transport: transport, on: loopback, storage: storage)
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/changing.bin"
        #expect(FileManager.default.createFile(atPath: path, contents: Data(testBytes(4 << 20, seed: 12))))
        let fired = Mutex(false)
        storage.onWrite { written in
            guard written >= 1 << 20, fired.withLock({ state in defer { state = true }; return !state }) else { return }
            // The file changes, then the call breaks.
            let handle = FileHandle(forWritingAtPath: path)!
            handle.seekToEndOfFile()
            handle.write(Data([1, 2, 3]))
            handle.closeFile()
            server.resetOpenTransfers()
        }
        let transfer = Transfer(channel: CallChannel(target: server.localAddress, transport: transport), options: TransferOptions(retryDelay: .milliseconds(5)))
        do {
            _ = try await transfer.send(file: path)
            Issue.record("a file that changed mid-send was accepted")
        } catch let error as TransportError {
            #expect(error.code == .failedPrecondition && error.reason == .sourceChanged)
        }
        #expect(try storage.record(for: "changing.bin")?.isComplete == false)
        server.close()
        await transport.shutdownNow()
    }

    @Test("Cancelling the sending task ends the send with cancelled; the receiver keeps what it acknowledged")
    func taskCancelled() async throws {
        let transport = try MemoryTransport(configuration: .init(eventLoopCount: 2))
        let storage = HookedStorage(MemoryTransferStorage())
        let server = try await TransferServer.start(transport: transport, on: loopback, storage: storage, options: TransferServerOptions(ackInterval: 64 << 10))
        let transfer = Transfer(channel: CallChannel(target: server.localAddress, transport: transport), options: TransferOptions(chunkSize: 32 << 10, window: 256 << 10))
        let started = AsyncStream<Void>.makeStream()
        storage.onWrite { written in if written >= 1 << 20 { started.continuation.yield() } }
        let send = Task { try await transfer.send(source: MemoryTransferSource(testBytes(8 << 20)), id: "cancel.bin") }
        for await _ in started.stream { break }
        send.cancel()
        do {
            _ = try await send.value
            Issue.record("a cancelled send succeeded")
        } catch let error as TransportError {
            #expect(error.code == .cancelled)
        }
        let record = try #require(try storage.record(for: "cancel.bin"))
        #expect(record.durableOffset >= 1 << 19 && !record.isComplete)
        #expect(transfer.resumeState?.acknowledgedOffset ?? 0 <= record.durableOffset)
        server.close()
        await transport.shutdownNow()
    }
}
