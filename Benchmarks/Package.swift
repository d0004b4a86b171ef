// swift-tools-version: 6.1
//
// Switchyard's benchmarks: their own package, so that the peers they compare against
// (SwiftNIO) and the benchmark tooling (ordo-one/benchmark) never become dependencies of
// the library. See README.md; `./run` (servers under load) and `./check-thresholds`
// (microbenchmarks against checked-in thresholds) are the entry points.

import PackageDescription

let package = Package(
    name: "switchyard-benchmarks",
    dependencies: [
        // The library itself, by path: its echo-server and echo-client are built from here
        // too, so one build covers every Swift server under test.
        .package(name: "switchyard", path: ".."),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        // NIOSSL: the TLS peer of Benchmarks/tls (nio-tls-echo-server).
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
        .package(url: "https://github.com/ordo-one/benchmark", from: "1.38.1", traits: ["MallocInterposer"]),
    ],
    targets: [
        // The SwiftNIO peer: NIO's own EchoServer example, one event loop thread.
        .executableTarget(
            name: "nio-echo-server",
            dependencies: [
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            path: "Servers/nio-echo-server"
        ),
        // The SwiftNIO TLS peer: the same server with NIOSSL's handler first (Benchmarks/tls).
        .executableTarget(
            name: "nio-tls-echo-server",
            dependencies: [
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ],
            path: "Servers/nio-tls-echo-server"
        ),
        // Switchyard's gRPC echo server for grpc/run: a CallServer on the handler face,
        // plaintext HTTP/2 (the `switchyard` row of grpc/README.md's table).
        .executableTarget(
            name: "switchyard-grpc-echo",
            dependencies: [
                .product(name: "Switchyard", package: "switchyard"),
                .product(name: "SwitchyardCalls", package: "switchyard"),
                .product(name: "SwitchyardBackends", package: "switchyard"),
            ],
            path: "Servers/switchyard-grpc-echo"
        ),
        // Not a server: the resident-memory floor of any Swift program (see its header).
        .executableTarget(name: "swift-floor", path: "Servers/swift-floor"),
        // Connection churn: waves of connections opened, echoed and closed on each
        // backend, with descriptors, libuv handles and RSS after each wave (./churn).
        .executableTarget(
            name: "churn",
            dependencies: [
                .product(name: "Switchyard", package: "switchyard"),
                .product(name: "SwitchyardBackends", package: "switchyard"),
                .product(name: "SwitchyardUV", package: "switchyard"),
            ],
            path: "Drivers/churn"
        ),
        // The soak: mixed load under faults across backends, in its own network
        // namespaces, for minutes (soak/soak; root; not in CI).
        .executableTarget(
            name: "soak",
            dependencies: [
                .product(name: "Switchyard", package: "switchyard"),
                .product(name: "SwitchyardCalls", package: "switchyard"),
                .product(name: "SwitchyardBackends", package: "switchyard"),
                .product(name: "SwitchyardNetlink", package: "switchyard"),
            ],
            path: "Drivers/soak"
        ),
        // Calls over a link with a 20 ms round trip (rtt/run): the server and the client
        // that times the first call and the ones after it, plaintext and TLS.
        .executableTarget(
            name: "rtt-probe",
            dependencies: [
                .product(name: "Switchyard", package: "switchyard"),
                .product(name: "SwitchyardCalls", package: "switchyard"),
                .product(name: "SwitchyardBackends", package: "switchyard"),
                .product(name: "SwitchyardTLS", package: "switchyard"),
            ],
            path: "rtt/probe"
        ),
        // Microbenchmarks of the hot pieces, checked against Thresholds/ by ./check-thresholds.
        .executableTarget(
            name: "SwitchyardMicro",
            dependencies: [
                .product(name: "Switchyard", package: "switchyard"),
                .product(name: "SwitchyardCalls", package: "switchyard"),
                .product(name: "SwitchyardBSD", package: "switchyard"),
                .product(name: "Benchmark", package: "benchmark"),
            ],
            path: "Benchmarks/SwitchyardMicro",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
    ],
    swiftLanguageModes: [.v6]
)
