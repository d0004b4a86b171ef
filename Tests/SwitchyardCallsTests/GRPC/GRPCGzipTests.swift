import Subprocess
import Switchyard
import SwitchyardCalls
import SwitchyardTestSupport
import Testing

@Suite("gRPC gzip compression")
struct GRPCGzipTests {
    /// The bytes python3 writes to its standard output running `script`, given `input`.
    static func python(_ script: String, input: [UInt8] = []) async throws -> [UInt8] {
        let result = try await run(
            .name("python3"), arguments: ["-c", script], input: .array(input), output: .bytes(limit: 64 << 20), error: .string(limit: 1 << 16))
        #expect(result.terminationStatus == .exited(0), "python3 failed: \(result.standardError)")
        return result.standardOutput
    }

    /// The test message, as Python builds it too: compressible but not trivially.
    static let message: [UInt8] = (0..<50_000).map { UInt8(truncatingIfNeeded: $0 * 7 % 251) } + Array(repeating: 0x61, count: 10_000)
    static let pythonMessage = "bytes(i * 7 % 251 for i in range(50000)) + b'a' * 10000"

    @Test(
        "What Python's gzip and zlib modules compress, the decompressor reads",
        arguments: [
            "gzip.compress(m)",
            "gzip.compress(m, compresslevel=1, mtime=0)",
            "zlib.compress(m, wbits=31)",
            // A header with a file name and a comment (FNAME, FCOMMENT).
            "(lambda b: (gzip.GzipFile(filename='m.bin', mode='wb', fileobj=b).write(m), b)[1])(io.BytesIO()).getvalue()",
        ])
    func readsPython(expression: String) async throws {
        let script = "import gzip, io, sys, zlib\nm = \(Self.pythonMessage)\nsys.stdout.buffer.write(\(expression))"
        let compressed = try await Self.python(script)
        #expect(compressed.count < Self.message.count / 2)
        let decompressed = try GRPCGzipDecompressor().decompress(compressed, maximumSize: Self.message.count)
        #expect(decompressed == Self.message)
    }

    @Test("What the compressor writes, Python's gzip module reads", arguments: [0, 1, 1000, 60_000])
    func pythonReads(count: Int) async throws {
        let message = Array(Self.message.prefix(count))
        let compressed = GRPCGzipCompressor().compress(message)
        #expect(compressed.prefix(2) == [0x1F, 0x8B])
        let decompressed = try await Self.python("import gzip, sys\nsys.stdout.buffer.write(gzip.decompress(sys.stdin.buffer.read()))", input: compressed)
        #expect(decompressed == message)
    }

    @Test("One compressor and one decompressor serve many messages, each its own gzip stream")
    func reuse() throws {
        let compressor = GRPCGzipCompressor()
        let decompressor = GRPCGzipDecompressor()
        for count in [10, 0, 5000, 1, 60_000] {
            let message = Array(Self.message.suffix(count))
            let compressed = compressor.compress(message)
            #expect(try decompressor.decompress(compressed, maximumSize: count) == message)
        }
    }

    @Test("A message of exactly the maximum inflates; one byte more fails RESOURCE_EXHAUSTED")
    func limit() throws {
        let compressed = GRPCGzipCompressor().compress(Self.message)
        #expect(try GRPCGzipDecompressor().decompress(compressed, maximumSize: Self.message.count) == Self.message)
        expectTransportError(.resourceExhausted, .frameTooLarge, mentioning: ["\(Self.message.count - 1)"]) { () throws(TransportError) in
            _ = try GRPCGzipDecompressor().decompress(compressed, maximumSize: Self.message.count - 1)
        }
    }

    @Test("A gzip bomb (256 MiB of zeros in 256 KB) fails RESOURCE_EXHAUSTED at the maximum, in a message and alone")
    func bomb() async throws {
        let bomb = try await Self.python(
            "import sys, zlib\nc = zlib.compressobj(9, zlib.DEFLATED, 31)\nz = bytes(1 << 20)\n"
                + "sys.stdout.buffer.write(b''.join([c.compress(z) for _ in range(256)] + [c.flush()]))")
        #expect(bomb.count < 300_000)
        let maximum = 4 * 1024 * 1024
        expectTransportError(.resourceExhausted, .frameTooLarge, mentioning: ["maximum message size"]) { () throws(TransportError) in
            _ = try GRPCGzipDecompressor().decompress(bomb, maximumSize: maximum)
        }
        var deframer = GRPCMessageDeframer(maximumMessageSize: maximum, decompressor: GRPCGzipDecompressor())
        deframer.append(GRPCMessageFramer.withPrefix(count: bomb.count, compressed: true) { Array($0) } + bomb)
        expectTransportError(.resourceExhausted, .frameTooLarge, mentioning: ["gzip"]) { () throws(TransportError) in
            _ = try deframer.next()
        }
    }

    @Test("Truncated, corrupt or trailing bytes fail INTERNAL")
    func corrupt() throws {
        let compressed = GRPCGzipCompressor().compress(Self.message)
        let cases: [([UInt8], String)] = [
            (Array(compressed.dropLast(10)), "truncated"),
            ([], "truncated"),
            (compressed + [0], "follow"),
            (Array(compressed.prefix(20)) + Array(repeating: 0xFF, count: 50), "corrupt"),
            (Array("not gzip at all".utf8), "corrupt"),
        ]
        for (bytes, word) in cases {
            expectTransportError(.internal, .protocolViolation, mentioning: [word]) { () throws(TransportError) in
                _ = try GRPCGzipDecompressor().decompress(bytes, maximumSize: 1 << 20)
            }
        }
    }

    @Test("Encoding names and accept lists")
    func names() {
        #expect(GRPCEncoding(name: Array("gzip".utf8)) == .gzip)
        #expect(GRPCEncoding(name: Array("identity".utf8)) == .identity)
        #expect(GRPCEncoding(name: Array("deflate".utf8)) == nil)
        #expect(GRPCEncoding(name: Array("GZIP".utf8)) == nil)
        #expect(GRPCEncoding.acceptEncodingValue([.gzip, .identity]) == Array("gzip,identity".utf8))
        #expect(
            GRPCEncoding.names(inAcceptEncoding: [Array("gzip, deflate".utf8), Array(" identity ,,snappy".utf8)])
                == ["gzip", "deflate", "identity", "snappy"].map { Array($0.utf8) })
    }
}
