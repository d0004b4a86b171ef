// The SwiftNIO peer for Benchmarks/run: a TCP echo server written the way NIO's own
// example does it (swift-nio Sources/NIOEchoServer/main.swift at 2.101.2): a
// ServerBootstrap whose child channels carry NIO's BackPressureHandler and an
// EchoHandler that writes back what it reads and flushes on channelReadComplete.
// Differences from the example: the address is 127.0.0.1, the number of event loop
// threads is an option (default 1, as every server in Benchmarks/run gets), and it
// prints a line the harness waits for.
//
//     nio-echo-server [PORT [THREADS]]      (PORT 0 picks one)
//     prints "nio-echo-server: listening on PORT (threads N)"

import NIOCore
import NIOPosix

#if canImport(Glibc)
import Glibc
#endif

private final class EchoHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        // No promise: nothing to do on completion, and none saves an allocation.
        context.write(data, promise: nil)
    }

    // Flush once per read burst: gathering writes if several buffers are pending.
    func channelReadComplete(context: ChannelHandlerContext) {
        context.flush()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}

let arguments = CommandLine.arguments
let port = arguments.count > 1 ? Int(arguments[1]) ?? 0 : 0
let threads = arguments.count > 2 ? Int(arguments[2]) ?? 1 : 1

let group = MultiThreadedEventLoopGroup(numberOfThreads: threads)
let bootstrap = ServerBootstrap(group: group)
    .serverChannelOption(.backlog, value: 4096)
    .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
    .childChannelInitializer { channel in
        // Don't read faster than we can write: NIO's BackPressureHandler, as in the example.
        channel.eventLoop.makeCompletedFuture {
            try channel.pipeline.syncOperations.addHandler(BackPressureHandler())
            try channel.pipeline.syncOperations.addHandler(EchoHandler())
        }
    }
    .childChannelOption(.socketOption(.so_reuseaddr), value: 1)
    .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
    .childChannelOption(.maxMessagesPerRead, value: 16)
    .childChannelOption(.recvAllocator, value: AdaptiveRecvByteBufferAllocator())

let channel = try bootstrap.bind(host: "127.0.0.1", port: port).wait()
print("nio-echo-server: listening on \(channel.localAddress?.port ?? port) (threads \(threads))")
fflush(nil)
try channel.closeFuture.wait()
try group.syncShutdownGracefully()
