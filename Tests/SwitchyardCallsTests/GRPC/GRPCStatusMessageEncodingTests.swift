import SwitchyardCalls
import Testing

@Suite("gRPC grpc-message percent-encoding")
struct GRPCStatusMessageEncodingTests {
    @Test(
        "Bytes outside space to '~', and '%', are encoded; the rest is kept",
        arguments: [
            ("my favorite character is \u{0000}", "my favorite character is %00"),
            ("my favorite character is %", "my favorite character is %25"),
            ("my favorite character is 𝄞", "my favorite character is %F0%9D%84%9E"),
            ("line\nbreak\ttab", "line%0Abreak%09tab"),
            ("Unexpected non-200 (404) ~!@#$^&*()", "Unexpected non-200 (404) ~!@#$^&*()"),
            ("\u{7F}é", "%7F%C3%A9"),
            ("", ""),
        ])
    func encodes(message: String, expected: String) {
        #expect(GRPCStatusMessageEncoding.encode(message) == Array(expected.utf8))
        #expect(GRPCStatusMessageEncoding.decode(Array(expected.utf8)) == message)
    }

    @Test(
        "Decoding is lenient: broken escapes pass through as they are",
        arguments: [
            ("%", "%"), ("%2", "%2"), ("%G0", "%G0"), ("100%", "100%"), ("%%25", "%%"), ("a%2x%41", "a%2xA"),
            ("%e2%82%ac", "€"), ("%FF", "\u{FFFD}"),
        ])
    func lenient(encoded: String, expected: String) {
        #expect(GRPCStatusMessageEncoding.decode(Array(encoded.utf8)) == expected)
    }
}
