import Foundation
import Switchyard
import SwitchyardCalls
import SwitchyardMemory
import SwitchyardTransfer
import Synchronization
import Testing

/// The protocol end to end over the in-memory backend (fast, no sockets).
@Suite("Transfers over the memory backend", .serialized, .timeLimit(.minutes(1)))
struct TransferMemoryTests {
    @Test("A source arrives whole: SHA-256 matches, nothing resent, progress reaches the size")
    func whole() async throws {
        let transport = try MemoryTransport(configuration: .init(eventLoopCount: 2))
        let storage = MemoryTransferStorage()
        let server = try await TransferServer.start(transport: transport, on: loopback, storage: storage)
        let bytes = testBytes(3 << 20 + 123)
        let transfer = Transfer(channel: CallChannel(target: server.localAddress, transport: transport), options: TransferOptions(chunkSize: 64 << 10, window: 512 << 10))
        let reports = Task {
            var all: [TransferProgress] = []
            for await report in transfer.progress { all.append(report) }
            return all
        }
        let result = try await transfer.send(source: MemoryTransferSource(bytes), id: "whole.bin")
        #expect(result.sha256 == TransferChunkDigest.root(of: bytes))
        #expect(result.bytesSent == UInt64(bytes.count))
        #expect(result.bytesResent == 0 && result.resumes == 0 && result.startOffset == 0)
        #expect(storage.completedFile(id: "whole.bin") == bytes)
        let progress = await reports.value
        #expect(progress.last?.bytesAcknowledged == UInt64(bytes.count))
        #expect(zip(progress, progress.dropFirst()).allSatisfy { $0.bytesAcknowledged <= $1.bytesAcknowledged })
        #expect(progress.count > 4)
        server.close()
        await transport.shutdownNow()
    }

    @Test("Calls reset twice mid-transfer: resumed twice, SHA-256 matches, at most one window resent per break")
    func resets() async throws {
        let transport = try MemoryTransport(configuration: .init(eventLoopCount: 2))
        let storage = HookedStorage(MemoryTransferStorage())
        let server = try await TransferServer.start(transport: transport, on: loopback, storage: storage, options: TransferServerOptions(ackInterval: 256 << 10))
        breakCalls(of: server, at: [2 << 20, 5 << 20], in: storage)
        let bytes = testBytes(8 << 20, seed: 2)
        let options = TransferOptions(chunkSize: 64 << 10, window: 1 << 20, retryDelay: .milliseconds(5))
        let transfer = Transfer(channel: CallChannel(target: server.localAddress, transport: transport), options: options)
        // Each resume state seen on the way (made after every ack, its digest kept as the
        // acknowledged leaves grow and started again when a resume cuts them) is the
        // digest of the leaves under its acknowledged offset.
        let states = Task {
            var seen: [TransferResumeState] = []
            for await _ in transfer.progress {
                if let state = transfer.resumeState { seen.append(state) }
            }
            return seen
        }
        let result = try await transfer.send(source: MemoryTransferSource(bytes), id: "resets.bin")
        let seen = await states.value
        #expect(seen.count > 8)
        for state in seen {
            let end = min(bytes.count, TransferChunkDigest.leafCount(size: state.acknowledgedOffset) * TransferChunkDigest.leafSize)
            let expected = TransferChunkDigest.digest(ofLeafDigests: TransferChunkDigest.leafDigests(of: bytes[..<end])[...])
            #expect(state.sha256 == expected, "the resume state at \(state.acknowledgedOffset)")
        }
        #expect(result.resumes == 2)
        #expect(result.sha256 == TransferChunkDigest.root(of: bytes))
        #expect(result.bytesResent <= UInt64(result.resumes * options.window))
        #expect(result.bytesSent == UInt64(bytes.count) + result.bytesResent)
        #expect((storage.inner as! MemoryTransferStorage).completedFile(id: "resets.bin") == bytes)
        server.close()
        await transport.shutdownNow()
    }

    @Test("A stopped send picks up in a new Transfer from its saved state, with the state's leaf digest; a changed source is refused, not spliced")
    func savedStateAndChangedSource() async throws {
        let transport = try MemoryTransport(configuration: .init(eventLoopCount: 2))
        let storage = HookedStorage(MemoryTransferStorage())
        let server = try await TransferServer.start(transport: transport, on: loopback, storage: storage, options: TransferServerOptions(ackInterval: 128 << 10))
        let channel = CallChannel(target: server.localAddress, transport: transport)
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let statePath = directory + "/resume"
        let options = TransferOptions(chunkSize: 32 << 10, window: 256 << 10, resumeStatePath: statePath)
        let bytes = testBytes(4 << 20, seed: 3)

        // The first sender stops (cancelled) after about 1.5 MiB. It hashes its leaves with
        // SHA-256; the senders after it are told XXH3-128 (the default).
        var sha256Options = options
        sha256Options.leafDigest = .sha256
        let first = Transfer(channel: channel, options: sha256Options)
        storage.onWrite { written in if written >= 1_500_000 { first.cancel() } }
        await #expect(throws: TransportError.self) { try await first.send(source: MemoryTransferSource(bytes), id: "saved.bin") }
        storage.onWrite { _ in }
        let saved = try #require(try TransferResumeState.load(from: statePath))
        #expect(saved.id == "saved.bin" && saved.acknowledgedOffset > 0 && saved.acknowledgedOffset < UInt64(bytes.count))
        #expect(saved.leafDigest == .sha256)

        // Another source under the same id, hashed as the receiver's bytes were: the
        // receiver refuses it.
        var changed = bytes
        changed[0] ^= 0xFF
        let other = Transfer(channel: channel, options: TransferOptions(chunkSize: 32 << 10, window: 256 << 10, leafDigest: .sha256))
        do {
            _ = try await other.send(source: MemoryTransferSource(changed), id: "saved.bin")
            Issue.record("a changed source was accepted")
        } catch let error as TransportError {
            #expect(error.code == .failedPrecondition && error.reason == .sourceChanged)
        }
        // The saved state with the changed source: refused before sending.
        let local = Transfer(channel: channel, options: options)
        await #expect(throws: TransportError.self) { try await local.send(source: MemoryTransferSource(changed), id: "saved.bin", resumeState: saved) }

        // A new Transfer with the saved state finishes without starting over: it hashes
        // with SHA-256 as the state says, so the receiver goes on from its bytes.
        let second = Transfer(channel: channel, options: options)
        let loaded = try #require(try TransferResumeState.load(from: statePath))
        let result = try await second.send(source: MemoryTransferSource(bytes), id: "saved.bin", resumeState: loaded)
        #expect(result.leafDigest == .sha256)
        #expect(result.startOffset >= saved.acknowledgedOffset)
        #expect(result.resumes == 1, "a send that picks up from the receiver's offset is a resume")
        #expect(result.bytesSent == UInt64(bytes.count) - result.startOffset)
        #expect(result.sha256 == TransferChunkDigest.root(of: bytes, using: .sha256))
        #expect((storage.inner as! MemoryTransferStorage).completedFile(id: "saved.bin") == bytes)
        #expect(try TransferResumeState.load(from: statePath) == nil, "the state file is removed after success")
        server.close()
        await transport.shutdownNow()
    }

    @Test("A sender that ignores acknowledgements cannot make the receiver buffer more than a chunk and a read")
    func boundedReceiver() async throws {
        let transport = try MemoryTransport(configuration: .init(eventLoopCount: 2))
        try await floodReceiver(transport: transport, label: "memory")
        await transport.shutdownNow()
    }

    @Test("A new call for an id ends the call that still holds it (a leftover of a broken connection)")
    func leftoverCall() async throws {
        let transport = try MemoryTransport(configuration: .init(eventLoopCount: 2))
        let storage = MemoryTransferStorage()
        let server = try await TransferServer.start(transport: transport, on: loopback, storage: storage)
        let channel = CallChannel(target: server.localAddress, transport: transport)
        let bytes = testBytes(1 << 20, seed: 6)
        // A sender that offered, got its answer and went silent: its call stays open.
        let leftover = try await channel.withCall(options: CallConfiguration(enableFlowControl: true)) { call in
            let offer = TransferMessage.offer(version: TransferMessage.version, id: "twice.bin", size: UInt64(bytes.count), window: 1 << 20, leafDigest: .xxh3)
            try await call.write(offer.encoded)
            let answer = try #require(try await call.next())
            let result = try await Transfer(channel: channel).send(source: MemoryTransferSource(bytes), id: "twice.bin")
            // The leftover call was ended by the receiver (its connection reset).
            await #expect(throws: TransportError.self) { _ = try await call.next() }
            return (try TransferMessage(decoding: answer), result)
        }
        #expect(leftover.0 == .resume(offset: 0, sha256: TransferDigest.sha256([])))
        #expect(leftover.1.sha256 == TransferChunkDigest.root(of: bytes))
        #expect(storage.completedFile(id: "twice.bin") == bytes)
        server.close()
        await transport.shutdownNow()
    }

    @Test("A bad id is invalidArgument and a second send on one Transfer failedPrecondition")
    func misuse() async throws {
        let transport = try MemoryTransport(configuration: .init(eventLoopCount: 2))
        let server = try await TransferServer.start(transport: transport, on: loopback, storage: MemoryTransferStorage())
        let channel = CallChannel(target: server.localAddress, transport: transport)
        func code(_ body: () async throws -> TransferResult) async -> TransportError.Code? {
            do {
                _ = try await body()
                return nil
            } catch {
                return (error as? TransportError)?.code
            }
        }
        #expect(await code { try await Transfer(channel: channel).send(source: MemoryTransferSource([1]), id: "../etc/passwd") } == .invalidArgument)
        let once = Transfer(channel: channel)
        _ = try await once.send(source: MemoryTransferSource([1, 2, 3]), id: "once.bin")
        #expect(await code { try await once.send(source: MemoryTransferSource([1, 2, 3]), id: "once.bin") } == .failedPrecondition)
        server.close()
        await transport.shutdownNow()
    }

    @Test("Into a folder: the file appears under its id, and offering it again sends nothing")
    func directory() async throws {
        let transport = try MemoryTransport(configuration: .init(eventLoopCount: 2))
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let server = try await TransferServer.start(transport: transport, on: loopback, directory: directory)
        let bytes = testBytes(2 << 20, seed: 5)
        let sourcePath = directory + "-source.bin"
        #expect(FileManager.default.createFile(atPath: sourcePath, contents: Data(bytes)))
        defer { try? FileManager.default.removeItem(atPath: sourcePath) }
        let channel = CallChannel(target: server.localAddress, transport: transport)
        let result = try await Transfer(channel: channel).send(file: sourcePath, id: "copy.bin")
        #expect(result.sha256 == TransferChunkDigest.root(of: bytes))
        #expect(FileManager.default.contents(atPath: directory + "/copy.bin") == Data(bytes))
        var finished = server.finished.makeAsyncIterator()
        let record = await finished.next()
        #expect(record?.id == "copy.bin" && record?.isComplete == true && record?.sha256 == result.sha256)
        let again = try await Transfer(channel: channel).send(file: sourcePath, id: "copy.bin")
        #expect(again.bytesSent == 0 && again.startOffset == UInt64(bytes.count))
        await #expect(throws: TransportError.self) { try await Transfer(channel: channel).send(file: directory + "/missing") }
        server.close()
        await transport.shutdownNow()
    }
}
