// grpc-nio-echo-client: drives load against any server of /switchyard.bench.Echo over one
// HTTP/2 connection (grpc-swift 2's GRPCClient on HTTP2ClientTransport.Posix, plaintext)
// and prints one line of JSON. Exits 1 if a call fails or an echo differs, 2 on a bad
// command line. See ClientOptions for the arguments.

import GRPCCore
import GRPCEchoLoad
import GRPCEchoService
import GRPCNIOTransportHTTP2Posix
import NIOPosix

#if canImport(Glibc)
    import Glibc
#endif

let options: ClientOptions
do {
    options = try ClientOptions(parsing: Array(CommandLine.arguments.dropFirst()))
} catch {
    LineOutput.standardError.write("grpc-nio-echo-client: \(error)")
    exit(2)
}

let group = MultiThreadedEventLoopGroup(numberOfThreads: options.eventLoops)
do {
    let transport = try HTTP2ClientTransport.Posix(
        target: .ipv4(address: options.host, port: options.port),
        transportSecurity: .plaintext,
        eventLoopGroup: group
    )
    let pattern = (0..<options.messageSize).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
    let result = try await withGRPCClient(transport: transport) { client in
        let driver = LoadDriver(client: client, payload: EchoMessage(pattern))
        switch options.method {
        case .unary:
            if options.warmup > 0 {
                _ = try await driver.unary(concurrency: options.concurrency, seconds: options.warmup)
            }
            return try await driver.unary(concurrency: options.concurrency, seconds: options.duration)
        case .stream:
            if options.warmup > 0 {
                _ = try await driver.stream(concurrency: options.concurrency, seconds: options.warmup)
            }
            return try await driver.stream(concurrency: options.concurrency, seconds: options.duration)
        }
    }
    LineOutput.standardOutput.write(result.json(method: options.method.rawValue, concurrency: options.concurrency, messageSize: options.messageSize))
} catch {
    LineOutput.standardError.write("grpc-nio-echo-client: \(error)")
    exit(1)
}
