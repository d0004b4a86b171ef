import SwitchyardHPACK
import Testing

@testable import SwitchyardHTTP2

@Suite struct H2HeaderValidationTests {
    @Test("a gRPC request, a CONNECT request, a response and trailers pass, and the checks say what they learned")
    func validBlocks() throws {
        let request = try h2CheckHeaders(H2Fields.request + [HPACKField("content-length", "12")], as: .request)
        #expect(request.contentLength == 12)
        #expect(!request.isHeadRequest)
        let connect = [HPACKField(":method", "CONNECT"), HPACKField(":authority", "example.com:443")]
        #expect(throws: Never.self) { _ = try h2CheckHeaders(connect, as: .request) }
        let head = try h2CheckHeaders([HPACKField(":method", "HEAD")] + H2Fields.request.dropFirst(), as: .request)
        #expect(head.isHeadRequest)
        #expect(try h2CheckHeaders(H2Fields.response, as: .response).status == 200)
        #expect(throws: Never.self) { _ = try h2CheckHeaders(H2Fields.trailers, as: .trailers) }
    }

    @Test("each rule of sections 8.2 and 8.3 makes a block malformed", arguments: [
        ([HPACKField(":status", "200")] + H2Fields.trailers, H2HeaderBlockKind.trailers),
        ([HPACKField(":status", "20")], .response),
        ([HPACKField(":status", "200"), HPACKField(":status", "200")], .response),
        ([HPACKField("content-type", "x")], .response),
        (H2Fields.response + [HPACKField(":path", "/")], .response),
        (H2Fields.request + [HPACKField("content-length", "1"), HPACKField("content-length", "2")], .request),
        (H2Fields.request + [HPACKField("content-length", "-1")], .request),
        (H2Fields.request + [HPACKField("x-space", " leading")], .request),
        (H2Fields.request + [HPACKField("x-nul", "a\u{0}b")], .request),
        (H2Fields.request + [HPACKField("bad name", "x")], .request),
        (H2Fields.request + [HPACKField("keep-alive", "5")], .request),
        (H2Fields.request + [HPACKField("transfer-encoding", "chunked")], .request),
        (H2Fields.request + [HPACKField("upgrade", "h2c")], .request),
        (H2Fields.request + [HPACKField("proxy-connection", "x")], .request),
        (H2Fields.request + [HPACKField(":protocol", "websocket")], .request),
        ([HPACKField(":method", "CONNECT"), HPACKField(":authority", "a"), HPACKField(":path", "/")], .request),
        ([HPACKField(":scheme", "http"), HPACKField(":path", "/")], .request),
    ])
    func malformed(fields: [HPACKField], kind: H2HeaderBlockKind) {
        #expect(throws: H2MalformedHeaders.self) { _ = try h2CheckHeaders(fields, as: kind) }
    }
}
