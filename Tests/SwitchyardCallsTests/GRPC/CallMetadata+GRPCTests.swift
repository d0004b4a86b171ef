import Switchyard
import SwitchyardCalls
import SwitchyardTestSupport
import Testing

@Suite("gRPC custom metadata")
struct GRPCCustomMetadataTests {
    static func fields(_ pairs: [(String, String)]) -> [GRPCHeaderField] {
        pairs.map { GRPCHeaderField($0.0, $0.1) }
    }

    @Test(
        "Base64 encodes unpadded and decodes padded or not",
        arguments: [
            ("", ""), ("f", "Zg"), ("fo", "Zm8"), ("foo", "Zm9v"), ("foob", "Zm9vYg"), ("fooba", "Zm9vYmE"),
            ("foobar", "Zm9vYmFy"),
        ])
    func base64(plain: String, encoded: String) {
        // RFC 4648 section 10's vectors, without their padding.
        #expect(GRPCBase64.encode(Array(plain.utf8)) == Array(encoded.utf8))
        #expect(GRPCBase64.decode(Array(encoded.utf8)) == Array(plain.utf8))
        let padded = encoded + String(repeating: "=", count: (4 - encoded.count % 4) % 4)
        #expect(GRPCBase64.decode(Array(padded.utf8)) == Array(plain.utf8))
    }

    @Test("Base64 refuses what is not base64", arguments: ["Z", "Zg=", "Zg===", "Z===", "Zm9v=", "Zm 9v", "Zm9v!", "Zm-_", "=Zg", "Zg==Zg"])
    func base64Malformed(text: String) {
        #expect(GRPCBase64.decode(Array(text.utf8)) == nil)
    }

    @Test("Base64 of every byte value round-trips")
    func base64AllBytes() {
        let bytes = (0...255).map(UInt8.init)
        for count in 0...bytes.count {
            #expect(GRPCBase64.decode(GRPCBase64.encode(bytes.prefix(count))) == Array(bytes.prefix(count)))
        }
    }

    @Test("Metadata goes out as fields: strings as they are, binary values in unpadded base64, in order")
    func sends() throws {
        var metadata = CallMetadata()
        try metadata.addString("Bearer y235", forKey: "authorization")
        try metadata.addBinary([0xde, 0xad, 0xbe, 0xef], forKey: "trace-proto-bin")
        try metadata.addString("2", forKey: "x-retry")
        try metadata.addBinary([1], forKey: "grpc-status-details-bin")
        var fields: [GRPCHeaderField] = []
        try metadata.appendGRPCFields(to: &fields)
        #expect(
            fields == Self.fields([
                ("authorization", "Bearer y235"), ("trace-proto-bin", "3q2+7w"), ("x-retry", "2"), ("grpc-status-details-bin", "AQ"),
            ]))
    }

    @Test(
        "gRFC A6's retry keys go on the wire as metadata, both ways",
        arguments: ["grpc-retry-pushback-ms", "grpc-previous-rpc-attempts"])
    func retryKeysPass(key: String) throws {
        var metadata = CallMetadata()
        try metadata.addString("250", forKey: key)
        var fields: [GRPCHeaderField] = []
        try metadata.appendGRPCFields(to: &fields)
        #expect(fields == Self.fields([(key, "250")]))
        let received = try CallMetadata(grpcFields: fields)
        #expect(received[stringValues: key] == ["250"])
    }

    @Test(
        "Keys gRPC and HTTP/2 keep for themselves are refused when sending",
        arguments: [
            "grpc-status", "grpc-message", "grpc-timeout", "grpc-encoding", "grpc-accept-encoding", "grpc-future", "te",
            "content-type", "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "host",
        ])
    func reservedRefused(key: String) throws {
        var metadata = CallMetadata()
        try metadata.addString("x", forKey: key)
        var fields: [GRPCHeaderField] = []
        expectTransportError(.invalidArgument, .invalidMetadata, mentioning: [key, "reserved"]) { () throws(TransportError) in
            try metadata.appendGRPCFields(to: &fields)
        }
    }

    @Test("A string value that is not printable ASCII is refused when sending", arguments: ["café", "tab\there", "日本"])
    func nonASCIIRefused(value: String) throws {
        var metadata = CallMetadata()
        try metadata.addString(value, forKey: "note")
        var fields: [GRPCHeaderField] = []
        expectTransportError(.invalidArgument, .invalidMetadata, mentioning: ["note", "printable ASCII"]) { () throws(TransportError) in
            try metadata.appendGRPCFields(to: &fields)
        }
    }

    @Test("Received fields become metadata; pseudo-headers, reserved keys and non-keys are left out")
    func receives() throws {
        let metadata = try CallMetadata(
            grpcFields: Self.fields([
                (":status", "200"), ("content-type", "application/grpc"), ("grpc-status", "0"), ("grpc-message", "x"),
                ("grpc-encoding", "gzip"), ("te", "trailers"), ("grpc-future", "1"), ("authorization", "Bearer y235"),
                ("trace-proto-bin", "3q2+7w=="), ("user-agent", "grpc-go/1.60"), ("bad!name", "1"),
                ("grpc-status-details-bin", "AQ"),
            ]))
        #expect(metadata.map(\.key) == ["authorization", "trace-proto-bin", "user-agent", "grpc-status-details-bin"])
        #expect(metadata[binaryValues: "trace-proto-bin"] == [[0xde, 0xad, 0xbe, 0xef]])
        #expect(metadata[binaryValues: "grpc-status-details-bin"] == [[1]])
    }

    @Test("A joined binary field is split at commas, each part decoded")
    func joinedBinary() throws {
        let metadata = try CallMetadata(grpcFields: Self.fields([("k-bin", "AQ,Ag==, Aw")]))
        #expect(metadata[binaryValues: "k-bin"] == [[1], [2], [3]])
    }

    @Test("A binary value that is not base64 fails the call internal")
    func badBinary() {
        expectTransportError(.internal, .protocolViolation, mentioning: ["k-bin", "base64"]) { () throws(TransportError) in
            _ = try CallMetadata(grpcFields: Self.fields([("k-bin", "not base64!")]))
        }
    }

    @Test("A received value that is not printable ASCII is dropped, so what arrives can be sent back")
    func nonASCIIDropped() throws {
        let fields = [
            GRPCHeaderField(name: Array("a".utf8), value: [0x68, 0x09, 0x69]),
            GRPCHeaderField(name: Array("b".utf8), value: [0xC3, 0xA9]),
            GRPCHeaderField(name: Array("c".utf8), value: Array("ok ~".utf8)),
        ]
        let metadata = try CallMetadata(grpcFields: fields)
        #expect(metadata.map(\.key) == ["c"])
        var echoed: [GRPCHeaderField] = []
        try metadata.appendGRPCFields(to: &echoed)
        #expect(echoed == [fields[2]])
    }
}
