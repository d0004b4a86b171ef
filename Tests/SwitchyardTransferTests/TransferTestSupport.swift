import Foundation
import Testing
import Switchyard
import SwitchyardCalls
import SwitchyardTransfer
import Synchronization

/// A storage that passes everything to another and runs a hook after each write with
/// the offset written up to (tests break calls from it, or look at the server).
final class HookedStorage: TransferStorage {
    let inner: any TransferStorage
    private let hook = Mutex<(@Sendable (UInt64) -> Void)?>(nil)

    init(_ inner: any TransferStorage) { self.inner = inner }

    func onWrite(_ body: @escaping @Sendable (UInt64) -> Void) { hook.withLock { $0 = body } }

    func record(for id: String) throws -> TransferRecord? { try inner.record(for: id) }
    func create(_ record: TransferRecord) throws { try inner.create(record) }
    func write(_ bytes: ArraySlice<UInt8>, at offset: UInt64, id: String) throws {
        try inner.write(bytes, at: offset, id: id)
        hook.withLock { $0 }?(offset + UInt64(bytes.count))
    }
    func sync(id: String, through offset: UInt64) throws { try inner.sync(id: id, through: offset) }
    func writeLeafDigests(_ digests: [UInt8], fromLeaf index: Int, id: String) throws { try inner.writeLeafDigests(digests, fromLeaf: index, id: id) }
    func leafDigests(id: String) throws -> [UInt8] { try inner.leafDigests(id: id) }
    func read(id: String, at offset: UInt64, count: Int) throws -> [UInt8] { try inner.read(id: id, at: offset, count: count) }
    func complete(id: String, sha256: [UInt8]) throws { try inner.complete(id: id, sha256: sha256) }
    func discard(id: String) throws { try inner.discard(id: id) }
}

/// A storage whose syncs take as long as a disk writing `bytesPerSecond` would (they
/// sleep for the bytes since the last sync), so a test's transfer lasts long enough for
/// faults driven by its progress to land mid-transfer however fast the machine is. The
/// receiver syncs off its event loop, so the sleep holds back acknowledgements, not the
/// loop.
final class PacedStorage: TransferStorage {
    let inner: any TransferStorage
    let bytesPerSecond: Double
    private let synced = Mutex<[String: UInt64]>([:])

    init(_ inner: any TransferStorage, bytesPerSecond: Double) {
        self.inner = inner
        self.bytesPerSecond = bytesPerSecond
    }

    func record(for id: String) throws -> TransferRecord? {
        let record = try inner.record(for: id)
        synced.withLock { $0[id] = record?.durableOffset ?? 0 }
        return record
    }
    func create(_ record: TransferRecord) throws { try inner.create(record) }
    func write(_ bytes: ArraySlice<UInt8>, at offset: UInt64, id: String) throws { try inner.write(bytes, at: offset, id: id) }
    func sync(id: String, through offset: UInt64) throws {
        let bytes = synced.withLock { synced -> UInt64 in
            let last = synced[id] ?? 0
            synced[id] = max(last, offset)
            return offset > last ? offset - last : 0
        }
        usleep(useconds_t(Double(bytes) / bytesPerSecond * 1_000_000))
        try inner.sync(id: id, through: offset)
    }
    func writeLeafDigests(_ digests: [UInt8], fromLeaf index: Int, id: String) throws { try inner.writeLeafDigests(digests, fromLeaf: index, id: id) }
    func leafDigests(id: String) throws -> [UInt8] { try inner.leafDigests(id: id) }
    func read(id: String, at offset: UInt64, count: Int) throws -> [UInt8] { try inner.read(id: id, at: offset, count: count) }
    func complete(id: String, sha256: [UInt8]) throws { try inner.complete(id: id, sha256: sha256) }
    func discard(id: String) throws { try inner.discard(id: id) }
}

/// Resets the server's open transfer calls once each time the bytes written cross one
/// of `offsets` (a real reset of the call's connection: the sender sees `unavailable`).
func breakCalls(of server: TransferServer, at offsets: [UInt64], in storage: HookedStorage) {
    let remaining = Mutex(offsets.sorted())
    storage.onWrite { written in
        let fire = remaining.withLock { remaining -> Bool in
            guard let first = remaining.first, written >= first else { return false }
            remaining.removeFirst()
            return true
        }
        if fire { server.resetOpenTransfers() }
    }
}

/// Deterministic pseudo-random bytes (xorshift, eight bytes a step: quick in debug builds).
func testBytes(_ count: Int, seed: UInt64 = 1) -> [UInt8] {
    var state = seed &* 0x9E37_79B9_7F4A_7C15 | 1
    return [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
        var index = 0
        while index < count {
            state ^= state << 13
            state ^= state >> 7
            state ^= state << 17
            var word = state
            for _ in 0..<min(8, count - index) {
                buffer[index] = UInt8(truncatingIfNeeded: word)
                word >>= 8
                index += 1
            }
        }
        initialized = count
    }
}

/// A fresh temporary folder.
func temporaryDirectory() throws -> String {
    let path = FileManager.default.temporaryDirectory.appendingPathComponent("switchyard-transfer-\(UUID().uuidString)").path
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    return path
}

let loopback = Endpoint(host: "127.0.0.1", port: 0)

/// What `tool` (`sha256sum`, `xxh128sum`: programs we did not write) prints for each
/// `leafSize`-byte leaf of `bytes`, in order: its hex digest.
func peerDigests(tool: String, of bytes: [UInt8], leafSize: Int) throws -> [String] {
    let folder = try temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: folder) }
    var paths: [String] = []
    for (index, start) in stride(from: 0, to: bytes.count, by: leafSize).enumerated() {
        let path = "\(folder)/leaf-\(index)"
        try Data(bytes[start..<min(bytes.count, start + leafSize)]).write(to: URL(fileURLWithPath: path))
        paths.append(path)
    }
    let status = system("\(tool) \(paths.joined(separator: " ")) > \(folder)/out")
    try #require(status == 0, "\(tool) failed (\(status)): is it installed? scripts/ensure-deps installs it")
    let lines = try String(contentsOfFile: "\(folder)/out", encoding: .utf8).split(separator: "\n")
    try #require(lines.count == paths.count, "\(tool) printed \(lines.count) lines for \(paths.count) leaves")
    return lines.map { String($0.split(separator: " ")[0]) }
}

/// Floods a receiver on `transport`: a raw sender offers 16 MiB, then sends every 256 KiB
/// chunk at once without reading an ack. Checks the receiver's peak ``TransferServer/
/// bufferedBytes`` (sampled at each write) stays within one chunk and one read (a second
/// chunk, the one being hashed and stored, is out of the call's buffer), and
/// the file arrives whole.
func floodReceiver(transport: any Transport, label: String) async throws {
    let storage = HookedStorage(MemoryTransferStorage())
    let chunk = 256 << 10
    let server = try await TransferServer.start(transport: transport, on: loopback, storage: storage, options: TransferServerOptions(ackInterval: 1 << 20, maximumChunkSize: chunk))
    let peak = Mutex(0)
    storage.onWrite { _ in
        let now = server.bufferedBytes
        peak.withLock { $0 = max($0, now) }
    }
    let bytes = testBytes(16 << 20, seed: 4)
    let channel = CallChannel(target: server.localAddress, transport: transport)
    try await channel.withCall(options: CallConfiguration(enableFlowControl: true)) { call in
        let offer = TransferMessage.offer(version: TransferMessage.version, id: "flood.bin", size: UInt64(bytes.count), window: UInt32.max, leafDigest: .xxh3)
        try await call.write(offer.encoded)
        _ = try await call.next()
        var offset = 0
        while offset < bytes.count {
            call.call.send(TransferMessage.chunk(offset: UInt64(offset), bytes: bytes[offset..<(offset + chunk)]))
            offset += chunk
        }
        try await call.write(TransferMessage.end(sha256: TransferChunkDigest.root(of: bytes)).encoded)
        while let message = try await call.next() {
            if case .done = try TransferMessage(decoding: message) { break }
        }
    }
    let held = peak.withLock { $0 }
    print("transfer receiver (\(label)): peak buffered \(held) bytes under a 16 MiB flood of \(chunk >> 10) KiB chunks")
    #expect(held > 0)
    #expect(held <= chunk + TransferMessage.chunkHeaderSize + 5 + 256 << 10)
    #expect((storage.inner as! MemoryTransferStorage).completedFile(id: "flood.bin") == bytes)
    server.close()
}
