// swift-tools-version: 6.1
//
// Two Switchyard backends written as decorators over the stock `bsd` backend, as an
// outside author writes them: `counted` forwards everything and counts the bytes each
// transport writes and reads; `lossy` is the same decorator, but every write loses its
// last byte and still reports success (a deliberately broken backend: the conformance
// kit must fail it). They depend on Switchyard's public products only: the core
// (`Switchyard`), the stock backend they wrap (`SwitchyardBSD`), the loader for their
// backend libraries (`SwitchyardBackendLoader`) and, for the tests, the conformance kit
// (`SwitchyardConformance`).

import PackageDescription

let strict: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "switchyard-decorators",
    // doc-block begin (the guide to writing a backend shows this: SwitchyardConformance.docc)
    products: [
        .library(name: "SwitchyardCounting", targets: ["SwitchyardCounting"]),
        // One backend per library, so one .dynamic product per backend: a backend library
        // exports one entry point, `switchyard_backend_entry`, which hands over one backend.
        .library(name: "SwitchyardCountedBackend", type: .dynamic, targets: ["SwitchyardCountedBackend"]),
        .library(name: "SwitchyardLossyBackend", type: .dynamic, targets: ["SwitchyardLossyBackend"]),
    ],
    dependencies: [
        // No traits: nothing here needs libuv1-dev or libssl-dev.
        .package(name: "switchyard", path: "../..", traits: []),
    ],
    targets: [
        // Both transports: one decorator over bsd, and the hook each backend plugs into it.
        .target(
            name: "SwitchyardCounting",
            dependencies: [
                .product(name: "Switchyard", package: "switchyard"),
                .product(name: "SwitchyardBSD", package: "switchyard"),
            ],
            swiftSettings: strict
        ),
        // Each library's one entry point, linked with -Bsymbolic so that its own symbols
        // bind to its own copy of Switchyard whatever the host exports.
        .target(
            name: "SwitchyardCountedBackend",
            dependencies: [
                "SwitchyardCounting",
                .product(name: "SwitchyardBackendLoader", package: "switchyard"),
            ],
            swiftSettings: strict,
            linkerSettings: [.unsafeFlags(["-Xlinker", "-Bsymbolic"])]
        ),
        .target(
            name: "SwitchyardLossyBackend",
            dependencies: [
                "SwitchyardCounting",
                .product(name: "SwitchyardBackendLoader", package: "switchyard"),
            ],
            swiftSettings: strict,
            linkerSettings: [.unsafeFlags(["-Xlinker", "-Bsymbolic"])]
        ),
        .testTarget(
            name: "SwitchyardCountingTests",
            dependencies: [
                "SwitchyardCounting",
                .product(name: "Switchyard", package: "switchyard"),
                .product(name: "SwitchyardConformance", package: "switchyard"),
            ],
            swiftSettings: strict
        ),
    ],
    // doc-block end
    swiftLanguageModes: [.v6]
)
