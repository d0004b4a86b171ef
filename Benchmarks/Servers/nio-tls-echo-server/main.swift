// The SwiftNIO + NIOSSL peer for Benchmarks/tls: the plain nio-echo-server (NIO's own
// EchoServer example: BackPressureHandler, write on read, flush on channelReadComplete)
// with NIOSSL's server handler first in each child pipeline, as NIOSSL's own
// NIOTLSServer example does it. One event loop thread unless told otherwise.
// NIOSSL's defaults otherwise (TLS 1.2 minimum, so 1.3 is negotiated with a 1.3 client).
//
//     nio-tls-echo-server CERT.pem KEY.pem [PORT [THREADS]]      (PORT 0 picks one)
//     prints "nio-tls-echo-server: listening on PORT (threads N)"

import NIOCore
import NIOPosix
import NIOSSL

#if canImport(Glibc)
import Glibc
#endif

private final class EchoHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        context.write(data, promise: nil)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        context.flush()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}

let arguments = CommandLine.arguments
guard arguments.count >= 3 else {
    print("usage: nio-tls-echo-server CERT.pem KEY.pem [PORT [THREADS]]")
    exit(2)
}
let port = arguments.count > 3 ? Int(arguments[3]) ?? 0 : 0
let threads = arguments.count > 4 ? Int(arguments[4]) ?? 1 : 1

let configuration = TLSConfiguration.makeServerConfiguration(
    certificateChain: try NIOSSLCertificate.fromPEMFile(arguments[1]).map { .certificate($0) },
    privateKey: .privateKey(try NIOSSLPrivateKey(file: arguments[2], format: .pem))
)
let sslContext = try NIOSSLContext(configuration: configuration)

let group = MultiThreadedEventLoopGroup(numberOfThreads: threads)
let bootstrap = ServerBootstrap(group: group)
    .serverChannelOption(.backlog, value: 4096)
    .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
    .childChannelInitializer { channel in
        channel.eventLoop.makeCompletedFuture {
            try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: sslContext))
            try channel.pipeline.syncOperations.addHandler(BackPressureHandler())
            try channel.pipeline.syncOperations.addHandler(EchoHandler())
        }
    }
    .childChannelOption(.socketOption(.so_reuseaddr), value: 1)
    .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
    .childChannelOption(.maxMessagesPerRead, value: 16)
    .childChannelOption(.recvAllocator, value: AdaptiveRecvByteBufferAllocator())

let channel = try bootstrap.bind(host: "127.0.0.1", port: port).wait()
print("nio-tls-echo-server: listening on \(channel.localAddress?.port ?? port) (threads \(threads))")
fflush(nil)
try channel.closeFuture.wait()
try group.syncShutdownGracefully()
