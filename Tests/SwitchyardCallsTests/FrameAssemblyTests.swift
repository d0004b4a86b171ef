import Switchyard
@testable import SwitchyardCalls
import Testing

/// A frame whose payload spans several appends is assembled in one array (each payload
/// byte copied once), reserved as bytes arrive and never beyond the frame's length,
/// without changing what is decoded or which errors are raised when.
@Suite("Frames: payloads assembled across appends")
struct FrameAssemblyTests {
    static func pattern(_ count: Int, seed: Int) -> [UInt8] {
        (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ seed &+ $0 >> 8) }
    }

    @Test("A large frame fed in read-sized chunks arrives intact, in one array never reserved beyond its length",
          arguments: [70_000, 200_000, 1 << 20])
    func largeFrameInChunks(length: Int) throws {
        let message = Self.pattern(length, seed: length)
        let stream = Frame.encode(.message, payload: message) + Frame.encode(.status, payload: CallStatus.ok.encoded)
        var decoder = FrameDecoder(maximumMessageSize: 1 << 20)
        var got: [(kind: Frame.Kind, payload: [UInt8])] = []
        var offset = 0
        while offset < stream.count {
            let end = min(stream.count, offset + 65_536)
            stream[offset..<end].withUnsafeBytes { decoder.append($0) }
            offset = end
            #expect(decoder.bufferedBytes == offset - got.reduce(0) { $0 + Frame.headerSize + $1.payload.count })
            while let frame = try decoder.next() { got.append(frame) }
        }
        try decoder.finish()
        #expect(got.count == 2)
        #expect(got.first?.kind == .message)
        #expect(got.first?.payload == message)
        #expect(try CallStatus(decoding: got.last!.payload) == .ok)
        // Grown as the chunks came in, up to the frame's length and no further
        // (allocator rounding aside).
        let capacity = got.first?.payload.capacity ?? 0
        #expect(capacity >= length && capacity < length + 4096, "capacity \(capacity) for a \(length)-byte payload")
        #expect(decoder.bufferedBytes == 0)
    }

    /// Feeds `frame` in read-sized chunks and returns its payload.
    static func assemble(_ frame: [UInt8], in decoder: inout FrameDecoder) throws -> [UInt8] {
        var offset = 0
        var payload: [UInt8]?
        while offset < frame.count {
            let end = min(frame.count, offset + 65_536)
            frame[offset..<end].withUnsafeBytes { decoder.append($0) }
            offset = end
            if let next = try decoder.next() { payload = next.payload }
        }
        return try #require(payload)
    }

    @Test("The next large payload is assembled in the last one's array once it was let go, and never in one still held")
    func payloadArraysAreRecycled() throws {
        let first = Self.pattern(256 << 10, seed: 1)
        let second = Self.pattern(256 << 10, seed: 2)
        let third = Self.pattern(256 << 10, seed: 3)
        var decoder = FrameDecoder(maximumMessageSize: 1 << 20)

        var received = try Self.assemble(Frame.encode(.message, payload: first), in: &decoder)
        #expect(received == first)
        let firstAddress = received.withUnsafeBufferPointer { Int(bitPattern: $0.baseAddress) }
        received = []  // let go
        // Had the decoder let go of it too, the allocator would hand its block to this one.
        let blocker = [UInt8](repeating: 1, count: 256 << 10)
        let held = try Self.assemble(Frame.encode(.message, payload: second), in: &decoder)
        #expect(held == second)
        #expect(held.withUnsafeBufferPointer { Int(bitPattern: $0.baseAddress) } == firstAddress, "the let-go array was not reused")
        #expect(blocker.withUnsafeBufferPointer { Int(bitPattern: $0.baseAddress) } != firstAddress)

        // Still held: the next payload goes elsewhere and the held one is untouched.
        let next = try Self.assemble(Frame.encode(.message, payload: third), in: &decoder)
        #expect(next == third)
        #expect(held == second)
        #expect(next.withUnsafeBufferPointer { Int(bitPattern: $0.baseAddress) } != firstAddress)

        // A much smaller large payload does not keep the big array: it is reserved as usual.
        let small = Self.pattern(70_000, seed: 4)
        let smallReceived = try Self.assemble(Frame.encode(.message, payload: small), in: &decoder)
        #expect(smallReceived == small)
        #expect(smallReceived.capacity < 70_000 + 4096)
    }

    @Test("The call's path: the bytes a payload lacks are taken from a read, the rest stays with the caller")
    func appendPayloadTakesOnlyWhatIsMissing() throws {
        let message = Self.pattern(100_000, seed: 7)
        let next = Self.pattern(300, seed: 8)
        let stream = Frame.encode(.message, payload: message) + Frame.encode(.message, payload: next)
        var decoder = FrameDecoder()
        // Nothing to assemble yet: nothing taken.
        #expect(stream.withUnsafeBytes { decoder.appendPayload(UnsafeRawBufferPointer(rebasing: $0[..<10])) } == 0)
        stream[..<65_536].withUnsafeBytes { decoder.append($0) }
        #expect(decoder.pending == .none)
        #expect(decoder.nextKind == .message)
        let taken = stream[65_536...].withUnsafeBytes { decoder.appendPayload($0) }
        #expect(taken == Frame.headerSize + message.count - 65_536)
        #expect(decoder.pending == .message)
        // Whole: nothing more is taken.
        #expect(stream[(65_536 + taken)...].withUnsafeBytes { decoder.appendPayload($0) } == 0)
        let payload = decoder.takePayload()
        #expect(payload == message)
        #expect(decoder.isEmpty)
        let rest = Array(stream[(65_536 + taken)...])
        let restPending = rest.withUnsafeBytes { FrameDecoder.pending(in: $0, maximumMessageSize: decoder.maximumMessageSize) }
        #expect(restPending == .message)
    }

    @Test("Frames split at every point, and at every pair of points, decode the same")
    func everySplit() throws {
        let payloads = [Self.pattern(3000, seed: 1), [], Self.pattern(7, seed: 2), Self.pattern(1, seed: 3), Self.pattern(40, seed: 4)]
        let stream = payloads.flatMap { Frame.encode(.message, payload: $0) } + Frame.encode(.status, payload: CallStatus.ok.encoded)
        func decode(_ cuts: [Int]) throws {
            var decoder = FrameDecoder(maximumMessageSize: 3000)
            var got: [[UInt8]] = []
            var consumed = 0
            var start = 0
            for end in cuts + [stream.count] {
                stream[start..<end].withUnsafeBytes { decoder.append($0) }
                start = end
                #expect(decoder.bufferedBytes == end - consumed)
                while let frame = try decoder.next() {
                    got.append(frame.payload)
                    consumed += Frame.headerSize + frame.payload.count
                }
            }
            try decoder.finish()
            #expect(Array(got.dropLast()) == payloads, "cuts \(cuts)")
            #expect(decoder.bufferedBytes == 0)
        }
        for cut in 0...stream.count { try decode([cut]) }
        // Pairs of cuts around the large frame (its prefix, its payload and the next prefix).
        for first in stride(from: 0, through: 3010, by: 7) {
            for second in [first, first + 1, first + 4, first + 5, first + 6, 3004, 3005, 3006, 3010] where second >= first && second <= stream.count {
                try decode([first, second])
            }
        }
        // Byte by byte.
        try decode(Array(1..<stream.count))
    }

    @Test("A frame over the maximum still fails at its prefix, however its bytes arrive, and reserves nothing")
    func tooLargeAtThePrefix() {
        let maximum = 1000
        let header: [UInt8] = [0, 0, 0, 0x03, 0xe9]  // 1001 bytes
        let splits: [[[UInt8]]] = [
            [header + [1, 2, 3]],
            [Array(header[..<3]), Array(header[3...]) + [1, 2, 3]],
            [Array(header[..<5]), [1, 2, 3]],
            // After a payload assembled across appends, in the same chunk as its end.
            [[0, 0, 0, 0x03, 0xe8] + [UInt8](repeating: 1, count: 10), [UInt8](repeating: 1, count: 990) + header + [1, 2]],
        ]
        for chunks in splits {
            var decoder = FrameDecoder(maximumMessageSize: maximum)
            var error: TransportError?
            var frames = 0
            for chunk in chunks {
                decoder.append(chunk)
                do {
                    while try decoder.next() != nil { frames += 1 }
                } catch let thrown {
                    error = thrown
                    break
                }
            }
            #expect(error?.code == .resourceExhausted, "chunks \(chunks.map(\.count))")
            #expect(error?.reason == .frameTooLarge)
            #expect(frames == (chunks.count == 2 && chunks[0].count == 15 ? 1 : 0))
            #expect(decoder.bufferedBytes == 0)
            #expect(throws: TransportError.self) { try decoder.next() }
        }
        // An unknown flags byte with payload bytes after it is not assembled either.
        var decoder = FrameDecoder(maximumMessageSize: maximum)
        decoder.append([0x7f, 0, 0, 0, 10, 1, 2])
        #expect(decoder.pending == .invalid)
        #expect(throws: TransportError.self) { try decoder.next() }
    }

    /// The announced length alone buys nothing: what is reserved follows the bytes sent.
    @Test("A prefix announcing 4 MiB followed by one byte reserves one read's worth, not 4 MiB")
    func reservationFollowsTheBytes() throws {
        let length = 4 << 20
        var decoder = FrameDecoder(maximumMessageSize: length)
        decoder.append([0, UInt8(length >> 24), UInt8(length >> 16 & 0xff), UInt8(length >> 8 & 0xff), UInt8(length & 0xff), 7])
        #expect(decoder.bufferedBytes == 6)
        #expect(decoder.assemblyCapacity >= 1)
        #expect(decoder.assemblyCapacity <= 1 + FrameDecoder.assemblyReserveAhead + 4096, "reserved \(decoder.assemblyCapacity) bytes for 1 byte of a 4 MiB payload")
        // The rest arrives in 64 KiB reads: the array doubles, and ends at the length.
        let rest = [UInt8](repeating: 9, count: length - 1)
        var offset = 0
        var frame: (kind: Frame.Kind, payload: [UInt8])?
        while offset < rest.count {
            let end = min(rest.count, offset + 65_536)
            rest[offset..<end].withUnsafeBytes { decoder.append($0) }
            offset = end
            if offset < rest.count {
                #expect(decoder.assemblyCapacity <= 2 * (1 + offset) + FrameDecoder.assemblyReserveAhead + 4096)
            }
            if let next = try decoder.next() { frame = next }
        }
        #expect(frame?.payload.count == length)
        #expect(frame?.payload.first == 7)
        #expect(frame.map { $0.payload.capacity < length + 4096 } == true)
    }

    @Test("End of stream inside an assembled payload is a truncated frame")
    func truncatedWhileAssembling() throws {
        var decoder = FrameDecoder()
        decoder.append([0, 0, 0, 1, 0] + [UInt8](repeating: 5, count: 100))
        #expect(try decoder.next() == nil)
        #expect(decoder.bufferedBytes == 105)
        #expect(throws: TransportError.self) { try decoder.finish() }
    }
}
