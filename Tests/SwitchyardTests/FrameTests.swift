import Switchyard
import Testing

@Suite("Frames")
struct FrameTests {
    static func frames(_ payloads: [[UInt8]]) -> [UInt8] {
        payloads.flatMap { Frame.encode(.message, payload: $0) }
    }

    @Test("Frames survive any split of the byte stream", arguments: [1, 2, 3, 5, 7, 64, 1000])
    func anySplit(chunk: Int) throws {
        let payloads: [[UInt8]] = [[], [1], Array(repeating: 9, count: 300), (0..<5000).map { UInt8(truncatingIfNeeded: $0) }]
        let stream = Self.frames(payloads) + Frame.encode(.status, payload: CallStatus.ok.encoded)
        var decoder = FrameDecoder(maximumMessageSize: 10_000)
        var got: [[UInt8]] = []
        var kinds: [Frame.Kind] = []
        var offset = 0
        while offset < stream.count {
            let end = min(stream.count, offset + chunk)
            decoder.append(Array(stream[offset..<end]))
            offset = end
            while let frame = try decoder.next() {
                kinds.append(frame.kind)
                got.append(frame.payload)
            }
        }
        try decoder.finish()
        #expect(Array(got.dropLast()) == payloads)
        #expect(kinds == [.message, .message, .message, .message, .status])
        #expect(try CallStatus(decoding: got.last!) == .ok)
        #expect(decoder.bufferedBytes == 0)
    }

    @Test("A frame over the maximum fails as soon as its prefix arrives")
    func tooLarge() {
        var decoder = FrameDecoder(maximumMessageSize: 100)
        decoder.append([0, 0, 0, 0, 101])
        #expect(decoder.hasFrame)
        do {
            _ = try decoder.next()
            Issue.record("expected frame too large")
        } catch {
            #expect(error.code == .resourceExhausted)
            #expect(error.reason == .frameTooLarge)
        }
        // The decoder stays failed.
        #expect(throws: TransportError.self) { try decoder.next() }
    }

    @Test("An unknown flags byte is a protocol error")
    func unknownFlags() {
        var decoder = FrameDecoder()
        decoder.append([0x7f, 0, 0, 0, 1, 42])
        #expect(decoder.nextKind == nil)
        do {
            _ = try decoder.next()
            Issue.record("expected unknown frame flags")
        } catch {
            #expect(error.code == .internal)
            #expect(error.reason == .unknownFrameFlags)
        }
    }

    @Test("End of stream inside a frame is a truncated frame")
    func truncated() throws {
        var decoder = FrameDecoder()
        decoder.append([0, 0, 0, 0, 10, 1, 2, 3])
        #expect(try decoder.next() == nil)
        #expect(!decoder.hasFrame)
        do {
            try decoder.finish()
            Issue.record("expected truncated frame")
        } catch {
            #expect(error.code == .internal)
            #expect(error.reason == .truncatedFrame)
        }
        let clean = FrameDecoder()
        try clean.finish()
    }

    @Test("The decoder holds no more than one partial frame plus what was appended")
    func bounded() throws {
        var decoder = FrameDecoder(maximumMessageSize: 1 << 20)
        let message = Array(repeating: UInt8(7), count: 200_000)
        let stream = Self.frames(Array(repeating: message, count: 20))
        var offset = 0
        var peak = 0
        while offset < stream.count {
            let end = min(stream.count, offset + 65_536)
            decoder.append(Array(stream[offset..<end]))
            offset = end
            peak = max(peak, decoder.bufferedBytes)
            while let frame = try decoder.next() { #expect(frame.payload == message) }
        }
        #expect(peak <= message.count + Frame.headerSize + 65_536)
    }

    @Test("A status round-trips through its trailer payload")
    func status() throws {
        let statuses: [CallStatus] = [
            .ok,
            CallStatus(error: TransportError(code: .unavailable, reason: .reset, message: "gone")),
            CallStatus(error: TransportError(code: .internal, reason: .init("x"), message: "")),
        ]
        for status in statuses {
            #expect(try CallStatus(decoding: status.encoded) == status)
        }
        #expect(throws: TransportError.self) { try CallStatus(decoding: [99, 0]) }
        #expect(throws: TransportError.self) { try CallStatus(decoding: [14, 200, 1]) }
    }
}

@Suite("Flow controllers")
struct FlowControllerTests {
    @Test("Automatic delivers without asking and reports no writes")
    func automatic() {
        var flow = AutomaticFlowController()
        #expect(flow.mayDeliver)
        flow.didDeliver(bytes: 100)
        #expect(flow.mayDeliver)
        #expect(!flow.reportsWrites)
    }

    @Test("Manual delivers only what was asked for, and requests stack")
    func manual() {
        var flow = ManualFlowController()
        #expect(!flow.mayDeliver)
        #expect(flow.reportsWrites)
        flow.request(2)
        flow.request(1)
        var delivered = 0
        while flow.mayDeliver {
            flow.didDeliver(bytes: 10)
            delivered += 1
        }
        #expect(delivered == 3)
        flow.request(.max)
        flow.request(5)
        #expect(flow.demand == .max)
    }

    @Test("A byte window delivers until the window is full and reopens as bytes are consumed")
    func byteWindow() {
        var flow = ByteWindowFlowController(window: 100)
        #expect(flow.mayDeliver)
        flow.didDeliver(bytes: 60)
        #expect(flow.mayDeliver)
        flow.didDeliver(bytes: 60)
        #expect(!flow.mayDeliver)
        flow.request(50)
        #expect(flow.mayDeliver)
        #expect(flow.outstanding == 70)
    }

    @Test("Options choose the policy")
    func options() {
        #expect(!CallConfiguration().makeFlowController().reportsWrites)
        #expect(CallConfiguration(enableFlowControl: true).makeFlowController() is ManualFlowController)
        #expect(CallConfiguration(flowController: ByteWindowFlowController(window: 1)).makeFlowController() is ByteWindowFlowController)
    }
}

@Suite("Frames: fuzzer findings")
struct FrameFuzzFindingsTests {
    @Test("After an error the decoder reports a frame and buffers nothing more")
    func afterError() {
        // Found by scripts/fuzz: input 00 01 00 00 00 00 00 01 41.
        var decoder = FrameDecoder(maximumMessageSize: 0)
        decoder.append([0, 0, 0, 0, 1])
        #expect(throws: TransportError.self) { try decoder.next() }
        #expect(decoder.hasFrame)
        decoder.append([UInt8](repeating: 0x41, count: 1_000_000))
        #expect(decoder.bufferedBytes == 0)
    }

    @Test("A status reason that is not UTF-8 is a protocol violation, and long reasons are cut on a character")
    func reasonNotUTF8() {
        // Found by scripts/fuzz: status payload 02 56 ff x 86.
        #expect(throws: TransportError.self) { try CallStatus(decoding: [2, 86] + [UInt8](repeating: 0xff, count: 86)) }
        let long = CallStatus(error: TransportError(code: .internal, reason: .init(String(repeating: "é", count: 200)), message: "m"))
        let decoded = try? CallStatus(decoding: long.encoded)
        #expect(decoded?.error?.reason.name == String(repeating: "é", count: 127))
        #expect(decoded.map { try? CallStatus(decoding: $0.encoded) } == decoded)
    }
}
