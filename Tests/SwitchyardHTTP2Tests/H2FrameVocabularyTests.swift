import Testing

@testable import SwitchyardHTTP2

@Suite struct H2FrameVocabularyTests {
    @Test("a stream identifier drops the reserved bit and knows who opened it")
    func streamIdentifier() {
        #expect(H2StreamID(0x8000_0003).rawValue == 3)
        #expect(H2StreamID(3).isClientInitiated)
        #expect(!H2StreamID(2).isClientInitiated)
        #expect(H2StreamID.connection.isConnection)
    }

    @Test("error codes print as the RFC names them, unknown ones by number")
    func errorCodeNames() {
        #expect(H2ErrorCode.enhanceYourCalm.description == "ENHANCE_YOUR_CALM")
        #expect(H2ErrorCode(0x42).description == "error code 0x42")
    }

    @Test("padding counts against flow control, Pad Length octet included")
    func flowControlledLength() {
        #expect(H2Frame.data(H2StreamID(1), payload: [1, 2, 3], endStream: false).flowControlledLength == 3)
        #expect(H2Frame.data(H2StreamID(1), payload: [1, 2, 3], endStream: false, paddingLength: 5).flowControlledLength == 8)
        #expect(H2Frame.windowUpdate(H2StreamID(1), increment: 10).flowControlledLength == 0)
    }
}
