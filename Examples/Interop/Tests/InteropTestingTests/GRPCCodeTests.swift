import InteropTesting
import Switchyard
import SwitchyardCalls
import Testing

@Suite("gRPC status codes on CallStatus")
struct GRPCCodeTests {
    @Test("A status keeps its exact gRPC code, also one without a TransportError code", arguments: 1...16)
    func exactCode(number: Int) throws {
        let code = try #require(GRPCCode(rawValue: number))
        let status = code.status(message: "why")
        #expect(GRPCCode(status) == code)
        #expect(status.error?.message == "why")
        #expect(status.error?.reason == .grpcStatus)
    }

    @Test("The four codes Switchyard lacks map to the nearest one")
    func nearestCodes() {
        let nearest: [(Int, TransportError.Code)] = [(6, .aborted), (11, .failedPrecondition), (15, .internal), (16, .permissionDenied)]
        for (number, code) in nearest {
            #expect(GRPCCode(rawValue: number)?.status(message: "").error?.code == code)
        }
    }

    @Test("A status without a gRPC native code reads as its code's number")
    func plainError() {
        let status = CallStatus(error: TransportError(code: .deadlineExceeded, reason: .timedOut, message: "late"))
        #expect(GRPCCode(status) == .deadlineExceeded)
        #expect(GRPCCode(.ok) == .ok)
        #expect(GRPCCode.ok.status(message: "dropped").isOK)
    }

    @Test("Numbers outside 0 to 16 are no code")
    func outOfRange() {
        #expect(GRPCCode(rawValue: -1) == nil)
        #expect(GRPCCode(rawValue: 17) == nil)
    }

    @Test("--flag=true becomes --flag, --flag=false goes, the rest stays")
    func flags() {
        let arguments = ["--use_tls=true", "--use_test_ca=false", "--test_case=large_unary", "--use_tls=maybe", "--port", "1"]
        #expect(
            GRPCFlags.normalize(arguments, flags: ["use_tls", "use_test_ca"])
                == ["--use_tls", "--test_case=large_unary", "--use_tls=maybe", "--port", "1"])
    }
}
