import Switchyard
@testable import SwitchyardReachability
import Testing

@Suite("HTTPHeadResponseParser")
struct HTTPHeadResponseParserTests {
    static func parse(_ text: String, maximum: Int = HTTPHeadResponseParser.defaultMaximumHeadSize, chunk: Int = .max, finish: Bool = true) -> HTTPHeadResponseParser.Outcome {
        var parser = HTTPHeadResponseParser(maximumHeadSize: maximum, maximumHeaderCount: 8)
        let bytes = Array(text.utf8)
        var outcome = HTTPHeadResponseParser.Outcome.needMore
        var index = 0
        while index < bytes.count {
            let end = min(bytes.count, index + min(chunk, bytes.count - index))
            outcome = parser.append(bytes[index..<end])
            index = end
        }
        return finish ? parser.finish() : outcome
    }

    static func head(_ outcome: HTTPHeadResponseParser.Outcome) -> HTTPResponseHead? {
        if case .complete(let head) = outcome { return head }
        return nil
    }

    static func failure(_ outcome: HTTPHeadResponseParser.Outcome) -> HTTPHeadResponseParser.Failure? {
        if case .failed(let failure) = outcome { return failure }
        return nil
    }

    @Test("A head is read whole, byte by byte, or in any chunks, to the same result", arguments: [1, 2, 7, 64, Int.max])
    func chunks(chunk: Int) throws {
        let text = "HTTP/1.1 302 Found\r\nLocation: http://portal.example/login?a=b\r\nContent-Length:  0 \r\n\r\nignored body"
        let head = try #require(Self.head(Self.parse(text, chunk: chunk)))
        #expect(head.status == 302)
        #expect(head.minorVersion == 1)
        #expect(head.reasonPhrase == "Found")
        #expect(head.value(of: "location") == "http://portal.example/login?a=b")
        #expect(head.value(of: "Content-Length") == "0")
        #expect(head.headers.count == 2)
    }

    @Test("The head is complete at the blank line, before the stream ends")
    func completeBeforeEnd() {
        let outcome = Self.parse("HTTP/1.0 204 No Content\r\n\r\n", finish: false)
        #expect(Self.head(outcome)?.status == 204)
        #expect(Self.head(outcome)?.minorVersion == 0)
    }

    @Test("Bare LF line ends, an empty reason, and a status line without a reason are accepted")
    func lenient() {
        #expect(Self.head(Self.parse("HTTP/1.1 503 \nRetry-After: 5\n\n"))?.status == 503)
        #expect(Self.head(Self.parse("HTTP/1.1 200\r\n\r\n"))?.reasonPhrase == "")
    }

    @Test("Interim 1xx heads are skipped; 101 is final")
    func interim() {
        let outcome = Self.parse("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nX: y\r\n\r\n")
        #expect(Self.head(outcome)?.status == 200)
        #expect(Self.head(outcome)?.headers.map(\.name) == ["X"])
        #expect(Self.head(Self.parse("HTTP/1.1 101 Switching Protocols\r\n\r\n"))?.status == 101)
    }

    @Test("Malformed heads fail with a message", arguments: [
        "SSH-2.0-OpenSSH_9.2\r\n",
        "HTTP/2 200\r\n\r\n",
        "HTTP/1.1 20 OK\r\n\r\n",
        "HTTP/1.1 600 Nope\r\n\r\n",
        "HTTP/1.1 099 Low\r\n\r\n",
        "HTTP/1.1 2000 OK\r\n\r\n",
        "HTTP/1.1  200 OK\r\n\r\n",
        "HTTP/1.1 200OK\r\n\r\n",
        "\r\nHTTP/1.1 200 OK\r\n\r\n",
        "HTTP/1.1 200 OK\r\nNoColon\r\n\r\n",
        "HTTP/1.1 200 OK\r\n: empty name\r\n\r\n",
        "HTTP/1.1 200 OK\r\nBad Name: x\r\n\r\n",
        "HTTP/1.1 200 OK\r\nName : x\r\n\r\n",
        "HTTP/1.1 200 OK\r\nA: b\r\n folded\r\n\r\n",
        "HTTP/1.1 200 OK\r\nA: b\rc\r\n\r\n",
        "HTTP/1.1 200 OK\r\nA: \u{0}\r\n\r\n",
        "HTTP/1.1 200 O\u{1}K\r\n\r\n",
        "HTTP/1.1 200 OK\r\nA: \u{7f}\r\n\r\n",
    ])
    func malformed(text: String) throws {
        let failure = try #require(Self.failure(Self.parse(text)), "accepted: \(text.debugDescription)")
        #expect(!failure.message.isEmpty)
        #expect(!failure.endedEarly)
    }

    @Test("A stream that ends before the head does fails as ended early")
    func truncated() throws {
        let empty = try #require(Self.failure(Self.parse("")))
        #expect(empty.endedEarly)
        #expect(empty.message.contains("without answering"))
        let partial = try #require(Self.failure(Self.parse("HTTP/1.1 200 OK\r\nA: b\r\n")))
        #expect(partial.endedEarly)
        #expect(Self.failure(Self.parse("HTTP/1.1 200 OK\r\nA: b\r\n", finish: false)) == nil)
    }

    @Test("An endless head fails once it crosses the bound, and takes no more bytes")
    func bound() throws {
        var parser = HTTPHeadResponseParser(maximumHeadSize: 1024)
        #expect(parser.append(Array("HTTP/1.1 200 OK\r\n".utf8)) == .needMore)
        var outcome = HTTPHeadResponseParser.Outcome.needMore
        var rounds = 0
        while outcome == .needMore && rounds < 1000 {
            outcome = parser.append(Array("X-Endless: aaaaaaaaaaaaaaaaaaaaaaaaa\r\n".utf8))
            rounds += 1
        }
        let failure = try #require(Self.failure(outcome))
        #expect(failure.message.contains("longer than 1024 bytes"))
        #expect(parser.bytesConsumed == 1024)
        // One endless line without a line end is bounded the same way.
        let line = try #require(Self.failure(Self.parse("HTTP/1.1 200 OK\r\nX: " + String(repeating: "a", count: 5000), maximum: 1024)))
        #expect(!line.endedEarly)
        // Final: later bytes and finish() change nothing.
        #expect(parser.append(Array("\r\n\r\n".utf8)) == outcome)
        #expect(parser.finish() == outcome)
    }

    @Test("More fields than the maximum fail")
    func tooManyFields() {
        let text = "HTTP/1.1 200 OK\r\n" + (0..<9).map { "F\($0): v\r\n" }.joined() + "\r\n"
        #expect(Self.failure(Self.parse(text)) != nil)
        let eight = "HTTP/1.1 200 OK\r\n" + (0..<8).map { "F\($0): v\r\n" }.joined() + "\r\n"
        #expect(Self.head(Self.parse(eight))?.headers.count == 8)
    }

    @Test("Bytes 0x80...0xFF in values are kept, invalid UTF-8 replaced")
    func obsText() throws {
        var parser = HTTPHeadResponseParser()
        let outcome = parser.append(Array("HTTP/1.1 200 OK\r\nX: caf".utf8) + [0xC3, 0xA9, 0x20, 0xFF] + Array("\r\n\r\n".utf8))
        let head = try #require(Self.head(outcome))
        #expect(head.value(of: "x") == "café \u{FFFD}")
    }
}
