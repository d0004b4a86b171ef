// grpc-swift-bench: one GRPCCore echo service and one GRPCCore load driver, written once,
// on either of two transports: grpc-swift-nio-transport's HTTP/2 transport or
// SwitchyardGRPC's on a Switchyard backend (bsd or libuv). Benchmarks/grpc-swift/run
// starts it as the server and as the client in every pairing. See BenchOptions for the
// command line.
//
// `serve` prints `listening on PORT` once bound and serves until it is killed. `load`
// drives the load, checks every echo and prints one line of JSON (LoadResult); it exits 1
// when a call fails or an echo differs, 2 on a bad command line.

import GRPCCore
import GRPCEchoLoad
import GRPCEchoService
import GRPCNIOTransportHTTP2Posix
import NIOPosix
import Switchyard
import SwitchyardBackends
import SwitchyardGRPC

#if canImport(Glibc)
    import Glibc
#endif

let options: BenchOptions
do {
    options = try BenchOptions(parsing: Array(CommandLine.arguments.dropFirst()))
} catch {
    LineOutput.standardError.write(
        "grpc-swift-bench: \(error)\nusage: grpc-swift-bench serve|load --transport nio|switchyard [--backend bsd|libuv] ...")
    exit(2)
}

/// A Switchyard backend with one event loop thread, as NIO's side has.
func switchyardBackend() throws -> any Transport {
    try Backends.makeTransport(named: options.backend, configuration: TransportConfiguration(eventLoopCount: 1))
}

do {
    switch (options.role, options.transport) {
    case (.serve, .nio):
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let transport = HTTP2ServerTransport.Posix(
            address: .ipv4(host: options.host, port: options.port), transportSecurity: .plaintext, eventLoopGroup: group)
        try await EchoServing.serve(on: transport) { try await transport.listeningAddress.ipv4?.port ?? options.port }
    case (.serve, .switchyard):
        let backend = try switchyardBackend()
        let transport = SwitchyardServerTransport.switchyard(
            address: Endpoint(host: options.host, port: options.port), transport: backend)
        // The backend must live as long as the server listens on it.
        try await EchoServing.serve(on: transport) { try await transport.listeningAddress.port }
        withExtendedLifetime(backend) {}
    case (.load, .nio):
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let transport = try HTTP2ClientTransport.Posix(
            target: .ipv4(address: options.host, port: options.port), transportSecurity: .plaintext, eventLoopGroup: group)
        try await EchoServing.load(over: transport, options: options)
    case (.load, .switchyard):
        let backend = try switchyardBackend()
        let transport = SwitchyardClientTransport.switchyard(
            target: Endpoint(host: options.host, port: options.port), transport: backend)
        do {
            try await EchoServing.load(over: transport, options: options)
        } catch {
            await backend.shutdownNow()
            throw error
        }
        await backend.shutdownNow()
    }
} catch {
    LineOutput.standardError.write("grpc-swift-bench: \(error)")
    exit(1)
}
