// swift-tools-version: 6.1
//
// gRPC's interoperability test service for Switchyard: the message types of
// `grpc.testing.TestService` (generated once from Protos/ by scripts/generate and
// committed), and a grpcio peer (peers/grpcio_interop.py) that the interop tools are
// tested against.

import PackageDescription

let strict: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "switchyard-interop",
    dependencies: [
        .package(name: "switchyard", path: "../.."),
        .package(url: "https://github.com/apple/swift-protobuf", exact: "1.39.0"),
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
        .testTarget(
            name: "InteropMessagesTests",
            dependencies: [
                "InteropMessages",
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
            ],
            swiftSettings: strict
        ),
    ],
    swiftLanguageModes: [.v6]
)
