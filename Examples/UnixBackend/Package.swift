// swift-tools-version: 6.1
//
// A Switchyard backend written as an outside author writes one: Unix-domain stream
// sockets for local inter-process links, registered as `unix`. It depends on
// Switchyard's public products only: the core (`Switchyard`), the backend toolkit
// (`SwitchyardBackendKit`), the loader for its backend library
// (`SwitchyardBackendLoader`) and, for its tests, the conformance kit
// (`SwitchyardConformance`).

import PackageDescription

let strict: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "switchyard-unix",
    // doc-block begin (the guide to writing a backend shows this: SwitchyardConformance.docc)
    products: [
        .library(name: "SwitchyardUnix", targets: ["SwitchyardUnix"]),
        // The backend as a shared library for hosts that load backends at run time
        // (`echo-server --backend-library .build/debug/libSwitchyardUnixBackend.so`).
        .library(name: "SwitchyardUnixBackend", type: .dynamic, targets: ["SwitchyardUnixBackend"]),
    ],
    dependencies: [
        // Without the LibUV trait: nothing here needs libuv1-dev. TLS stays on for the
        // kit's TLS pairs (`swift package conformance --pair unix+tls:unix+tls`), which alone
        // need libssl-dev; a plaintext run builds nothing of OpenSSL.
        .package(name: "switchyard", path: "../..", traits: ["TLS"]),
    ],
    targets: [
        // epoll and eventfd, which Glibc's Swift module does not carry.
        .target(name: "CUnixEpoll"),
        .target(
            name: "SwitchyardUnix",
            dependencies: [
                "CUnixEpoll",
                .product(name: "Switchyard", package: "switchyard"),
                .product(name: "SwitchyardBackendKit", package: "switchyard"),
            ],
            swiftSettings: strict
        ),
        // The library's one entry point. Linked as a backend library should be: with
        // -Bsymbolic its own C symbols bind to its own copy whatever the host exports.
        .target(
            name: "SwitchyardUnixBackend",
            dependencies: [
                "SwitchyardUnix",
                .product(name: "SwitchyardBackendLoader", package: "switchyard"),
            ],
            swiftSettings: strict,
            linkerSettings: [.unsafeFlags(["-Xlinker", "-Bsymbolic"])]
        ),
        .testTarget(
            name: "SwitchyardUnixTests",
            dependencies: [
                "SwitchyardUnix",
                .product(name: "Switchyard", package: "switchyard"),
                .product(name: "SwitchyardConformance", package: "switchyard"),
                .product(name: "SwitchyardBackendLoader", package: "switchyard"),
            ],
            swiftSettings: strict
        ),
    ],
    // doc-block end
    swiftLanguageModes: [.v6]
)
