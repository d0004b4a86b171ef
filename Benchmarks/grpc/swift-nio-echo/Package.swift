// swift-tools-version: 6.1
//
// The grpc-swift 2 peer of Switchyard's gRPC benchmark (Benchmarks/grpc): an echo server
// and a load-driving client on GRPCCore over grpc-swift-nio-transport's HTTP/2 transport,
// without protobuf (messages are raw bytes, passed through). Its own package so that
// grpc-swift-nio-transport never becomes a dependency of the library or of the other
// benchmarks. It also builds grpc-swift-bench (Benchmarks/grpc-swift): the same service
// and load driver on grpc-swift-nio-transport and on SwitchyardGRPC (the library, by path).

import PackageDescription

let strict: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "grpc-nio-echo",
    dependencies: [
        .package(url: "https://github.com/grpc/grpc-swift-2.git", exact: "2.4.3"),
        .package(url: "https://github.com/grpc/grpc-swift-nio-transport.git", exact: "2.9.2"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(name: "switchyard", path: "../../.."),
    ],
    targets: [
        // The service: the two methods, the bytes message and its pass-through coders.
        .target(
            name: "GRPCEchoService",
            dependencies: [
                .product(name: "GRPCCore", package: "grpc-swift-2")
            ],
            swiftSettings: strict
        ),
        // The load driver: unary calls or bidirectional streams in flight for a duration,
        // every echo checked, the result as one line of JSON (used by both clients below).
        .target(
            name: "GRPCEchoLoad",
            dependencies: [
                "GRPCEchoService",
                .product(name: "GRPCCore", package: "grpc-swift-2"),
            ],
            swiftSettings: strict
        ),
        // `grpc-nio-echo-server --port P [--event-loops N] [--executor default|nio]`: prints
        // `listening on PORT`.
        .executableTarget(
            name: "grpc-nio-echo-server",
            dependencies: [
                "GRPCEchoService",
                .product(name: "GRPCCore", package: "grpc-swift-2"),
                .product(name: "GRPCNIOTransportHTTP2Posix", package: "grpc-swift-nio-transport"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: strict
        ),
        // `grpc-nio-echo-client --target host:port --method unary|stream ...`: load, JSON out.
        .executableTarget(
            name: "grpc-nio-echo-client",
            dependencies: [
                "GRPCEchoService",
                "GRPCEchoLoad",
                .product(name: "GRPCCore", package: "grpc-swift-2"),
                .product(name: "GRPCNIOTransportHTTP2Posix", package: "grpc-swift-nio-transport"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: strict
        ),
        // `grpc-swift-bench serve|load --transport nio|switchyard [--backend bsd|libuv] ...`:
        // the service and the load driver above on either transport (Benchmarks/grpc-swift).
        .executableTarget(
            name: "grpc-swift-bench",
            dependencies: [
                "GRPCEchoService",
                "GRPCEchoLoad",
                .product(name: "GRPCCore", package: "grpc-swift-2"),
                .product(name: "GRPCNIOTransportHTTP2Posix", package: "grpc-swift-nio-transport"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Switchyard", package: "switchyard"),
                .product(name: "SwitchyardBackends", package: "switchyard"),
                .product(name: "SwitchyardGRPC", package: "switchyard"),
            ],
            swiftSettings: strict
        ),
    ],
    swiftLanguageModes: [.v6]
)
