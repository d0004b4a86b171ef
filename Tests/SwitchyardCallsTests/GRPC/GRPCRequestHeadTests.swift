import Switchyard
import SwitchyardCalls
import Testing

@Suite("gRPC request headers")
struct GRPCRequestHeadTests {
    static func text(_ fields: [GRPCHeaderField]) -> [String] { fields.map(\.description) }

    static func request(_ pairs: [(String, String)]) -> [GRPCHeaderField] { pairs.map { GRPCHeaderField($0.0, $0.1) } }

    static let valid = [
        (":method", "POST"), (":scheme", "http"), (":path", "/google.pubsub.v2.PublisherService/CreateTopic"),
        (":authority", "pubsub.googleapis.com"), ("grpc-timeout", "1S"), ("content-type", "application/grpc+proto"),
        ("te", "trailers"), ("grpc-encoding", "gzip"), ("authorization", "Bearer y235.wef315yfh138vh31hv93hv8h3v"),
    ]

    @Test("The client's block holds the call definition in the spec's order, then the metadata")
    func clientFields() throws {
        var metadata = CallMetadata()
        try metadata.addString("Bearer t", forKey: "authorization")
        try metadata.addString("my-app/2.1", forKey: "user-agent")
        let head = GRPCRequestHead(
            scheme: "https", path: "/echo.Echo/Get", authority: "example.com:443", timeout: GRPCTimeout(rounding: .milliseconds(100)),
            encoding: .gzip, acceptEncodings: [.gzip, .identity], metadata: metadata)
        #expect(
            Self.text(try head.fields()) == [
                ":method: POST", ":scheme: https", ":path: /echo.Echo/Get", ":authority: example.com:443", "grpc-timeout: 100m",
                "content-type: application/grpc", "te: trailers", "grpc-encoding: gzip", "grpc-accept-encoding: gzip,identity",
                "user-agent: my-app/2.1 \(GRPCRequestHead.userAgent)", "authorization: Bearer t",
            ])
        #expect(GRPCRequestHead.userAgent.hasPrefix("switchyard/"))
    }

    @Test("Without a deadline, an authority or compression, those fields are left out")
    func minimalClientFields() throws {
        let head = GRPCRequestHead(scheme: "http", path: "/a/b", authority: nil, acceptEncodings: [])
        #expect(
            Self.text(try head.fields()) == [
                ":method: POST", ":scheme: http", ":path: /a/b", "content-type: application/grpc", "te: trailers",
                "user-agent: \(GRPCRequestHead.userAgent)",
            ])
    }

    @Test("A path that is not printable ASCII is refused before anything is sent")
    func badClientPath() {
        #expect(throws: TransportError.self) { try GRPCRequestHead(scheme: "http", path: "/a b/c", authority: nil).fields() }
        #expect(throws: TransportError.self) { try GRPCRequestHead(scheme: "http", path: "/ä/c", authority: nil).fields() }
    }

    @Test("The server reads the spec's sample request")
    func parsesSample() throws {
        let head = try GRPCRequestHead(parsing: Self.request(Self.valid))
        #expect(head.path == "/google.pubsub.v2.PublisherService/CreateTopic")
        #expect(head.service == "google.pubsub.v2.PublisherService")
        #expect(head.method == "CreateTopic")
        #expect(head.authority == "pubsub.googleapis.com")
        #expect(head.timeout?.duration == .seconds(1))
        #expect(head.encoding == .gzip)
        #expect(head.hasTETrailers)
        #expect(head.metadata.map(\.key) == ["authorization"])
    }

    @Test("What the client writes, the server reads")
    func roundTrip() throws {
        var metadata = CallMetadata()
        try metadata.addBinary([0, 1, 2, 255], forKey: "blob-bin")
        let sent = GRPCRequestHead(
            scheme: "http", path: "/s/m", authority: "h", timeout: GRPCTimeout(rounding: .seconds(5)), encoding: .gzip, metadata: metadata)
        let read = try GRPCRequestHead(parsing: try sent.fields())
        #expect(read.path == sent.path)
        #expect(read.timeout == sent.timeout)
        #expect(read.encoding == .gzip)
        #expect(read.acceptEncodings == GRPCEncoding.supported)
        #expect(read.metadata[binaryValues: "blob-bin"] == [[0, 1, 2, 255]])
        #expect(read.userAgent == GRPCRequestHead.userAgent)
        #expect(read.responseEncoding(preferring: [.gzip]) == .gzip)
        #expect(read.responseEncoding(preferring: [.identity]) == .identity)
    }

    static func rejection(_ pairs: [(String, String)], accepted: [GRPCEncoding] = GRPCEncoding.supported) throws -> GRPCRequestRejection {
        do {
            _ = try GRPCRequestHead(parsing: request(pairs), acceptedEncodings: accepted)
        } catch {
            return error
        }
        throw TransportError(code: .internal, reason: .misuse, message: "the request was accepted")
    }

    static func replacing(_ name: String, with value: String?) -> [(String, String)] {
        var pairs = valid.filter { $0.0 != name }
        if let value { pairs.append((name, value)) }
        return pairs
    }

    @Test("A content-type that is not gRPC's gets HTTP 415 and no gRPC status", arguments: [nil, "application/json", "application/grpc-web", "text/plain", "application/grp"])
    func contentType(value: String?) throws {
        let rejection = try Self.rejection(Self.replacing("content-type", with: value))
        #expect(Self.text(rejection.response) == [":status: 415"])
        #expect(rejection.status.error?.code == .invalidArgument)
    }

    @Test("gRPC content-types are accepted", arguments: ["application/grpc", "application/grpc+proto", "application/grpc+json", "Application/GRPC", "application/grpc;charset=utf-8"])
    func grpcContentTypes(value: String) throws {
        _ = try GRPCRequestHead(parsing: Self.request(Self.replacing("content-type", with: value)))
    }

    @Test("A method other than POST gets HTTP 405 with grpc-status UNIMPLEMENTED", arguments: [nil, "GET", "PUT", "post"])
    func method(value: String?) throws {
        let rejection = try Self.rejection(Self.replacing(":method", with: value))
        let text = Self.text(rejection.response)
        #expect(text.prefix(3) == [":status: 405", "content-type: application/grpc", "grpc-status: 12"])
        #expect(rejection.status.grpcCode == .unimplemented)
    }

    @Test("A path that does not start with / gets a trailers-only UNIMPLEMENTED", arguments: [nil, "", "a/b", "a"])
    func path(value: String?) throws {
        let rejection = try Self.rejection(Self.replacing(":path", with: value))
        #expect(Self.text(rejection.response).prefix(3) == [":status: 200", "content-type: application/grpc", "grpc-status: 12"])
    }

    @Test("A scheme other than http or https gets a trailers-only INVALID_ARGUMENT", arguments: [nil, "ftp", "HTTP"])
    func scheme(value: String?) throws {
        let rejection = try Self.rejection(Self.replacing(":scheme", with: value))
        #expect(Self.text(rejection.response).prefix(3) == [":status: 200", "content-type: application/grpc", "grpc-status: 3"])
    }

    @Test("A malformed grpc-timeout gets a trailers-only INTERNAL", arguments: ["1", "123456789S", "1x", "-1S", ""])
    func timeout(value: String) throws {
        let rejection = try Self.rejection(Self.replacing("grpc-timeout", with: value))
        #expect(Self.text(rejection.response).prefix(3) == [":status: 200", "content-type: application/grpc", "grpc-status: 13"])
        #expect(Self.text(rejection.response).contains { $0.hasPrefix("grpc-message: ") && $0.contains("grpc-timeout") })
    }

    @Test("An unsupported grpc-encoding gets UNIMPLEMENTED and the encodings the server accepts")
    func unsupportedEncoding() throws {
        let rejection = try Self.rejection(Self.replacing("grpc-encoding", with: "snappy"))
        let text = Self.text(rejection.response)
        #expect(text.prefix(3) == [":status: 200", "content-type: application/grpc", "grpc-status: 12"])
        #expect(text.last == "grpc-accept-encoding: gzip,identity")
        #expect(rejection.status.error?.reason == .unsupportedEncoding)
        // gzip, known but not accepted by this server, is unsupported too.
        let identityOnly = try Self.rejection(Self.valid, accepted: [.identity])
        #expect(Self.text(identityOnly.response).last == "grpc-accept-encoding: identity")
        // identity is always read.
        _ = try GRPCRequestHead(parsing: Self.request(Self.replacing("grpc-encoding", with: "identity")), acceptedEncodings: [])
    }

    @Test("Two grpc-encoding fields get a trailers-only INTERNAL")
    func twoEncodings() throws {
        let rejection = try Self.rejection(Self.valid + [("grpc-encoding", "gzip")])
        #expect(rejection.status.grpcCode == .internal)
    }

    @Test("A -bin value that is not base64 gets a trailers-only INTERNAL")
    func badBinaryMetadata() throws {
        let rejection = try Self.rejection(Self.valid + [("x-bin", "***")])
        #expect(Self.text(rejection.response).prefix(3) == [":status: 200", "content-type: application/grpc", "grpc-status: 13"])
    }

    @Test("te is read, not enforced")
    func te() throws {
        let without = try GRPCRequestHead(parsing: Self.request(Self.replacing("te", with: nil)))
        #expect(!without.hasTETrailers)
        #expect(without.path == "/google.pubsub.v2.PublisherService/CreateTopic")
    }
}
