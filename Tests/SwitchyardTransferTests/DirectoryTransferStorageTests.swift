import Foundation
import Switchyard
import SwitchyardMemory
import SwitchyardTransfer
import Testing

@Suite("DirectoryTransferStorage", .serialized, .timeLimit(.minutes(1)))
struct DirectoryTransferStorageTests {
    @Test("A restarted receiver on the same folder resumes at its durable offset; unsynced bytes are forgotten")
    func restartedReceiver() async throws {
        let transport = try MemoryTransport(configuration: .init(eventLoopCount: 2))
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let bytes = testBytes(4 << 20, seed: 11)
        let options = TransferOptions(chunkSize: 64 << 10, window: 512 << 10)

        let firstStorage = HookedStorage(try DirectoryTransferStorage(directory: directory))
        let first = try await TransferServer.start(transport: transport, on: loopback, storage: firstStorage, options: TransferServerOptions(ackInterval: 256 << 10))
        let stopped = Transfer(channel: CallChannel(target: first.localAddress, transport: transport), options: options)
        firstStorage.onWrite { written in if written >= 1_700_000 { stopped.cancel() } }
        await #expect(throws: TransportError.self) { try await stopped.send(source: MemoryTransferSource(bytes), id: "restart.bin") }
        first.closeNow()
        // A restart: the old receiver's last sync is done before the folder is reopened.
        let deadline = ContinuousClock.now + .seconds(10)
        while first.activeTransfers > 0 && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(5)) }
        #expect(first.activeTransfers == 0)

        // The receiver restarts: a new storage object on the same folder.
        let storage = try DirectoryTransferStorage(directory: directory)
        let record = try #require(try storage.record(for: "restart.bin"))
        #expect(record.durableOffset > 0 && record.durableOffset < UInt64(bytes.count) && record.durableOffset % (256 << 10) == 0)
        let second = try await TransferServer.start(transport: transport, on: loopback, storage: storage)
        let result = try await Transfer(channel: CallChannel(target: second.localAddress, transport: transport), options: options)
            .send(source: MemoryTransferSource(bytes), id: "restart.bin")
        #expect(result.startOffset == record.durableOffset)
        #expect(result.bytesSent == UInt64(bytes.count) - record.durableOffset)
        #expect(FileManager.default.contents(atPath: storage.path(of: "restart.bin")) == Data(bytes))
        second.close()
        await transport.shutdownNow()
    }

    @Test("A partial file that lost its bytes starts over instead of filling the gap")
    func lostData() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let storage = try DirectoryTransferStorage(directory: directory)
        let bytes = testBytes(1000)
        try storage.create(TransferRecord(id: "lost.bin", size: 1000, sha256: TransferDigest.sha256(bytes)))
        try storage.write(bytes[0..<600], at: 0, id: "lost.bin")
        try storage.sync(id: "lost.bin", through: 600)
        try FileManager.default.removeItem(atPath: directory + "/.partial/lost.bin")
        let reopened = try DirectoryTransferStorage(directory: directory)
        #expect(try reopened.record(for: "lost.bin")?.durableOffset == 0)
    }
}
