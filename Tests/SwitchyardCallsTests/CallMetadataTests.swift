import Switchyard
import SwitchyardCalls
import SwitchyardTestSupport
import Testing

/// ``CallMetadata``'s rules: keys lower-cased and checked, values fit their key, order and
/// repeats kept; each bad pair an error that names it.
@Suite("CallMetadata")
struct MetadataTests {
    /// Expects `body` to throw `invalidArgument`/`invalid metadata` whose message holds
    /// every one of `words`.
    func expectInvalid(
        _ words: [String], sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws(TransportError) -> Void
    ) {
        expectTransportError(.invalidArgument, .invalidMetadata, mentioning: words, sourceLocation: sourceLocation, body)
    }

    @Test("Keys are lower-cased; repeated keys keep every value in order; lookups ignore case")
    func orderAndRepeats() throws {
        var metadata = CallMetadata()
        try metadata.addString("1", forKey: "Trace-ID")
        try metadata.addString("a", forKey: "accept")
        try metadata.addString("2", forKey: "trace-id")
        try metadata.addBinary([0, 255], forKey: "Token-BIN")
        #expect(metadata.map(\.key) == ["trace-id", "accept", "trace-id", "token-bin"])
        #expect(metadata[stringValues: "TRACE-id"] == ["1", "2"])
        #expect(metadata[binaryValues: "token-bin"] == [[0, 255]])
        #expect(metadata["token-bin"] == [.binary([0, 255])])
        #expect(metadata["missing"].isEmpty)
        #expect(metadata.count == 4)
        let removed = metadata.removeAll(forKey: "Trace-Id")
        let removedAgain = metadata.removeAll(forKey: "trace-id")
        #expect(removed && !removedAgain)
        #expect(metadata.map(\.key) == ["accept", "token-bin"])
        let copy = try CallMetadata([(key: "accept", value: .string("a")), (key: "token-bin", value: .binary([0, 255]))])
        #expect(copy == metadata)
        var joined = CallMetadata()
        joined.add(contentsOf: copy)
        joined.add(contentsOf: copy)
        #expect(joined.count == 4 && joined[stringValues: "accept"] == ["a", "a"])
    }

    @Test("Unicode string values, tabs, empty values and 255-byte keys are accepted")
    func accepted() throws {
        var metadata = CallMetadata()
        try metadata.addString("Grüße, 世界 🚂", forKey: "greeting")
        try metadata.addString("a\tb", forKey: "tabbed")
        try metadata.addString("", forKey: "empty")
        try metadata.addBinary([], forKey: "empty-bin")
        try metadata.addString("x", forKey: String(repeating: "k", count: 255))
        try metadata.addString("x", forKey: "a.b_c-d0")
        #expect(metadata[stringValues: "greeting"] == ["Grüße, 世界 🚂"])
    }

    @Test("A bad key is refused naming it and what is wrong", arguments: [
        ("", "it is empty"), ("bad key", "a space (U+0020)"), ("ключ", "'к' (U+043A)"), ("a:b", "':' (U+003A)"),
        ("tab\there", "a control character (U+0009)"), (String(repeating: "k", count: 256), "256 bytes long; a key has at most 255"),
    ])
    func badKey(key: String, why: String) {
        expectInvalid(["invalid metadata key", why]) { () throws(TransportError) in
            var metadata = CallMetadata()
            try metadata.addString("v", forKey: key)
        }
    }

    @Test("A value that does not fit its key is refused naming both")
    func badValue() {
        expectInvalid(["binary value for the key \"plain\"", "-bin"]) { () throws(TransportError) in
            var metadata = CallMetadata()
            try metadata.addBinary([1], forKey: "plain")
        }
        expectInvalid(["string value \"text\" for the key \"data-bin\""]) { () throws(TransportError) in
            var metadata = CallMetadata()
            try metadata.addString("text", forKey: "Data-Bin")
        }
        expectInvalid(["the value \"line\\u{a}break\" of the key \"k\"", "a control character (U+000A)"]) { () throws(TransportError) in
            var metadata = CallMetadata()
            try metadata.addString("line\nbreak", forKey: "k")
        }
        expectInvalid(["U+007F"]) { () throws(TransportError) in
            _ = try CallMetadata([(key: "k", value: .string("del\u{7f}"))])
        }
    }

    @Test("CallConfiguration.validate() refuses a maximumMetadataSize out of range, naming it", arguments: [-1, Int(UInt32.max) + 1])
    func badMaximum(size: Int) {
        var options = CallConfiguration()
        options.maximumMetadataSize = size
        do {
            try options.validate()
            Issue.record("maximumMetadataSize \(size) passed")
        } catch {
            #expect(error.code == .invalidArgument && error.reason == .invalidOption, "\(error)")
            #expect(error.message.contains("invalid maximumMetadataSize \(size)"), "\(error)")
        }
        #expect(CallConfiguration().maximumMetadataSize == Frame.defaultMaximumMetadataSize)
    }
}
