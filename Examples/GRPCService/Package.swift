// swift-tools-version: 6.1
//
// A gRPC service on Switchyard: grpc-swift 2's GRPCCore over SwitchyardGRPC's transports
// (`SwitchyardServerTransport`, `SwitchyardClientTransport`), on a backend of Switchyard's
// registry. The echo service of Protos/echo.proto, generated once by scripts/generate and
// committed, a server (grpc-echo-server) and a client (grpc-echo-client).

import PackageDescription

let strict: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "switchyard-grpc-service",
    products: [
        .executable(name: "grpc-echo-server", targets: ["grpc-echo-server"]),
        .executable(name: "grpc-echo-client", targets: ["grpc-echo-client"]),
    ],
    dependencies: [
        .package(name: "switchyard", path: "../.."),
        .package(url: "https://github.com/grpc/grpc-swift-2", exact: "2.4.3"),
        .package(url: "https://github.com/grpc/grpc-swift-protobuf", exact: "2.4.1"),
        .package(url: "https://github.com/apple/swift-protobuf", exact: "1.39.0"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
    ],
    targets: [
        // Generated code only: scripts/generate rewrites every file here.
        .target(
            name: "EchoService",
            dependencies: [
                .product(name: "GRPCCore", package: "grpc-swift-2"),
                .product(name: "GRPCProtobuf", package: "grpc-swift-protobuf"),
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
            ],
            swiftSettings: strict
        ),
        .executableTarget(
            name: "grpc-echo-server",
            dependencies: [
                "EchoService",
                .product(name: "GRPCCore", package: "grpc-swift-2"),
                .product(name: "Switchyard", package: "switchyard"),
                .product(name: "SwitchyardBackends", package: "switchyard"),
                .product(name: "SwitchyardGRPC", package: "switchyard"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: strict
        ),
        .executableTarget(
            name: "grpc-echo-client",
            dependencies: [
                "EchoService",
                .product(name: "GRPCCore", package: "grpc-swift-2"),
                .product(name: "Switchyard", package: "switchyard"),
                .product(name: "SwitchyardBackends", package: "switchyard"),
                .product(name: "SwitchyardGRPC", package: "switchyard"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: strict
        ),
    ],
    swiftLanguageModes: [.v6]
)
