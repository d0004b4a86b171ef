import Foundation
import Switchyard
import SwitchyardCalls
import SwitchyardMemory
import SwitchyardTransfer
import Synchronization
import Testing

/// A relay between a sender and a ``TransferServer``: each call is passed on to the
/// server on a call of its own, and the payload of every chunk message for which
/// `corrupt` (given the chunk's number, from 1) says so has one bit flipped on the way (a
/// link that corrupts data under TCP's checksum). The receiver's statuses come back to
/// the sender as they are.
func startCorruptingRelay(transport: any Transport, to server: Endpoint, corrupt: @escaping @Sendable (Int) -> Bool) async throws -> CallServer {
    let chunks = ChunkCounter()
    let flow = CallConfiguration(enableFlowControl: true)
    return try await CallServer.start(transport: transport, on: loopback, options: flow) { down in
        let channel = CallChannel(target: server, transport: transport)
        defer { channel.close() }
        return try await channel.withCall(options: flow) { up in
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    while var message = try await down.next() {
                        if message.first == 3, message.count > TransferMessage.chunkHeaderSize {
                            let number = chunks.next()
                            if corrupt(number) { message[message.count - 1] ^= 0x01 }
                        }
                        try await up.write(message)
                    }
                }
                // The receiver's status goes to the sender before the task reading the
                // sender is cancelled (cancelling a read cancels its call).
                do {
                    while let message = try await up.next() { try await down.write(message) }
                    down.call.finish(.ok)
                } catch let error as TransportError {
                    down.call.finish(CallStatus(error: error))
                }
                group.cancelAll()
                return .ok
            }
        }
    }
}

/// Numbers the chunks a relay passes on, from 1.
final class ChunkCounter: Sendable {
    private let count = Mutex(0)
    func next() -> Int {
        count.withLock { count in
            count += 1
            return count
        }
    }
}

/// A storage that counts the bytes the receiver reads back.
final class CountingStorage: TransferStorage {
    let inner: any TransferStorage
    let bytesRead = Mutex(0)
    init(_ inner: any TransferStorage) { self.inner = inner }
    func record(for id: String) throws -> TransferRecord? { try inner.record(for: id) }
    func create(_ record: TransferRecord) throws { try inner.create(record) }
    func write(_ bytes: ArraySlice<UInt8>, at offset: UInt64, id: String) throws { try inner.write(bytes, at: offset, id: id) }
    func sync(id: String, through offset: UInt64) throws { try inner.sync(id: id, through: offset) }
    func writeLeafDigests(_ digests: [UInt8], fromLeaf index: Int, id: String) throws { try inner.writeLeafDigests(digests, fromLeaf: index, id: id) }
    func leafDigests(id: String) throws -> [UInt8] { try inner.leafDigests(id: id) }
    func read(id: String, at offset: UInt64, count: Int) throws -> [UInt8] {
        let bytes = try inner.read(id: id, at: offset, count: count)
        bytesRead.withLock { $0 += bytes.count }
        return bytes
    }
    func complete(id: String, sha256: [UInt8]) throws { try inner.complete(id: id, sha256: sha256) }
    func discard(id: String) throws { try inner.discard(id: id) }
}

/// Faults other than a reset, over the memory backend: a corrupted file, the sender
/// suspended, the sending task cancelled.
@Suite("Transfer faults over the memory backend", .serialized, .timeLimit(.minutes(1)))
struct TransferFaultTests {
    @Test("A chunk corrupted on the way is found by its digest, not stored, and sent again; the file arrives intact", arguments: TransferLeafDigest.allCases)
    func corruptedChunkResent(_ leafDigest: TransferLeafDigest) async throws {
        let transport = try MemoryTransport(configuration: .init(eventLoopCount: 2))
        let storage = MemoryTransferStorage()
        let server = try await TransferServer.start(transport: transport, on: loopback, storage: storage, options: TransferServerOptions(ackInterval: 128 << 10))
        let relay = try await startCorruptingRelay(transport: transport, to: server.localAddress) { $0 == 20 }
        let options = TransferOptions(chunkSize: 64 << 10, window: 512 << 10, retryDelay: .milliseconds(5), leafDigest: leafDigest)
        let transfer = Transfer(channel: CallChannel(target: relay.localAddress, transport: transport), options: options)
        let bytes = testBytes(4 << 20, seed: 21)
        let result = try await transfer.send(source: MemoryTransferSource(bytes), id: "corrupted.bin")
        #expect(result.resumes == 1, "the corrupted chunk ended the call; the sender resumed once")
        #expect(result.bytesResent > 0 && result.bytesResent <= UInt64(options.window), "the chunk was sent again, at most a window with it")
        #expect(result.leafDigest == leafDigest && result.sha256 == TransferChunkDigest.root(of: bytes, using: leafDigest))
        #expect(storage.completedFile(id: "corrupted.bin") == bytes)
        relay.close()
        server.close()
        await transport.shutdownNow()
    }

    @Test("Chunks corrupted on every call: the sender gives up aborted (integrity mismatch) after its attempts, nothing corrupt stored")
    func corruptedEveryTime() async throws {
        let transport = try MemoryTransport(configuration: .init(eventLoopCount: 2))
        let storage = MemoryTransferStorage()
        let server = try await TransferServer.start(transport: transport, on: loopback, storage: storage)
        let relay = try await startCorruptingRelay(transport: transport, to: server.localAddress) { _ in true }
        let options = TransferOptions(chunkSize: 64 << 10, window: 512 << 10, maximumAttempts: 3, retryDelay: .milliseconds(5))
        let transfer = Transfer(channel: CallChannel(target: relay.localAddress, transport: transport), options: options)
        do {
            _ = try await transfer.send(source: MemoryTransferSource(testBytes(1 << 20)), id: "bad.bin")
            Issue.record("a corrupted file was accepted")
        } catch let error as TransportError {
            #expect(error.code == .aborted && error.reason == .integrityMismatch, "\(error)")
        }
        #expect(try storage.record(for: "bad.bin")?.durableOffset == 0)
        relay.close()
        server.close()
        await transport.shutdownNow()
    }

    @Test("The receiver reads nothing back for a whole transfer, and at most one leaf per resume")
    func noReadBack() async throws {
        let transport = try MemoryTransport(configuration: .init(eventLoopCount: 2))
        let storage = CountingStorage(MemoryTransferStorage())
        let hooked = HookedStorage(storage)
        let server = try await TransferServer.start(transport: transport, on: loopback, storage: hooked, options: TransferServerOptions(ackInterval: 128 << 10))
        let options = TransferOptions(chunkSize: 64 << 10, window: 512 << 10, retryDelay: .milliseconds(5))
        let bytes = testBytes(8 << 20, seed: 22)
        let whole = try await Transfer(channel: CallChannel(target: server.localAddress, transport: transport), options: options)
            .send(source: MemoryTransferSource(bytes), id: "whole.bin")
        #expect(whole.sha256 == TransferChunkDigest.root(of: bytes))
        #expect(storage.bytesRead.withLock { $0 } == 0, "a whole transfer is checked from the digests it stored, not read back")

        breakCalls(of: server, at: [2 << 20, 5 << 20], in: hooked)
        let resumed = try await Transfer(channel: CallChannel(target: server.localAddress, transport: transport), options: options)
            .send(source: MemoryTransferSource(bytes), id: "resumed.bin")
        #expect(resumed.resumes == 2 && resumed.sha256 == TransferChunkDigest.root(of: bytes))
        let read = storage.bytesRead.withLock { $0 }
        #expect(read > 0 && read <= 2 * TransferChunkDigest.leafSize, "each resume re-reads only the last durable leaf (\(read) bytes read)")
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
        #expect(result.sha256 == TransferChunkDigest.root(of: bytes))
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
