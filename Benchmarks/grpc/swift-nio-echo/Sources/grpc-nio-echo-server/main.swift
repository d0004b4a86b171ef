// grpc-nio-echo-server: the grpc-swift 2 peer of the gRPC benchmark. Serves
// /switchyard.bench.Echo/Unary and /switchyard.bench.Echo/Stream (raw bytes, echoed) over
// plaintext HTTP/2 (h2c) on HTTP2ServerTransport.Posix, prints `listening on PORT` once
// bound, and runs until it is killed. `--executor nio` runs the handlers on the event loops
// (NIO's loops as Swift's global executor) instead of Swift's default pool.

import GRPCCore
import GRPCEchoService
import GRPCNIOTransportHTTP2Posix
import NIOCore
import NIOPosix

#if canImport(Glibc)
    import Glibc
#endif

let options: ServerOptions
do {
    options = try ServerOptions(parsing: Array(CommandLine.arguments.dropFirst()))
} catch {
    LineOutput.standardError.write("grpc-nio-echo-server: \(error)\nusage: grpc-nio-echo-server [--host H] [--port P] [--event-loops N] [--executor default|nio]")
    exit(2)
}

let group: MultiThreadedEventLoopGroup
switch options.executor {
case .default:
    group = MultiThreadedEventLoopGroup(numberOfThreads: options.eventLoops)
case .nio:
    NIOSingletons.groupLoopCountSuggestion = options.eventLoops
    guard NIOSingletons.unsafeTryInstallSingletonPosixEventLoopGroupAsConcurrencyGlobalExecutor() else {
        LineOutput.standardError.write("grpc-nio-echo-server: cannot install the event loops as the global executor")
        exit(1)
    }
    group = MultiThreadedEventLoopGroup.singleton
}
let transport = HTTP2ServerTransport.Posix(
    address: .ipv4(host: options.host, port: options.port),
    transportSecurity: .plaintext,
    eventLoopGroup: group
)
let server = GRPCServer(transport: transport, services: [EchoService()])
try await withThrowingDiscardingTaskGroup { tasks in
    tasks.addTask { try await server.serve() }
    let address = try await transport.listeningAddress
    LineOutput.standardOutput.write("listening on \(address.ipv4?.port ?? options.port)")
}
