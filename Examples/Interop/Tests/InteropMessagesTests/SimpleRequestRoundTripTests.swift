import Foundation
import InteropMessages
import SwiftProtobuf
import Testing

@Suite("The generated interop messages")
struct SimpleRequestRoundTripTests {
    /// The large_unary request of gRPC's interop descriptions: 271828 zero bytes out,
    /// 314159 asked back.
    private static func largeUnaryRequest() -> Grpc_Testing_SimpleRequest {
        var request = Grpc_Testing_SimpleRequest()
        request.responseSize = 314_159
        request.payload.body = Data(count: 271_828)
        return request
    }

    @Test("A large_unary SimpleRequest survives serializedBytes and back")
    func largeUnaryRoundTrip() throws {
        let request = Self.largeUnaryRequest()
        let bytes: [UInt8] = try request.serializedBytes()
        let decoded = try Grpc_Testing_SimpleRequest(serializedBytes: bytes)

        #expect(decoded == request)
        #expect(decoded.responseSize == 314_159)
        #expect(decoded.hasPayload)
        #expect(decoded.payload.body.count == 271_828)
        #expect(decoded.payload.body.allSatisfy { $0 == 0 })
        #expect(!decoded.hasResponseStatus)
    }

    @Test("The encoding is the one every protobuf implementation writes for it")
    func largeUnaryWireFormat() throws {
        let bytes: [UInt8] = try Self.largeUnaryRequest().serializedBytes()
        // Field 2 (response_size, varint) = 314159, then field 3 (payload, length-delimited)
        // holding field 2 (body, length-delimited) of 271828 bytes.
        let expectedPrefix: [UInt8] = [
            0x10, 0xAF, 0x96, 0x13,  // response_size: 314159
            0x1A, 0xD8, 0xCB, 0x10,  // payload: 271832 bytes follow
            0x12, 0xD4, 0xCB, 0x10,  // body: 271828 bytes follow
        ]
        #expect(Array(bytes.prefix(expectedPrefix.count)) == expectedPrefix)
        #expect(bytes.count == expectedPrefix.count + 271_828)
    }

    @Test("A status to echo and an empty message round-trip too")
    func echoStatusRoundTrip() throws {
        var request = Grpc_Testing_SimpleRequest()
        request.responseStatus.code = 2
        request.responseStatus.message = "\t\ntest with whitespace\r\nand Unicode BMP ☺ and non-BMP 😈\t\n"
        let decoded = try Grpc_Testing_SimpleRequest(serializedBytes: try request.serializedBytes() as [UInt8])
        #expect(decoded.responseStatus == request.responseStatus)

        let empty: [UInt8] = try Grpc_Testing_Empty().serializedBytes()
        #expect(empty.isEmpty)
    }
}
