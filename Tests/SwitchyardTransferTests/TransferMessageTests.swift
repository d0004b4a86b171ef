import Switchyard
import SwitchyardTransfer
import Testing

@Suite("The transfer protocol's messages and resume state")
struct TransferMessageTests {
    @Test("Every message kind decodes to what was encoded, big-endian as documented")
    func roundTrip() throws {
        let sha = Array(0..<32).map(UInt8.init)
        let messages: [TransferMessage] = [
            .offer(version: 2, id: "file-1.bin", size: 0x0102_0304_0506_0708, window: 0x0A0B_0C0D),
            .resume(offset: 42, sha256: sha), .chunk(offset: 7, sha256: sha, bytes: [1, 2, 3]), .chunk(offset: 0, sha256: sha, bytes: []),
            .ack(offset: .max), .end(sha256: sha), .done(size: 9, sha256: sha),
        ]
        for message in messages {
            #expect(try TransferMessage(decoding: message.encoded) == message)
        }
        #expect(TransferMessage.resume(offset: 0x0102, sha256: sha).encoded == [2, 0, 0, 0, 0, 0, 0, 1, 2] + sha)
        let offer = TransferMessage.offer(version: 2, id: "a", size: 5, window: 0x0A0B_0C0D).encoded
        #expect(Array(offer[0..<2]) == [1, 2])
        #expect(Array(offer[2..<10]) == [0, 0, 0, 0, 0, 0, 0, 5])
        #expect(Array(offer[10..<16]) == [0x0A, 0x0B, 0x0C, 0x0D, 0, 1])
        #expect(offer.last == UInt8(ascii: "a"))
        // An offer of version 1 decodes to its version only, for the receiver to refuse.
        #expect(try TransferMessage(decoding: [1, 1] + [UInt8](repeating: 0, count: 46)) == .offer(version: 1, id: "", size: 0, window: 0))
    }

    @Test("A short message, an unknown kind or an id running past the end is a protocol violation")
    func malformed() {
        for bytes: [UInt8] in [[], [2, 0, 0], [9], [1, 2] + [UInt8](repeating: 0, count: 12) + [5, 0], [5, 1], [3] + [UInt8](repeating: 0, count: 39)] {
            #expect(throws: TransportError.self) { try TransferMessage(decoding: bytes) }
            do {
                _ = try TransferMessage(decoding: bytes)
            } catch {
                #expect(error.reason == .protocolViolation)
            }
        }
    }

    @Test("Resume state survives encoding, and garbage is refused")
    func resumeState() throws {
        let state = TransferResumeState(id: "x.bin", sourceIdentity: "file:/tmp/x.bin size 3", size: 3, sha256: TransferChunkDigest.root(of: [1, 2]), acknowledgedOffset: 2)
        #expect(try TransferResumeState(decoding: state.encoded) == state)
        #expect(throws: TransportError.self) { try TransferResumeState(decoding: Array("hello\n".utf8)) }
    }

    @Test("A chunk's digest is the SHA-256 of its 64 KiB leaves' SHA-256s; the transfer digest is the same over the whole file")
    func chunkDigest() throws {
        let bytes = testBytes(3 * TransferChunkDigest.leafSize + 100, seed: 9)
        let leaf = TransferChunkDigest.leafSize
        let leaves = (0..<4).flatMap { index in TransferDigest.sha256(Array(bytes[(index * leaf)..<min(bytes.count, (index + 1) * leaf)])) }
        #expect(TransferChunkDigest.root(of: bytes) == TransferDigest.sha256(leaves))
        #expect(TransferChunkDigest.root(of: bytes) != TransferDigest.sha256(bytes), "not the file's SHA-256")
        #expect(TransferChunkDigest.root(of: []) == TransferDigest.sha256([]))
        // A chunk of leaves 2 and 3, as the sender builds it: its digest covers those leaves.
        let message = TransferMessage.chunk(offset: UInt64(2 * leaf), bytes: bytes[(2 * leaf)...])
        let chunk = try #require(try TransferMessage.chunk(in: message))
        #expect(chunk.offset == UInt64(2 * leaf) && Array(chunk.bytes) == Array(bytes[(2 * leaf)...]))
        #expect(Array(chunk.sha256) == TransferDigest.sha256(Array(leaves[64...])))
    }

    @Test("Ids are letters, digits, '.', '_', '-', not starting with '.', at most 255 bytes")
    func ids() {
        #expect(TransferRecord.isValid(id: "photo-2026_11.jpg"))
        for bad in ["", ".hidden", "a/b", "../x", "ä", String(repeating: "a", count: 256)] {
            #expect(!TransferRecord.isValid(id: bad))
        }
    }
}
