import Switchyard
import SwitchyardTransfer
import Testing

@Suite("The transfer protocol's messages and resume state")
struct TransferMessageTests {
    @Test("Every message kind decodes to what was encoded, big-endian as documented")
    func roundTrip() throws {
        let sha = Array(0..<32).map(UInt8.init)
        let messages: [TransferMessage] = [
            .offer(version: 3, id: "file-1.bin", size: 0x0102_0304_0506_0708, window: 0x0A0B_0C0D, leafDigest: .xxh3),
            .offer(version: 3, id: "f", size: 1, window: 2, leafDigest: .sha256),
            .resume(offset: 42, sha256: sha), .chunk(offset: 7, sha256: sha, bytes: [1, 2, 3]), .chunk(offset: 0, sha256: sha, bytes: []),
            .ack(offset: .max), .end(sha256: sha), .done(size: 9, sha256: sha),
        ]
        for message in messages {
            #expect(try TransferMessage(decoding: message.encoded) == message)
        }
        #expect(TransferMessage.resume(offset: 0x0102, sha256: sha).encoded == [2, 0, 0, 0, 0, 0, 0, 1, 2] + sha)
        let offer = TransferMessage.offer(version: 3, id: "a", size: 5, window: 0x0A0B_0C0D, leafDigest: .xxh3).encoded
        #expect(Array(offer[0..<3]) == [1, 3, 2])
        #expect(Array(offer[3..<11]) == [0, 0, 0, 0, 0, 0, 0, 5])
        #expect(Array(offer[11..<17]) == [0x0A, 0x0B, 0x0C, 0x0D, 0, 1])
        #expect(offer.last == UInt8(ascii: "a"))
        #expect(TransferMessage.offer(version: 3, id: "a", size: 5, window: 1, leafDigest: .sha256).encoded[2] == 1)
        // Offers of versions 1 and 2 decode to their version only, for the receiver to refuse.
        for version: UInt8 in [1, 2] {
            #expect(try TransferMessage(decoding: [1, version] + [UInt8](repeating: 0, count: 46)) == .offer(version: version, id: "", size: 0, window: 0, leafDigest: .sha256))
        }
    }

    @Test("An offer of a leaf digest this version does not know is unimplemented, not malformed")
    func unknownLeafDigest() {
        for leafDigest: UInt8 in [0, 3, 255] {
            do {
                _ = try TransferMessage(decoding: [1, 3, leafDigest] + [UInt8](repeating: 0, count: 12) + [0, 1, UInt8(ascii: "a")])
                Issue.record("leaf digest \(leafDigest) decoded")
            } catch {
                #expect(error.code == .unimplemented && error.reason == .protocolViolation, "\(error)")
            }
        }
    }

    @Test("A short message, an unknown kind or an id running past the end is a protocol violation")
    func malformed() {
        for bytes: [UInt8] in [[], [2, 0, 0], [9], [1, 3, 2] + [UInt8](repeating: 0, count: 12) + [5, 0], [1, 3, 2, 0], [5, 1], [3] + [UInt8](repeating: 0, count: 39)] {
            #expect(throws: TransportError.self) { try TransferMessage(decoding: bytes) }
            do {
                _ = try TransferMessage(decoding: bytes)
            } catch {
                #expect(error.reason == .protocolViolation)
            }
        }
    }

    @Test("Resume state survives encoding with its leaf digest, one of version 2 reads as SHA-256's, and garbage is refused")
    func resumeState() throws {
        for leafDigest in TransferLeafDigest.allCases {
            let state = TransferResumeState(
                id: "x.bin", sourceIdentity: "file:/tmp/x.bin size 3", size: 3, sha256: TransferChunkDigest.root(of: [1, 2], using: leafDigest),
                acknowledgedOffset: 2, leafDigest: leafDigest)
            #expect(try TransferResumeState(decoding: state.encoded) == state)
            #expect(String(decoding: state.encoded, as: UTF8.self).contains("\nleaf-digest \(leafDigest)\n"))
        }
        let digest = TransferChunkDigest.root(of: [1, 2], using: .sha256)
        let version2 = "switchyard-transfer-resume 2\nid x.bin\nsource s\nsize 3\nsha256 \(TransferDigest.hex(digest))\nacknowledged 2\n"
        #expect(try TransferResumeState(decoding: Array(version2.utf8)).leafDigest == .sha256)
        let unknown = "switchyard-transfer-resume 3\nid x.bin\nsource s\nsize 3\nleaf-digest md5\nsha256 \(TransferDigest.hex(digest))\nacknowledged 2\n"
        #expect(throws: TransportError.self) { try TransferResumeState(decoding: Array(unknown.utf8)) }
        #expect(throws: TransportError.self) { try TransferResumeState(decoding: Array("hello\n".utf8)) }
    }

    @Test("Leaf digests are what xxh128sum and sha256sum print for each 64 KiB leaf", arguments: TransferLeafDigest.allCases)
    func leafDigestsMatchPeers(_ leafDigest: TransferLeafDigest) throws {
        let leaf = TransferChunkDigest.leafSize
        let bytes = testBytes(2 * leaf + 1000, seed: 5)
        let ours = TransferChunkDigest.leafDigests(of: bytes[...], using: leafDigest)
        #expect(ours.count == 3 * TransferLeafDigest.byteCount)
        let peer = try peerDigests(tool: leafDigest == .sha256 ? "sha256sum" : "xxh128sum", of: bytes, leafSize: leaf)
        for index in 0..<3 {
            let digest = Array(ours[(index * 32)..<((index + 1) * 32)])
            switch leafDigest {
            case .sha256:
                #expect(TransferDigest.hex(digest) == peer[index], "leaf \(index)")
            case .xxh3:
                #expect(TransferDigest.hex(Array(digest[..<16])) == peer[index], "leaf \(index)")
                #expect(digest[16...].allSatisfy { $0 == 0 }, "XXH3-128's digest is padded with zeros")
            }
        }
        #expect(TransferChunkDigest.leafDigests(of: bytes[...], using: .xxh3) != TransferChunkDigest.leafDigests(of: bytes[...], using: .sha256))
    }

    @Test("A chunk's digest is the SHA-256 of its 64 KiB leaves' digests; the transfer digest is the same over the whole file")
    func chunkDigest() throws {
        let bytes = testBytes(3 * TransferChunkDigest.leafSize + 100, seed: 9)
        let leaf = TransferChunkDigest.leafSize
        let leaves = (0..<4).flatMap { index in TransferChunkDigest.leafDigests(of: bytes[(index * leaf)..<min(bytes.count, (index + 1) * leaf)]) }
        #expect(leaves == TransferChunkDigest.leafDigests(of: bytes[...]))
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
