import Switchyard
import SwitchyardCalls
import SwitchyardTestSupport
import Testing

@Suite("gRPC length-prefixed messages")
struct GRPCMessageDeframerTests {
    static let messages: [[UInt8]] = [[], [1], Array(repeating: 7, count: 300), (0..<70_000).map { UInt8(truncatingIfNeeded: $0 * 31) }]

    @Test("The framer writes the flag, the big-endian length and the message")
    func framer() {
        #expect(GRPCMessageFramer.frame([0xAA, 0xBB]) == [0, 0, 0, 0, 2, 0xAA, 0xBB])
        #expect(GRPCMessageFramer.frame([]) == [0, 0, 0, 0, 0])
        #expect(GRPCMessageFramer.frame(Array(repeating: 1, count: 0x01_02_03)).prefix(5) == [0, 0, 1, 2, 3])
        let prefix = GRPCMessageFramer.withPrefix(count: 0x0A0B_0C0D, compressed: true) { Array($0) }
        #expect(prefix == [1, 0x0A, 0x0B, 0x0C, 0x0D])
    }

    @Test("Messages come out whole whatever the DATA payloads' split", arguments: [1, 2, 3, 5, 7, 4096, 100_000])
    func anySplit(chunk: Int) throws {
        let stream = Self.messages.flatMap { GRPCMessageFramer.frame($0) }
        var deframer = GRPCMessageDeframer(maximumMessageSize: 100_000)
        var got: [[UInt8]] = []
        var offset = 0
        while offset < stream.count {
            let end = min(stream.count, offset + chunk)
            deframer.append(Array(stream[offset..<end]))
            offset = end
            while let message = try deframer.next() { got.append(message) }
        }
        try deframer.finish()
        #expect(got == Self.messages)
        #expect(deframer.bufferedBytes == 0)
    }

    @Test("Compressed messages come out decompressed, mixed with plain ones, whatever the split", arguments: [1, 13, 65_536])
    func compressedSplit(chunk: Int) throws {
        let compressor = GRPCGzipCompressor()
        let stream = Self.messages.enumerated().flatMap { index, message in
            index.isMultiple(of: 2) ? GRPCMessageFramer.frame(message, compressingWith: compressor) : GRPCMessageFramer.frame(message)
        }
        #expect(stream.count < Self.messages.map { $0.count + 5 }.reduce(0, +))
        var deframer = GRPCMessageDeframer(maximumMessageSize: 100_000, decompressor: GRPCGzipDecompressor())
        var got: [[UInt8]] = []
        var offset = 0
        while offset < stream.count {
            let end = min(stream.count, offset + chunk)
            deframer.append(Array(stream[offset..<end]))
            offset = end
            while let message = try deframer.next() { got.append(message) }
        }
        try deframer.finish()
        #expect(got == Self.messages)
    }

    @Test("A message over the maximum fails RESOURCE_EXHAUSTED as soon as its prefix is read")
    func tooLarge() throws {
        var deframer = GRPCMessageDeframer(maximumMessageSize: 100)
        deframer.append(GRPCMessageFramer.frame(Array(repeating: 0, count: 100)))
        #expect(try deframer.next()?.count == 100)
        deframer.append([0, 0, 0, 0, 101])
        expectTransportError(.resourceExhausted, .frameTooLarge, mentioning: ["101", "100"]) { () throws(TransportError) in
            _ = try deframer.next()
        }
        // It stays failed.
        deframer.append(GRPCMessageFramer.frame([1]))
        #expect(throws: TransportError.self) { try deframer.next() }
        #expect(throws: TransportError.self) { try deframer.finish() }
        // A 4 GiB announcement, with nothing after it, fails the same way.
        var huge = GRPCMessageDeframer(maximumMessageSize: 4 * 1024 * 1024)
        huge.append([0, 0xFF, 0xFF, 0xFF, 0xFF])
        #expect(throws: TransportError.self) { try huge.next() }
    }

    @Test("The compressed flag without a negotiated encoding fails INTERNAL")
    func compressedWithoutEncoding() {
        var deframer = GRPCMessageDeframer(maximumMessageSize: 100)
        deframer.append([1, 0, 0, 0, 1, 0])
        expectTransportError(.internal, .protocolViolation, mentioning: ["compressed flag", "identity"]) { () throws(TransportError) in
            _ = try deframer.next()
        }
    }

    @Test("A flag other than 0 or 1 fails INTERNAL", arguments: [UInt8(2), 0x80, 0xFF])
    func badFlag(flag: UInt8) {
        var deframer = GRPCMessageDeframer(maximumMessageSize: 100, decompressor: GRPCGzipDecompressor())
        deframer.append([flag, 0, 0, 0, 0])
        expectTransportError(.internal, .protocolViolation, mentioning: ["flag"]) { () throws(TransportError) in
            _ = try deframer.next()
        }
    }

    @Test("A stream that ends inside a message fails INTERNAL", arguments: [[UInt8]([0]), [0, 0, 0, 0, 2], [0, 0, 0, 0, 2, 1]])
    func truncated(bytes: [UInt8]) throws {
        var deframer = GRPCMessageDeframer(maximumMessageSize: 100)
        deframer.append(bytes)
        #expect(try deframer.next() == nil)
        expectTransportError(.internal, .truncatedFrame, mentioning: ["inside a message"]) { () throws(TransportError) in
            try deframer.finish()
        }
    }

    @Test("A compressed message that is not gzip fails INTERNAL")
    func corrupt() {
        var deframer = GRPCMessageDeframer(maximumMessageSize: 100, decompressor: GRPCGzipDecompressor())
        deframer.append([1, 0, 0, 0, 3, 1, 2, 3])
        expectTransportError(.internal, .protocolViolation, mentioning: ["decompress"]) { () throws(TransportError) in
            _ = try deframer.next()
        }
    }
}
