// swift-tools-version: 6.1
//
// A Switchyard backend written as an outside author writes one: Unix-domain stream
// sockets for local inter-process links, registered as `unix`. It depends on
// Switchyard's public products only: the core (`Switchyard`), the backend toolkit
// (`SwitchyardBackendKit`) and, for its tests, the conformance kit
// (`SwitchyardConformance`).

import PackageDescription

let strict: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "switchyard-unix",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "SwitchyardUnix", targets: ["SwitchyardUnix"]),
    ],
    dependencies: [
        .package(name: "switchyard", path: "../.."),
    ],
    targets: [
        // epoll, which Glibc's Swift module does not bring in (the toolkit's epoll
        // wrappers take the C `epoll_event`, which no Switchyard product declares).
        .target(name: "CSwitchyardUnix"),
        .target(
            name: "SwitchyardUnix",
            dependencies: [
                "CSwitchyardUnix",
                .product(name: "Switchyard", package: "switchyard"),
                .product(name: "SwitchyardBackendKit", package: "switchyard"),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "SwitchyardUnixTests",
            dependencies: [
                "SwitchyardUnix",
                .product(name: "Switchyard", package: "switchyard"),
                .product(name: "SwitchyardConformance", package: "switchyard"),
            ],
            swiftSettings: strict
        ),
    ],
    swiftLanguageModes: [.v6]
)
