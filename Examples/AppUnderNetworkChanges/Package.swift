// swift-tools-version: 6.1
//
// An app's network client tested as an app's author tests one: `NoteSync`, a client that
// sends notes to its server over a `CallChannel` and sends a note again when the network
// took its call away, and its unit tests, which run it across a Wi-Fi to cellular switch
// and a stalled path on a simulated network, in virtual time, over a thousand seeds.
// It depends on Switchyard's public products only: the core (`Switchyard`), the calls
// layer (`SwitchyardCalls`) and, for the tests, the simulated network
// (`SwitchyardSimulation`). No socket, no root, no libuv1-dev, no libssl-dev.

import PackageDescription

let strict: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "switchyard-app-under-network-changes",
    products: [
        .library(name: "NoteSync", targets: ["NoteSync"])
    ],
    dependencies: [
        // No traits: nothing here needs libuv1-dev or libssl-dev.
        .package(name: "switchyard", path: "../..", traits: [])
    ],
    targets: [
        .target(
            name: "NoteSync",
            dependencies: [
                .product(name: "Switchyard", package: "switchyard"),
                .product(name: "SwitchyardCalls", package: "switchyard"),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "NoteSyncTests",
            dependencies: [
                "NoteSync",
                .product(name: "Switchyard", package: "switchyard"),
                .product(name: "SwitchyardCalls", package: "switchyard"),
                .product(name: "SwitchyardSimulation", package: "switchyard"),
            ],
            swiftSettings: strict
        ),
    ],
    swiftLanguageModes: [.v6]
)
