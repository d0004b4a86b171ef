// swift-tools-version: 6.1
//
// One file that imports every library module of Switchyard beside SwiftNIO's (NIOCore,
// NIOPosix) and GRPCCore, and names each public type of Switchyard's unqualified: it
// compiles only while no name of ours collides with theirs (or with another of ours).
// scripts/check-public-names writes that file (Sources/public-names/Names.swift, not
// committed) from the sources and builds this package.

import PackageDescription

let package = Package(
    name: "public-names",
    dependencies: [
        .package(name: "switchyard", path: "../../.."),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/grpc/grpc-swift-2", from: "2.4.3"),
    ],
    targets: [
        .target(
            name: "public-names",
            dependencies: [
                .product(name: "Switchyard", package: "switchyard"),
                .product(name: "SwitchyardCalls", package: "switchyard"),
                .product(name: "SwitchyardReachability", package: "switchyard"),
                .product(name: "SwitchyardBackendKit", package: "switchyard"),
                .product(name: "SwitchyardBackendLoader", package: "switchyard"),
                .product(name: "SwitchyardBSD", package: "switchyard"),
                .product(name: "SwitchyardMemory", package: "switchyard"),
                .product(name: "SwitchyardSimulation", package: "switchyard"),
                .product(name: "SwitchyardUV", package: "switchyard"),
                .product(name: "SwitchyardBackends", package: "switchyard"),
                .product(name: "SwitchyardConformance", package: "switchyard"),
                .product(name: "SwitchyardNetlink", package: "switchyard"),
                .product(name: "SwitchyardTransfer", package: "switchyard"),
                .product(name: "SwitchyardServiceLifecycle", package: "switchyard"),
                .product(name: "SwitchyardTLS", package: "switchyard"),
                .product(name: "SwitchyardGRPC", package: "switchyard"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "GRPCCore", package: "grpc-swift-2"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
