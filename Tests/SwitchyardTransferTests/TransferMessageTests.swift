import Switchyard
import SwitchyardTransfer
import Testing

@Suite("The transfer protocol's messages and resume state")
struct TransferMessageTests {
    @Test("Every message kind decodes to what was encoded, big-endian as documented")
    func roundTrip() throws {
        let sha = Array(0..<32).map(UInt8.init)
        let messages: [TransferMessage] = [
            .offer(version: 1, id: "file-1.bin", size: 0x0102_0304_0506_0708, sha256: sha, window: 0x0A0B_0C0D),
            .resume(offset: 42), .chunk(offset: 7, bytes: [1, 2, 3]), .chunk(offset: 0, bytes: []),
            .ack(offset: .max), .end, .done(size: 9, sha256: sha),
        ]
        for message in messages {
            #expect(try TransferMessage(decoding: message.encoded) == message)
        }
        #expect(TransferMessage.resume(offset: 0x0102).encoded == [2, 0, 0, 0, 0, 0, 0, 1, 2])
        let offer = TransferMessage.offer(version: 1, id: "a", size: 5, sha256: sha, window: 0x0A0B_0C0D).encoded
        #expect(Array(offer[0..<2]) == [1, 1])
        #expect(Array(offer[2..<10]) == [0, 0, 0, 0, 0, 0, 0, 5])
        #expect(Array(offer[42..<48]) == [0x0A, 0x0B, 0x0C, 0x0D, 0, 1])
        #expect(offer.last == UInt8(ascii: "a"))
    }

    @Test("A short message, an unknown kind or an id running past the end is a protocol violation")
    func malformed() {
        for bytes: [UInt8] in [[], [2, 0, 0], [9], [1] + [UInt8](repeating: 0, count: 46) + [5, 0]] {
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
        let state = TransferResumeState(id: "x.bin", sourceIdentity: "file:/tmp/x.bin size 3", size: 3, sha256: TransferDigest.sha256([1, 2, 3]), acknowledgedOffset: 2)
        #expect(try TransferResumeState(decoding: state.encoded) == state)
        #expect(throws: TransportError.self) { try TransferResumeState(decoding: Array("hello\n".utf8)) }
    }

    @Test("Ids are letters, digits, '.', '_', '-', not starting with '.', at most 255 bytes")
    func ids() {
        #expect(TransferRecord.isValid(id: "photo-2026_11.jpg"))
        for bad in ["", ".hidden", "a/b", "../x", "ä", String(repeating: "a", count: 256)] {
            #expect(!TransferRecord.isValid(id: bad))
        }
    }
}
