import Switchyard
import SwitchyardCalls
import Testing

@Suite("gRPC status codes")
struct GRPCStatusCodeTests {
    @Test("Every gRPC code 0 to 16 maps to a status and back to itself", arguments: 0...16)
    func everyCode(raw: Int) throws {
        let code = try #require(GRPCStatusCode(rawValue: raw))
        let status = CallStatus(grpcCode: code, message: "m")
        #expect(status.grpcCode == code)
        #expect(status.isOK == (raw == 0))
        if let error = status.error {
            #expect(error.reason == .grpcStatus)
            #expect(error.message == "m")
            #expect(error.native == .init(domain: .grpc, code: Int32(raw), name: code.name))
        }
        // Through the trailers too.
        let (read, _) = GRPCResponse.readTrailers(try GRPCResponse.trailersFields(status: status))
        #expect(read.grpcCode == code)
    }

    @Test("The four codes TransportError lacks map to the nearest and keep their number")
    func missingCodes() {
        #expect(GRPCStatusCode.alreadyExists.transportCode == .aborted)
        #expect(GRPCStatusCode.outOfRange.transportCode == .failedPrecondition)
        #expect(GRPCStatusCode.dataLoss.transportCode == .internal)
        #expect(GRPCStatusCode.unauthenticated.transportCode == .permissionDenied)
        let status = CallStatus(grpcCode: .unauthenticated, message: "")
        #expect(status.error?.code == .permissionDenied)
        #expect(status.grpcCode == .unauthenticated)
    }

    @Test("A Switchyard error goes out with its code's gRPC number")
    func fromTransportError() {
        let codes: [(TransportError.Code, Int)] = [
            (.cancelled, 1), (.unknown, 2), (.invalidArgument, 3), (.deadlineExceeded, 4), (.notFound, 5),
            (.permissionDenied, 7), (.resourceExhausted, 8), (.failedPrecondition, 9), (.aborted, 10),
            (.unimplemented, 12), (.internal, 13), (.unavailable, 14),
        ]
        for (code, raw) in codes {
            let status = CallStatus(error: TransportError(code: code, reason: .stalled, message: ""))
            #expect(status.grpcCode.rawValue == raw)
        }
        #expect(CallStatus.ok.grpcCode == .ok)
        // A native error of another domain does not count.
        let errno = CallStatus(error: TransportError(code: .unavailable, reason: .reset, message: "", native: .init(domain: .errno, code: 16, name: "EBUSY")))
        #expect(errno.grpcCode == .unavailable)
    }

    @Test("grpc-status values parse as decimal 0 to 16, leading zeros read", arguments: ["0", "1", "9", "10", "16", "00", "014"])
    func parses(text: String) {
        #expect(GRPCStatusCode(parsing: Array(text.utf8))?.rawValue == Int(text))
    }

    @Test("Other grpc-status values do not", arguments: ["", "17", "99", "-1", "+1", " 1", "1 ", "100", "a", "1234567890"])
    func malformed(text: String) {
        #expect(GRPCStatusCode(parsing: Array(text.utf8)) == nil)
    }

    @Test(
        "A response without grpc-status takes its code from the HTTP status",
        arguments: [
            (400, GRPCStatusCode.internal), (401, .unauthenticated), (403, .permissionDenied), (404, .unimplemented),
            (429, .unavailable), (431, .internal), (502, .unavailable), (503, .unavailable), (504, .unavailable),
            (200, .unknown), (500, .unknown), (418, .unknown), (302, .unknown),
        ])
    func httpMapping(httpStatus: Int, expected: GRPCStatusCode) throws {
        #expect(GRPCStatusCode(httpStatus: httpStatus) == expected)
        let error = try #require(CallStatus(httpStatus: httpStatus).error)
        #expect(error.reason == .httpStatus)
        #expect(error.native == .init(domain: .grpc, code: Int32(expected.rawValue), name: expected.name))
        #expect(error.message.contains(String(httpStatus)))
        #expect(CallStatus(httpStatus: httpStatus).grpcCode == expected)
    }

    @Test(
        "RST_STREAM codes map by the spec's table",
        arguments: [
            (UInt32(0x0), GRPCStatusCode.internal, TransportError.Reason.reset), (0x1, .internal, .reset),
            (0x2, .internal, .reset), (0x3, .internal, .reset), (0x4, .internal, .reset), (0x5, .internal, .reset),
            (0x6, .internal, .reset), (0x7, .unavailable, .streamRefused), (0x8, .cancelled, .reset),
            (0x9, .internal, .reset), (0xa, .internal, .reset), (0xb, .resourceExhausted, .reset),
            (0xc, .permissionDenied, .reset), (0xd, .internal, .reset), (0x1234, .internal, .reset),
        ])
    func resetMapping(http2Code: UInt32, expected: GRPCStatusCode, reason: TransportError.Reason) throws {
        let status = CallStatus(resetWithHTTP2ErrorCode: http2Code)
        let error = try #require(status.error)
        #expect(status.grpcCode == expected)
        #expect(error.reason == reason)
        #expect(error.native?.domain == .http2)
        #expect(error.native?.code == Int32(bitPattern: http2Code))
    }

    @Test("RST_STREAM's names are RFC 9113's")
    func resetNames() {
        #expect(CallStatus(resetWithHTTP2ErrorCode: 0x7).error?.native?.name == "REFUSED_STREAM")
        #expect(CallStatus(resetWithHTTP2ErrorCode: 0xb).error?.native?.name == "ENHANCE_YOUR_CALM")
        #expect(CallStatus(resetWithHTTP2ErrorCode: 0xc).error?.native?.name == "INADEQUATE_SECURITY")
        #expect(CallStatus(resetWithHTTP2ErrorCode: 0x99).error?.native?.name == "0x99")
    }
}
