import Foundation
import Switchyard
import SwitchyardCalls
import SwitchyardMemory
import SwitchyardTransfer
import Synchronization
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

    @Test("A partial record of protocol version 2 reads as SHA-256's and resumes with SHA-256 leaves; an offer of another leaf digest starts it over", arguments: TransferLeafDigest.allCases)
    func leafDigestOfRecord(_ offered: TransferLeafDigest) async throws {
        let transport = try MemoryTransport(configuration: .init(eventLoopCount: 2))
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let leaf = TransferChunkDigest.leafSize
        let bytes = testBytes(8 * leaf + 10, seed: 13)
        // What a receiver of version 2 left: 4 durable leaves and their SHA-256s, and a
        // state line without a leaf digest.
        let old = try DirectoryTransferStorage(directory: directory)
        try old.create(TransferRecord(id: "old.bin", size: UInt64(bytes.count), leafDigest: .sha256))
        try old.write(bytes[0..<(4 * leaf)], at: 0, id: "old.bin")
        try old.writeLeafDigests(TransferChunkDigest.leafDigests(of: bytes[0..<(4 * leaf)], using: .sha256), fromLeaf: 0, id: "old.bin")
        try old.sync(id: "old.bin", through: UInt64(4 * leaf))
        try "v2 \(bytes.count) - \(4 * leaf) 0".write(toFile: directory + "/.partial/old.bin.state", atomically: true, encoding: .utf8)

        let storage = try DirectoryTransferStorage(directory: directory)
        let record = try #require(try storage.record(for: "old.bin"))
        #expect(record.leafDigest == .sha256 && record.durableOffset == UInt64(4 * leaf))
        let server = try await TransferServer.start(transport: transport, on: loopback, storage: storage)
        let result = try await Transfer(channel: CallChannel(target: server.localAddress, transport: transport), options: TransferOptions(leafDigest: offered))
            .send(source: MemoryTransferSource(bytes), id: "old.bin")
        #expect(result.startOffset == (offered == .sha256 ? UInt64(4 * leaf) : 0))
        #expect(result.sha256 == TransferChunkDigest.root(of: bytes, using: offered))
        #expect(FileManager.default.contents(atPath: storage.path(of: "old.bin")) == Data(bytes))
        let state = try String(contentsOfFile: directory + "/.partial/old.bin.state", encoding: .utf8)
        #expect(state.hasPrefix("v3 \(bytes.count) \(offered) \(TransferDigest.hex(result.sha256)) \(bytes.count) 1"), "\(state)")
        server.close()
        await transport.shutdownNow()
    }

    @Test("A partial file that lost its bytes starts over instead of filling the gap")
    func lostData() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let storage = try DirectoryTransferStorage(directory: directory)
        let bytes = testBytes(1000)
        try storage.create(TransferRecord(id: "lost.bin", size: 1000))
        try storage.write(bytes[0..<600], at: 0, id: "lost.bin")
        try storage.writeLeafDigests(TransferChunkDigest.leafDigests(of: bytes[0..<600]), fromLeaf: 0, id: "lost.bin")
        try storage.sync(id: "lost.bin", through: 600)
        #expect(try DirectoryTransferStorage(directory: directory).record(for: "lost.bin")?.durableOffset == 600)
        try FileManager.default.removeItem(atPath: directory + "/.partial/lost.bin")
        let reopened = try DirectoryTransferStorage(directory: directory)
        #expect(try reopened.record(for: "lost.bin")?.durableOffset == 0)
    }

    @Test("A receiver that crashed mid-chunk resumes at its last sync: the torn chunk's bytes and digests are dropped, the file arrives intact, a leaf read back")
    func crashMidChunk() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let leaf = TransferChunkDigest.leafSize
        let bytes = testBytes(10 * leaf + 123, seed: 12)
        // The crashed receiver: four leaves synced, then half of the next chunk written
        // (bytes, and no digest yet) when it died.
        let crashed = try DirectoryTransferStorage(directory: directory)
        try crashed.create(TransferRecord(id: "torn.bin", size: UInt64(bytes.count)))
        try crashed.write(bytes[0..<(4 * leaf)], at: 0, id: "torn.bin")
        try crashed.writeLeafDigests(TransferChunkDigest.leafDigests(of: bytes[0..<(4 * leaf)]), fromLeaf: 0, id: "torn.bin")
        try crashed.sync(id: "torn.bin", through: UInt64(4 * leaf))
        try crashed.write(bytes[(4 * leaf)..<(5 * leaf + leaf / 2)], at: UInt64(4 * leaf), id: "torn.bin")

        let transport = try MemoryTransport(configuration: .init(eventLoopCount: 2))
        let storage = CountingStorage(try DirectoryTransferStorage(directory: directory))
        let server = try await TransferServer.start(transport: transport, on: loopback, storage: storage)
        let options = TransferOptions(chunkSize: 2 * leaf, window: 8 * leaf)
        let result = try await Transfer(channel: CallChannel(target: server.localAddress, transport: transport), options: options)
            .send(source: MemoryTransferSource(bytes), id: "torn.bin")
        #expect(result.startOffset == UInt64(4 * leaf) && result.resumes == 1)
        #expect(result.sha256 == TransferChunkDigest.root(of: bytes))
        #expect(storage.bytesRead.withLock { $0 } == leaf, "only the last durable leaf is read back")
        #expect(FileManager.default.contents(atPath: directory + "/torn.bin") == Data(bytes))
        #expect(!FileManager.default.fileExists(atPath: directory + "/.partial/torn.bin.digests"))
        server.close()
        await transport.shutdownNow()
    }

    @Test("A durable leaf that changed on disk while the receiver was down is found on resume, and the transfer starts over")
    func changedOnDisk() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let leaf = TransferChunkDigest.leafSize
        let bytes = testBytes(6 * leaf, seed: 13)
        let before = try DirectoryTransferStorage(directory: directory)
        try before.create(TransferRecord(id: "rot.bin", size: UInt64(bytes.count)))
        try before.write(bytes[0..<(3 * leaf)], at: 0, id: "rot.bin")
        try before.writeLeafDigests(TransferChunkDigest.leafDigests(of: bytes[0..<(3 * leaf)]), fromLeaf: 0, id: "rot.bin")
        try before.sync(id: "rot.bin", through: UInt64(3 * leaf))
        // One byte of the last durable leaf rots.
        let handle = try #require(FileHandle(forUpdatingAtPath: directory + "/.partial/rot.bin"))
        try handle.seek(toOffset: UInt64(3 * leaf - 10))
        try handle.write(contentsOf: [bytes[3 * leaf - 10] ^ 0xFF])
        try handle.close()

        let transport = try MemoryTransport(configuration: .init(eventLoopCount: 2))
        let server = try await TransferServer.start(transport: transport, on: loopback, storage: try DirectoryTransferStorage(directory: directory))
        let result = try await Transfer(channel: CallChannel(target: server.localAddress, transport: transport), options: TransferOptions(chunkSize: leaf, window: 4 * leaf))
            .send(source: MemoryTransferSource(bytes), id: "rot.bin")
        #expect(result.startOffset == 0 && result.bytesSent == UInt64(bytes.count))
        #expect(FileManager.default.contents(atPath: directory + "/rot.bin") == Data(bytes))
        server.close()
        await transport.shutdownNow()
    }
}
