// swift-tools-version: 6.1
//
// A program that wants the core and the bsd backend only: Switchyard with its default
// traits off (no LibUV, no TLS). scripts/test builds and runs it where libuv1-dev and
// libssl-dev are hidden (scripts/without-optional-deps) and checks with ldd that it links
// neither libuv nor OpenSSL. Its program is the README's first example.

import PackageDescription

let package = Package(
    name: "core-and-bsd",
    dependencies: [
        .package(name: "switchyard", path: "../../..", traits: []),
    ],
    targets: [
        .executableTarget(
            name: "core-and-bsd",
            dependencies: [
                .product(name: "Switchyard", package: "switchyard"),
                .product(name: "SwitchyardBackends", package: "switchyard"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
