import Switchyard
import SwitchyardCalls
import Testing

@Suite("gRPC response headers and trailers")
struct GRPCResponseTests {
    static func text(_ fields: [GRPCHeaderField]) -> [String] { fields.map(\.description) }
    static func block(_ pairs: [(String, String)]) -> [GRPCHeaderField] { pairs.map { GRPCHeaderField($0.0, $0.1) } }

    @Test("The server's headers, trailers and trailers-only response")
    func writes() throws {
        var metadata = CallMetadata()
        try metadata.addString("v", forKey: "k")
        #expect(
            Self.text(try GRPCResponse.headersFields(encoding: .gzip, acceptEncodings: [.gzip, .identity], metadata: metadata)) == [
                ":status: 200", "content-type: application/grpc", "grpc-encoding: gzip", "grpc-accept-encoding: gzip,identity", "k: v",
            ])
        #expect(Self.text(try GRPCResponse.headersFields(encoding: .identity, acceptEncodings: [], metadata: CallMetadata())) == [":status: 200", "content-type: application/grpc"])
        #expect(Self.text(try GRPCResponse.trailersFields(status: .ok, metadata: metadata)) == ["grpc-status: 0", "k: v"])
        let failed = CallStatus(error: TransportError(code: .notFound, reason: .misuse, message: "no such topic: 100%"))
        #expect(
            Self.text(try GRPCResponse.trailersFields(status: failed)) == [
                "grpc-status: 5", "grpc-message: no such topic: 100%25", "switchyard-reason: misuse",
            ])
        #expect(
            Self.text(try GRPCResponse.trailersOnlyFields(status: failed, metadata: metadata)) == [
                ":status: 200", "content-type: application/grpc", "grpc-status: 5", "grpc-message: no such topic: 100%25",
                "switchyard-reason: misuse", "k: v",
            ])
        // An error with no message sends no grpc-message; a gRPC peer's reason is not sent.
        let bare = CallStatus(error: TransportError(code: .aborted, reason: .grpcStatus, message: ""))
        #expect(Self.text(try GRPCResponse.trailersFields(status: bare)) == ["grpc-status: 10"])
    }

    @Test("A Switchyard reason travels in switchyard-reason and comes back as the error's reason, not as metadata")
    func reasonRoundTrip() throws {
        let failed = CallStatus(error: TransportError(code: .aborted, reason: TransportError.Reason("integrity mismatch"), message: "sha-256 differs"))
        var metadata = CallMetadata()
        try metadata.addString("v", forKey: "k")
        let (status, trailing) = GRPCResponse.readTrailers(try GRPCResponse.trailersFields(status: failed, metadata: metadata))
        #expect(status.error?.code == .aborted && status.error?.reason.name == "integrity mismatch" && status.error?.message == "sha-256 differs")
        #expect(trailing == metadata)
    }

    // The spec's sample trailer value, "jher831yy13JHy3hc", is 17 characters: no base64
    // has that length, so it is cut to 16 here.
    @Test("The client reads the spec's sample response")
    func readsSample() throws {
        let reading = GRPCResponse.readHeaders(Self.block([(":status", "200"), ("grpc-encoding", "gzip"), ("content-type", "application/grpc+proto")]))
        guard case .head(let head) = reading else {
            Issue.record("expected headers, got \(reading)")
            return
        }
        #expect(head.encoding == .gzip)
        let (status, metadata) = GRPCResponse.readTrailers(Self.block([("grpc-status", "0"), ("trace-proto-bin", "jher831yy13JHy3h")]))
        #expect(status == .ok)
        #expect(metadata[binaryValues: "trace-proto-bin"].count == 1)
    }

    @Test("Trailers carry the status, the decoded message and the metadata, details included")
    func readsTrailers() throws {
        let (status, metadata) = GRPCResponse.readTrailers(
            Self.block([("grpc-status", "16"), ("grpc-message", "token%20expired%"), ("grpc-status-details-bin", "CBA"), ("k", "v")]))
        let error = try #require(status.error)
        #expect(status.grpcCode == .unauthenticated)
        #expect(error.message == "token expired%")
        #expect(error.reason == .grpcStatus)
        #expect(metadata.map(\.key) == ["grpc-status-details-bin", "k"])
        #expect(metadata[binaryValues: "grpc-status-details-bin"] == [[0x08, 0x10]])
    }

    @Test("Trailers without a valid grpc-status end the call UNKNOWN", arguments: [nil, "17", "x", "-1"])
    func badTrailers(value: String?) {
        let (status, _) = GRPCResponse.readTrailers(Self.block(value.map { [("grpc-status", $0)] } ?? [("k", "v")]))
        #expect(status.grpcCode == .unknown)
        #expect(status.error?.reason == .protocolViolation)
    }

    @Test("A trailers-only response: grpc-status wins over any HTTP status")
    func trailersOnly() {
        let (status, metadata) = GRPCResponse.readTrailersOnly(
            Self.block([(":status", "200"), ("content-type", "application/grpc"), ("grpc-status", "7"), ("grpc-message", "no"), ("k", "v")]))
        #expect(status.grpcCode == .permissionDenied)
        #expect(status.error?.message == "no")
        #expect(metadata.map(\.key) == ["k"])
        let (proxied, _) = GRPCResponse.readTrailersOnly(Self.block([(":status", "503"), ("grpc-status", "8")]))
        #expect(proxied.grpcCode == .resourceExhausted)
    }

    @Test(
        "A response without grpc-status ends with the HTTP mapping",
        arguments: [("401", GRPCStatusCode.unauthenticated), ("404", .unimplemented), ("503", .unavailable), ("500", .unknown), ("200", .unknown)])
    func httpOnly(httpStatus: String, expected: GRPCStatusCode) {
        let (status, _) = GRPCResponse.readTrailersOnly(Self.block([(":status", httpStatus), ("content-type", "text/html")]))
        #expect(status.grpcCode == expected)
        if httpStatus != "200" {
            guard case .ended(let ended, _) = GRPCResponse.readHeaders(Self.block([(":status", httpStatus), ("content-type", "text/html")])) else {
                Issue.record("expected the call to end")
                return
            }
            #expect(ended.grpcCode == expected)
            #expect(ended.error?.reason == .httpStatus)
        }
    }

    @Test("A response with neither a valid :status nor grpc-status ends UNKNOWN", arguments: [nil, "abc", "2000", "20"])
    func noStatusAtAll(httpStatus: String?) {
        let pairs = (httpStatus.map { [(":status", $0)] } ?? []) + [("content-type", "application/grpc")]
        let (status, _) = GRPCResponse.readTrailersOnly(Self.block(pairs))
        #expect(status.grpcCode == .unknown)
        #expect(status.error?.reason == .protocolViolation)
        guard case .ended(let ended, _) = GRPCResponse.readHeaders(Self.block(pairs)) else {
            Issue.record("expected the call to end")
            return
        }
        #expect(ended.grpcCode == .unknown)
    }

    @Test("Informational headers are skipped")
    func informational() {
        #expect(GRPCResponse.readHeaders(Self.block([(":status", "100")])) == .informational)
        #expect(GRPCResponse.readHeaders(Self.block([(":status", "103"), ("link", "x")])) == .informational)
    }

    @Test("Headers with a content-type that is not gRPC's end the call INTERNAL", arguments: [nil, "text/html", "application/grpc-web"])
    func badContentType(value: String?) {
        let pairs = [(":status", "200")] + (value.map { [("content-type", $0)] } ?? [])
        guard case .ended(let status, _) = GRPCResponse.readHeaders(Self.block(pairs)) else {
            Issue.record("expected the call to end")
            return
        }
        #expect(status.grpcCode == .internal)
    }

    @Test("Headers with an encoding the client does not read end the call INTERNAL")
    func badEncoding() {
        let pairs = [(":status", "200"), ("content-type", "application/grpc"), ("grpc-encoding", "snappy")]
        guard case .ended(let status, _) = GRPCResponse.readHeaders(Self.block(pairs)) else {
            Issue.record("expected the call to end")
            return
        }
        #expect(status.grpcCode == .internal)
        #expect(status.error?.reason == .unsupportedEncoding)
        let gzip = [(":status", "200"), ("content-type", "application/grpc"), ("grpc-encoding", "gzip")]
        guard case .ended = GRPCResponse.readHeaders(Self.block(gzip), acceptedEncodings: [.identity]) else {
            Issue.record("expected the call to end")
            return
        }
    }

    @Test("What the server writes, the client reads")
    func roundTrip() throws {
        var metadata = CallMetadata()
        try metadata.addBinary([9, 9], forKey: "x-bin")
        let headers = try GRPCResponse.headersFields(encoding: .gzip, acceptEncodings: GRPCEncoding.supported, metadata: metadata)
        #expect(GRPCResponse.readHeaders(headers) == .head(.init(encoding: .gzip, acceptEncodings: GRPCEncoding.supported, metadata: metadata)))
        let failed = CallStatus(error: TransportError(code: .unavailable, reason: .misuse, message: "ünïcode\nand 100%"))
        let (status, _) = GRPCResponse.readTrailers(try GRPCResponse.trailersFields(status: failed))
        #expect(status.grpcCode == .unavailable)
        #expect(status.error?.message == "ünïcode\nand 100%")
        let (only, read) = GRPCResponse.readTrailersOnly(try GRPCResponse.trailersOnlyFields(status: failed, metadata: metadata))
        #expect(only.grpcCode == .unavailable)
        #expect(read == metadata)
    }
}
