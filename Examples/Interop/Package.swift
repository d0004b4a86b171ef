// swift-tools-version: 6.1
//
// gRPC's interoperability test service for Switchyard: the message types of
// `grpc.testing.TestService` (generated once from Protos/ by scripts/generate and
// committed), the interop tools on Switchyard's calls (interop-server, interop-client),
// and a grpcio peer (peers/grpcio_interop.py) that they are tested against
// (scripts/interop-matrix). The same service and cases on grpc-swift 2's GRPCCore
// (InteropServices: its generated stubs; InteropGRPCCore: the service and the cases,
// over any GRPCCore transport) run in the same tools under --grpc-swift, on
// grpc-swift-nio-transport's HTTP/2 Posix transport as the reference peer.

import PackageDescription

let strict: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "switchyard-interop",
    products: [
        .executable(name: "interop-server", targets: ["interop-server"]),
        .executable(name: "interop-client", targets: ["interop-client"]),
    ],
    dependencies: [
        .package(name: "switchyard", path: "../.."),
        .package(url: "https://github.com/apple/swift-protobuf", exact: "1.39.0"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/grpc/grpc-swift-2", exact: "2.4.3"),
        .package(url: "https://github.com/grpc/grpc-swift-protobuf", exact: "2.4.1"),
        .package(url: "https://github.com/grpc/grpc-swift-nio-transport", exact: "2.9.2"),
    ],
    targets: [
        // Generated code only: scripts/generate rewrites every file here.
        .target(
            name: "InteropMessages",
            dependencies: [
                .product(name: "SwiftProtobuf", package: "swift-protobuf")
            ],
            swiftSettings: strict
        ),
        // Generated code only: scripts/generate rewrites every file here. GRPCCore's
        // service code for test.proto (`Grpc_Testing_TestService`: its method descriptors,
        // server protocols and client), by protoc-gen-grpc-swift-2.
        .target(
            name: "InteropServices",
            dependencies: [
                "InteropMessages",
                .product(name: "GRPCCore", package: "grpc-swift-2"),
                .product(name: "GRPCProtobuf", package: "grpc-swift-protobuf"),
            ],
            swiftSettings: strict
        ),
        // The interop test service and the 14 client cases on GRPCCore (the generated
        // stubs), generic over the transport, and the transports the tools pick with
        // --grpc-swift-transport.
        .target(
            name: "InteropGRPCCore",
            dependencies: [
                "InteropMessages",
                "InteropServices",
                "InteropTesting",
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
                .product(name: "Switchyard", package: "switchyard"),
                .product(name: "GRPCCore", package: "grpc-swift-2"),
                .product(name: "GRPCNIOTransportHTTP2Posix", package: "grpc-swift-nio-transport"),
                .product(name: "SwitchyardGRPC", package: "switchyard"),
            ],
            swiftSettings: strict
        ),
        // The interop test service and the test cases on Switchyard's public calls API
        // (`CallServer`, `CallChannel`, `AsyncCall`), with the gRPC status codes mapped
        // onto `CallStatus`, and the transports the tools run on (a backend from the
        // registry, TLS with the interop certificates). `package` access: the tools and
        // the tests are its only users.
        .target(
            name: "InteropTesting",
            dependencies: [
                "InteropMessages",
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
                .product(name: "Switchyard", package: "switchyard"),
                .product(name: "SwitchyardCalls", package: "switchyard"),
                .product(name: "SwitchyardBackends", package: "switchyard"),
                .product(name: "SwitchyardTLS", package: "switchyard"),
            ],
            swiftSettings: strict
        ),
        .executableTarget(
            name: "interop-server",
            dependencies: [
                "InteropTesting",
                "InteropGRPCCore",
                .product(name: "Switchyard", package: "switchyard"),
                .product(name: "SwitchyardCalls", package: "switchyard"),
                .product(name: "SwitchyardServiceLifecycle", package: "switchyard"),
                .product(name: "SwitchyardTLS", package: "switchyard"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        .executableTarget(
            name: "interop-client",
            dependencies: [
                "InteropTesting",
                "InteropGRPCCore",
                .product(name: "Switchyard", package: "switchyard"),
                .product(name: "SwitchyardCalls", package: "switchyard"),
                .product(name: "SwitchyardTLS", package: "switchyard"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "InteropMessagesTests",
            dependencies: [
                "InteropMessages",
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "InteropGRPCCoreTests",
            dependencies: [
                "InteropGRPCCore",
                "InteropTesting",
                "InteropMessages",
                "InteropServices",
                .product(name: "GRPCCore", package: "grpc-swift-2"),
                .product(name: "Switchyard", package: "switchyard"),
                .product(name: "SwitchyardCalls", package: "switchyard"),
                // gzip against grpc-swift-nio-transport: its client and server with
                // compression on, SwitchyardGRPC on the other side.
                .product(name: "SwitchyardGRPC", package: "switchyard"),
                .product(name: "GRPCNIOTransportHTTP2Posix", package: "grpc-swift-nio-transport"),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "InteropTestingTests",
            dependencies: [
                "InteropTesting",
                .product(name: "Switchyard", package: "switchyard"),
                .product(name: "SwitchyardCalls", package: "switchyard"),
            ],
            swiftSettings: strict
        ),
    ],
    swiftLanguageModes: [.v6]
)
