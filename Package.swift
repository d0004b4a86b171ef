// swift-tools-version: 6.1
//
// Switchyard: a transport framework for Swift on Linux whose socket backends are
// plugins, chosen at run time and held to one conformance kit.

import PackageDescription

let strict: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

// echo-server's link on Linux, for its resident size (Benchmarks/README.md, "Memory"):
// lld with packed relative relocations (DT_RELR; lld keeps RELA where glibc is older than
// 2.36), so ld.so reads kilobytes of relocations at start-up, not a megabyte; and no
// dynamic symbol table, which `--static-swift-stdlib` would fill with every symbol
// (`-export-dynamic`) for ld.so to search. A host exports nothing to the backend
// libraries it loads anyway (LoadableBackend's rules).
let echoServerLinking: [LinkerSetting] = [
    .unsafeFlags(
        ["-use-ld=lld", "-Xlinker", "-z", "-Xlinker", "pack-relative-relocs", "-Xlinker", "--no-export-dynamic"],
        .when(platforms: [.linux])
    ),
]

let package = Package(
    name: "switchyard",
    products: [
        .library(name: "Switchyard", targets: ["Switchyard"]),
        .library(name: "SwitchyardCalls", targets: ["SwitchyardCalls"]),
        .library(name: "SwitchyardReachability", targets: ["SwitchyardReachability"]),
        .library(name: "SwitchyardBackendKit", targets: ["SwitchyardBackendKit"]),
        .library(name: "SwitchyardBackendLoader", targets: ["SwitchyardBackendLoader"]),
        .library(name: "SwitchyardBSD", targets: ["SwitchyardBSD"]),
        .library(name: "SwitchyardMemory", targets: ["SwitchyardMemory"]),
        // A deterministic simulated network on a virtual clock, replayable from a seed.
        .library(name: "SwitchyardSimulation", targets: ["SwitchyardSimulation"]),
        .library(name: "SwitchyardUV", targets: ["SwitchyardUV"]),
        .library(name: "SwitchyardBackends", targets: ["SwitchyardBackends"]),
        .library(name: "SwitchyardConformance", targets: ["SwitchyardConformance"]),
        .library(name: "SwitchyardNetlink", targets: ["SwitchyardNetlink"]),
        .library(name: "SwitchyardTransfer", targets: ["SwitchyardTransfer"]),
        .library(name: "SwitchyardServiceLifecycle", targets: ["SwitchyardServiceLifecycle"]),
        // TLS over any backend's connections, on the system OpenSSL 3 (libssl-dev). Only
        // what imports it needs libssl-dev.
        .library(name: "SwitchyardTLS", targets: ["SwitchyardTLS"]),
        // A grpc-swift 2 transport (GRPCCore's ClientTransport and ServerTransport) on the
        // calls engine, over any backend's Transport. The one product that links GRPCCore.
        .library(name: "SwitchyardGRPC", targets: ["SwitchyardGRPC"]),
        // A backend library for the loading tests: bsd exported through the C entry point
        // under the name "bsd-loaded" (Tests/Fixtures/BSDLoaded). Not for use.
        .library(name: "SwitchyardBSDLoadedFixture", type: .dynamic, targets: ["SwitchyardBSDLoadedFixture"]),
        .executable(name: "echo-server", targets: ["echo-server"]),
        .executable(name: "echo-client", targets: ["echo-client"]),
        .executable(name: "transfer-server", targets: ["transfer-server"]),
        .executable(name: "transfer-client", targets: ["transfer-client"]),
        // Runs the conformance kit and prints its report; `swift package conformance` runs it.
        // No OpenSSL: running the kit needs no libssl-dev.
        .executable(name: "switchyard-conformance", targets: ["switchyard-conformance"]),
        // The same runner with the TLS pairs (--tls, --pair bsd+tls:libuv+tls), on the
        // system OpenSSL 3 (libssl-dev); switchyard-conformance runs it when they are asked for.
        .executable(name: "switchyard-conformance-tls", targets: ["switchyard-conformance-tls"]),
        // `swift package conformance`, also in packages that depend on Switchyard.
        .plugin(name: "SwitchyardConformancePlugin", targets: ["conformance"]),
    ],
    // What a user may leave out. Both are on by default; a package that depends on
    // Switchyard with `traits: []` builds and links with neither libuv nor OpenSSL installed
    // (scripts/test checks it in a mount namespace that hides both).
    traits: [
        .trait(
            name: "LibUV",
            description: "The libuv backend in SwitchyardBackends' registry, so in the tools and the conformance runner; needs libuv1-dev."
        ),
        .trait(
            name: "TLS",
            description: "The conformance runner's TLS pairs (switchyard-conformance-tls, which `swift package conformance` builds when TLS pairs are asked for) and the example tools' TLS options; needs libssl-dev. Off, the tools link no OpenSSL (a plaintext server loads neither libssl nor libcrypto)."
        ),
        .default(enabledTraits: ["LibUV", "TLS"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-collections", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-crypto", from: "3.12.3"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        // `swift package generate-documentation` (scripts/docs): the DocC catalogs. A command
        // plugin only: nothing of it is linked into Switchyard.
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
        // echo-client's latency percentiles.
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift", from: "0.2.0"),
        // The tests start child processes (the tools, scripts, helpers) with it.
        .package(url: "https://github.com/swiftlang/swift-subprocess", from: "1.0.2"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        // GRPCCore's transport protocols, for SwitchyardGRPC only: the one product that links
        // it. The core and the calls engine never depend on GRPCCore (they speak gRPC's wire
        // themselves); a user who takes no SwitchyardGRPC builds none of it.
        .package(url: "https://github.com/grpc/grpc-swift-2", from: "2.4.3"),
    ],
    targets: [
        // The core: the contracts (transport, connection, listener, endpoints, errors, the
        // event-loop protocol, connectivity, lifecycle) and the backend registry. No libc, no
        // Foundation (scripts/check-core-imports).
        .target(
            name: "Switchyard",
            dependencies: [
                .product(name: "DequeModule", package: "swift-collections"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ],
            swiftSettings: strict
        ),
        // Channels and calls over any Connection: framing, metadata, flow control, the call
        // server. Kept out of the core: no backend uses them, and every backend library
        // loaded at run time carries its own copy of the core.
        .target(
            name: "SwitchyardCalls",
            dependencies: [
                "Switchyard", "CSwitchyardZlib", "SwitchyardHPACK", "SwitchyardHTTP2",
                .product(name: "DequeModule", package: "swift-collections"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ],
            swiftSettings: strict
        ),
        // The system zlib (Debian: zlib1g-dev), through pkg-config: gRPC's gzip message
        // compression in SwitchyardCalls.
        .systemLibrary(
            name: "CSwitchyardZlib",
            pkgConfig: "zlib",
            providers: [.apt(["zlib1g-dev"])]
        ),
        // SiteReachability: reachable means a real request over a transport succeeded.
        .target(
            name: "SwitchyardReachability",
            dependencies: ["Switchyard"],
            swiftSettings: strict
        ),
        // Linux headers Glibc's module lacks (epoll, eventfd, TCP options).
        .target(name: "CSwitchyardPosix"),
        // XXH3-128, the transfer protocol's fast leaf digest, compiled from the system
        // xxHash's header (libxxhash-dev); nothing is linked at run time.
        .target(name: "CSwitchyardXXHash"),
        // The libc layer: system calls through one helper (EINTR retried, would-block as a
        // value, a typed errno), the errno table, socket addresses, the descriptor's owner,
        // process signals. Not a product: Switchyard's own modules share it (`package`
        // access); the toolkit re-exports the few types a backend author handles.
        .target(
            name: "SwitchyardPosix",
            dependencies: ["Switchyard", "CSwitchyardPosix"],
            swiftSettings: strict
        ),
        // The C interface of a backend library loaded at run time: one versioned table.
        .target(name: "CSwitchyardBackendABI"),
        // The backend toolkit: what every backend's connections, listeners and transports
        // share (the connection contract as a state machine and the connection front on it,
        // descriptor event loops, loop queues, the resource registry and shutdown,
        // observability, stall settings, name resolution, Happy Eyeballs). A product:
        // backends written outside this package build on it too.
        .target(
            name: "SwitchyardBackendKit",
            dependencies: [
                "Switchyard", "SwitchyardPosix", "CSwitchyardPosix",
                .product(name: "DequeModule", package: "swift-collections"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ],
            swiftSettings: strict
        ),
        // Backends loaded at run time: both sides of the one versioned C entry point, a
        // backend library's export (`LoadableBackend.export`) and a host's loading (the
        // registry's `--backend-library`, `SWITCHYARD_BACKEND_PATH`).
        .target(
            name: "SwitchyardBackendLoader",
            dependencies: ["Switchyard", "SwitchyardBackendKit", "CSwitchyardBackendABI"],
            swiftSettings: strict
        ),
        .target(
            name: "SwitchyardBSD",
            dependencies: [
                "Switchyard", "SwitchyardBackendKit", "CSwitchyardPosix",
                .product(name: "HeapModule", package: "swift-collections"),
                "SwitchyardPosix",
            ],
            swiftSettings: strict
        ),
        .target(
            name: "SwitchyardMemory",
            dependencies: [
                "Switchyard", "SwitchyardBackendKit",
                .product(name: "DequeModule", package: "swift-collections"),
            ],
            swiftSettings: strict
        ),
        .target(
            name: "SwitchyardSimulation",
            dependencies: [
                "Switchyard", "SwitchyardBackendKit",
                .product(name: "DequeModule", package: "swift-collections"),
                .product(name: "HeapModule", package: "swift-collections"),
            ],
            swiftSettings: strict
        ),
        // The system libuv (Debian: libuv1-dev), through pkg-config.
        .systemLibrary(
            name: "CLibUV",
            pkgConfig: "libuv",
            providers: [.apt(["libuv1-dev"])]
        ),
        // The epoll guard: the process's own epoll_ctl, so that libuv does not abort on a
        // reclaimed descriptor (see its epoll_guard.c).
        .target(name: "CSwitchyardEpollGuard"),
        .target(
            name: "SwitchyardUV",
            dependencies: [
                "Switchyard", "SwitchyardBackendKit", "CLibUV", "CSwitchyardPosix", "CSwitchyardEpollGuard",
                "SwitchyardPosix",
            ],
            swiftSettings: strict
        ),
        // The umbrella an application imports to pick a backend by name at run time.
        .target(
            name: "SwitchyardBackends",
            dependencies: [
                "Switchyard", "SwitchyardBackendKit", "SwitchyardBSD", "SwitchyardMemory", "SwitchyardSimulation",
                .target(name: "SwitchyardUV", condition: .when(traits: ["LibUV"])),
                "SwitchyardBackendLoader",
            ],
            swiftSettings: strict
        ),
        // The library the loading tests load (see the product). Linked as a backend library
        // should be: -Bsymbolic binds its own symbols to itself even in a host that exports
        // its copies (Swift's are protected anyway; this covers the C shims').
        .target(
            name: "SwitchyardBSDLoadedFixture",
            dependencies: ["SwitchyardBackendKit", "SwitchyardBSD", "SwitchyardBackendLoader"],
            path: "Tests/Fixtures/BSDLoaded",
            swiftSettings: strict,
            linkerSettings: [.unsafeFlags(["-Xlinker", "-Bsymbolic"])]
        ),
        // The Linux connectivity monitor: rtnetlink links, addresses and routes.
        .target(
            name: "SwitchyardNetlink",
            dependencies: [
                "Switchyard", "CSwitchyardPosix",
                .product(name: "Logging", package: "swift-log"),
                "SwitchyardPosix",
            ],
            swiftSettings: strict
        ),
        // Switchyard's long-running parts as swift-service-lifecycle `Service`s (CallServer,
        // the netlink monitor, SiteReachability, LifecycleSignals), and what the tools need
        // to run in a `ServiceGroup` (ShutdownSignals: a second SIGTERM/SIGINT cancels). A
        // module of its own rather than a dependency of the core: ServiceLifecycle brings
        // swift-async-algorithms and UnixSignals (Dispatch, Glibc) into whatever imports it
        // (the core takes only swift-log's and swift-metrics' API packages), and the core is carried
        // by every backend, including each backend library loaded at run time (its own
        // copy). The core keeps the mechanism (CallServer.serve(), beginGracefulShutdown());
        // this module only maps graceful shutdown and cancellation onto it.
        .target(
            name: "SwitchyardServiceLifecycle",
            dependencies: [
                "SwitchyardCalls", "SwitchyardReachability",
                "Switchyard", "SwitchyardBackendKit", "SwitchyardNetlink",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        // Resumable transfers over calls (any backend): the protocol, the sender's
        // `Transfer` and the receiver's `TransferServer`. SHA-256 from swift-crypto. The
        // server is a swift-service-lifecycle `Service` here (an application-level module,
        // unlike the core: see SwitchyardServiceLifecycle).
        .target(
            name: "SwitchyardTransfer",
            dependencies: [
                "SwitchyardCalls", "CSwitchyardXXHash",
                "Switchyard", .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strict
        ),
        // HPACK (RFC 7541), the header compression of HTTP/2: the future HTTP/2 module's
        // HEADERS and CONTINUATION blocks. Our own rather than swift-nio-http2's NIOHPACK:
        // Switchyard's transports hand bytes as UnsafeRawBufferPointer and [UInt8], not
        // NIO ByteBuffers, and a transport module must not pull in SwiftNIO. Standard
        // library only. Not a product yet: its API is `package`, for the HTTP/2 module of
        // this package that will use it.
        .target(
            name: "SwitchyardHPACK",
            swiftSettings: strict
        ),
        // HTTP/2 (RFC 9113) on any Connection: frames and their codec, the connection's
        // state machine (streams, windows, settings, limits against hostile peers) and its
        // driver. Written here rather than taken from swift-nio-http2, which is built on
        // NIO's channel pipeline and ByteBuffer: nothing of SwiftNIO runs under
        // Switchyard's transports. Not a product yet: its API is `package`, for the calls
        // module.
        .target(
            name: "SwitchyardHTTP2",
            dependencies: ["Switchyard", "SwitchyardHPACK"],
            swiftSettings: strict
        ),
        // The system OpenSSL 3 (Debian: libssl-dev), through pkg-config, with a shim of
        // static inline wrappers for the macros SwitchyardTLS needs.
        .systemLibrary(
            name: "CSwitchyardOpenSSL",
            pkgConfig: "openssl",
            providers: [.apt(["libssl-dev"])]
        ),
        // TLS as a layer over any Connection and any Transport (memory BIOs: the wrapped
        // backend keeps doing the I/O), on the toolkit's connection front. The tools, the
        // kit's TLS pairs (SwitchyardConformanceTLS) and the tests depend on it; nothing a
        // plaintext user builds does.
        .target(
            name: "SwitchyardTLS",
            dependencies: ["Switchyard", "SwitchyardBackendKit", "CSwitchyardOpenSSL"],
            swiftSettings: strict
        ),
        // GRPCCore's ClientTransport and ServerTransport on CallChannel and CallServer: a
        // GRPCClient or GRPCServer over any Transport the user passes (a backend's, or a
        // TLSTransport over one). Depends on no backend and not on SwitchyardTLS.
        .target(
            name: "SwitchyardGRPC",
            dependencies: [
                "Switchyard", "SwitchyardCalls",
                .product(name: "GRPCCore", package: "grpc-swift-2"),
                .product(name: "DequeModule", package: "swift-collections"),
            ],
            swiftSettings: strict
        ),
        // The conformance kit: scenarios any backend runs. Imports no test framework.
        .target(
            name: "SwitchyardConformance",
            dependencies: [
                "SwitchyardCalls", "Switchyard", "SwitchyardBackendKit", "SwitchyardNetlink", "SwitchyardPosix", "SwitchyardBackendLoader",
                // Raw HTTP/2 peers for the scenarios that send what a correct peer never would.
                "SwitchyardHTTP2", "SwitchyardHPACK",
                // The fault scenarios' own simulated network, for the simulation backend.
                "SwitchyardSimulation",
            ],
            swiftSettings: strict
        ),
        // The kit's TLS pairs (TransportBackend.tls over its backends) and the test
        // certificates their TLS scenarios need. Apart from the kit, so that the kit does
        // not need libssl-dev: only what runs TLS pairs (switchyard-conformance-tls, the
        // kit's tests) does.
        .target(
            name: "SwitchyardConformanceTLS",
            dependencies: ["Switchyard", "SwitchyardConformance", "SwitchyardTLS"],
            swiftSettings: strict
        ),
        // The kit's command-line runner: options in, report out; the logic is the kit's.
        // Without OpenSSL: the TLS pairs come in through ConformanceToolTLS, given by
        // switchyard-conformance-tls only.
        .target(
            name: "SwitchyardConformanceTool",
            dependencies: [
                "Switchyard", "SwitchyardConformance", "SwitchyardBackends",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: strict
        ),
        // The runner without the TLS pairs (it hands them to switchyard-conformance-tls).
        .executableTarget(
            name: "switchyard-conformance",
            dependencies: ["SwitchyardConformanceTool"],
            swiftSettings: strict
        ),
        // The runner with the TLS pairs: the one executable of the kit on OpenSSL.
        .executableTarget(
            name: "switchyard-conformance-tls",
            dependencies: [
                .target(name: "SwitchyardConformance", condition: .when(traits: ["TLS"])),
                .target(name: "SwitchyardConformanceTLS", condition: .when(traits: ["TLS"])),
                .target(name: "SwitchyardConformanceTool", condition: .when(traits: ["TLS"])),
            ],
            swiftSettings: strict
        ),
        // `swift package conformance`: a thin entry over switchyard-conformance that also
        // builds the calling package's dynamic library products as backends to load, and
        // builds and runs switchyard-conformance-tls instead when TLS pairs are asked for
        // (not a dependency here: it would make every run of the plugin need libssl-dev).
        // The target is named for the verb: SwiftPM shows the plugin's progress lines as
        // `[conformance] …`, with the target's name.
        .plugin(
            name: "conformance",
            capability: .command(
                intent: .custom(
                    verb: "conformance",
                    description: "Runs Switchyard's conformance kit over backend pairs and prints the report")
            ),
            dependencies: ["switchyard-conformance"],
            path: "Plugins/SwitchyardConformancePlugin"
        ),
        // What the example tools share: the backend and TLS options (`@OptionGroup`s), the
        // checks of their common options, how a tool runs until a signal stops it, and how
        // they say an error and fail.
        .target(
            name: "ToolSupport",
            dependencies: [
                "Switchyard", "SwitchyardBackends", "SwitchyardServiceLifecycle",
                // Only with the TLS trait: a tool built without it links no OpenSSL and
                // refuses its TLS options (the benchmarks' plaintext echo-server).
                .target(name: "SwitchyardTLS", condition: .when(traits: ["TLS"])),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                "SwitchyardNetlink",
            ],
            path: "Examples/ToolSupport",
            swiftSettings: strict
        ),
        .executableTarget(
            name: "echo-server",
            dependencies: [
                "SwitchyardCalls",
                "ToolSupport",
                "Switchyard", "SwitchyardBackendKit", "SwitchyardBackends", "SwitchyardServiceLifecycle",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Examples/EchoServer",
            swiftSettings: strict,
            linkerSettings: echoServerLinking
        ),
        .executableTarget(
            name: "echo-client",
            dependencies: [
                "SwitchyardCalls",
                "ToolSupport",
                "Switchyard", "SwitchyardBackends",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Histogram", package: "hdrhistogram-swift"),
            ],
            path: "Examples/EchoClient",
            swiftSettings: strict
        ),
        .executableTarget(
            name: "connectivity-monitor",
            dependencies: [
                "SwitchyardReachability",
                "ToolSupport",
                "Switchyard", "SwitchyardNetlink", "SwitchyardBackends", "SwitchyardServiceLifecycle",
                .target(name: "SwitchyardTLS", condition: .when(traits: ["TLS"])),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Examples/ConnectivityMonitor",
            swiftSettings: strict
        ),
        .executableTarget(
            name: "transfer-server",
            dependencies: [
                "ToolSupport",
                "Switchyard", "SwitchyardBackends", "SwitchyardTransfer", "SwitchyardServiceLifecycle",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Examples/TransferServer",
            swiftSettings: strict
        ),
        .executableTarget(
            name: "transfer-client",
            dependencies: [
                "SwitchyardCalls",
                "ToolSupport",
                "Switchyard", "SwitchyardBackends", "SwitchyardTransfer",
                "SwitchyardServiceLifecycle",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Examples/TransferClient",
            swiftSettings: strict
        ),
        // What several test targets share: an event log, the check of a TransportError's
        // code, reason and words, a forwarding connection for decorators.
        .target(
            name: "SwitchyardTestSupport",
            dependencies: ["Switchyard"],
            path: "Tests/SwitchyardTestSupport",
            swiftSettings: strict
        ),
        .testTarget(
            name: "SwitchyardTests",
            dependencies: ["SwitchyardCalls", "SwitchyardReachability", "Switchyard", "SwitchyardTestSupport"],
            swiftSettings: strict
        ),
        // A new user's program that bootstraps swift-log and swift-metrics, makes a
        // connect, a reset, a stall and a connectivity change for real, and prints what it
        // captured (Tests/ObservabilityTests runs it inside a network namespace).
        .executableTarget(
            name: "observed-app",
            dependencies: [
                "Switchyard", "SwitchyardBackends", "SwitchyardNetlink",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
            ],
            path: "Tests/Fixtures/ObservedApp",
            swiftSettings: strict
        ),
        .testTarget(
            name: "ObservabilityTests",
            dependencies: [
                "SwitchyardCalls",
                "Switchyard", "SwitchyardBackendKit", "SwitchyardBackends", "SwitchyardMemory",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "InMemoryLogging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
                "SwitchyardTestSupport",
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "SwitchyardPosixTests",
            dependencies: ["Switchyard", "SwitchyardPosix"],
            swiftSettings: strict
        ),
        .testTarget(
            name: "SwitchyardBackendKitTests",
            dependencies: ["Switchyard", "SwitchyardBackendKit", "SwitchyardPosix"],
            swiftSettings: strict
        ),
        .testTarget(
            name: "SwitchyardBSDTests",
            dependencies: ["SwitchyardCalls", "Switchyard", "SwitchyardBSD", "SwitchyardBackendKit", "SwitchyardPosix"],
            swiftSettings: strict
        ),
        .testTarget(
            name: "SwitchyardUVTests",
            dependencies: ["Switchyard", "SwitchyardUV", "SwitchyardBackendKit", "CLibUV", "CSwitchyardEpollGuard", "CSwitchyardPosix", "SwitchyardPosix"],
            swiftSettings: strict
        ),
        .testTarget(
            name: "SwitchyardNetlinkTests",
            dependencies: ["Switchyard", "SwitchyardNetlink", "SwitchyardPosix"],
            swiftSettings: strict
        ),
        .testTarget(
            name: "SwitchyardTransferTests",
            dependencies: ["SwitchyardCalls", "Switchyard", "SwitchyardTransfer", "SwitchyardMemory", "SwitchyardBSD", "SwitchyardUV", "SwitchyardNetlink", "SwitchyardPosix"],
            swiftSettings: strict
        ),
        .testTarget(
            name: "SwitchyardServiceLifecycleTests",
            dependencies: [
                "SwitchyardCalls", "SwitchyardReachability",
                "Switchyard", "SwitchyardMemory", "SwitchyardServiceLifecycle",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "ServiceLifecycleTestKit", package: "swift-service-lifecycle"),
                "SwitchyardTestSupport",
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "SwitchyardCallsTests",
            dependencies: [
                "Switchyard", "SwitchyardCalls", "SwitchyardMemory", "SwitchyardTestSupport",
                // The gzip interop tests take their bytes from python3's gzip and zlib.
                .product(name: "Subprocess", package: "swift-subprocess"),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "SwitchyardReachabilityTests",
            dependencies: ["Switchyard", "SwitchyardReachability", "SwitchyardMemory", "SwitchyardBackends", "SwitchyardPosix"],
            swiftSettings: strict
        ),
        .testTarget(
            name: "SwitchyardMemoryTests",
            dependencies: ["Switchyard", "SwitchyardMemory"],
            swiftSettings: strict
        ),
        .testTarget(
            name: "SwitchyardSimulationTests",
            dependencies: ["Switchyard", "SwitchyardCalls", "SwitchyardSimulation"],
            swiftSettings: strict
        ),
        .testTarget(
            name: "SwitchyardBackendsTests",
            dependencies: [
                "Switchyard", "SwitchyardBackendKit", "SwitchyardBackends", "SwitchyardConformance", "SwitchyardUV",
                .product(name: "Subprocess", package: "swift-subprocess"),
                "SwitchyardBackendLoader",
                "SwitchyardTestSupport",
                "SwitchyardPosix",
                // The interface's structs themselves: a table as an older library built it.
                "CSwitchyardBackendABI",
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "SwitchyardConformanceTests",
            dependencies: [
                "Switchyard", "SwitchyardBackendKit", "SwitchyardConformance", "SwitchyardConformanceTLS", "SwitchyardBackends",
                .product(name: "Subprocess", package: "swift-subprocess"),
                "SwitchyardBackendLoader",
                "SwitchyardTestSupport",
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "SwitchyardTLSTests",
            dependencies: [
                "SwitchyardCalls", "SwitchyardReachability", "Switchyard", "SwitchyardTLS", "SwitchyardMemory", "SwitchyardBSD", "SwitchyardUV",
                // The test certificates, made as the kit's TLS pairs make theirs.
                "SwitchyardConformance", "SwitchyardConformanceTLS",
            ],
            swiftSettings: strict
        ),
        // A GRPCClient and a GRPCServer over SwitchyardGRPC's transports, on bsd, libuv and
        // memory, plain and over TLS; the SwitchyardGRPC article's examples.
        .testTarget(
            name: "SwitchyardGRPCTests",
            dependencies: [
                "Switchyard", "SwitchyardGRPC", "SwitchyardBSD", "SwitchyardUV", "SwitchyardMemory", "SwitchyardTLS",
                // The test certificates, made as the kit's TLS pairs make theirs.
                "SwitchyardConformance", "SwitchyardConformanceTLS",
                // Server keepalive in the stall test.
                "SwitchyardCalls",
                // The article's example picks its backend by name.
                "SwitchyardBackends",
                // A real Wi-Fi to cellular switch in network namespaces: the netlink
                // monitor, and transports made inside a namespace.
                "SwitchyardNetlink", "SwitchyardPosix",
                .product(name: "GRPCCore", package: "grpc-swift-2"),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "SwitchyardHPACKTests",
            dependencies: ["SwitchyardHPACK"],
            swiftSettings: strict
        ),
        .testTarget(
            name: "SwitchyardHTTP2Tests",
            dependencies: [
                "Switchyard", "SwitchyardHTTP2", "SwitchyardHPACK", "SwitchyardBSD", "SwitchyardMemory", "SwitchyardTLS",
                "SwitchyardConformance", "SwitchyardConformanceTLS",
                // The peers: h2load, nghttp and python3 (Tests/Peers).
                .product(name: "Subprocess", package: "swift-subprocess"),
            ],
            // Python's h2 as a peer: scripts the tests run, not sources.
            exclude: ["Peers"],
            swiftSettings: strict
        ),
        // Runs scripts/fuzz (libFuzzer over the frame decoder, the parsers and HPACK's
        // decoder) for a bounded time.
        .testTarget(
            name: "FuzzTests",
            dependencies: [.product(name: "Subprocess", package: "swift-subprocess")],
            swiftSettings: strict
        ),
        // Every Swift block of README.md and of the DocC articles, compiled and run (the
        // blocks and the tests' marked regions are held to each other).
        .testTarget(
            name: "DocumentationTests",
            dependencies: [
                "SwitchyardCalls", "SwitchyardReachability",
                "Switchyard", "SwitchyardBackends", "SwitchyardBSD", "SwitchyardUV",
                "SwitchyardMemory", "SwitchyardNetlink", "SwitchyardConformance",
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "ExamplesTests",
            dependencies: [
                .product(name: "Subprocess", package: "swift-subprocess"),
                // GracefulShutdownTests' framed load: calls on CallChannels, on the
                // server's backend.
                "SwitchyardCalls", "Switchyard", "SwitchyardBackends",
                // The test certificates, made as the kit's TLS pairs make theirs.
                "SwitchyardConformance", "SwitchyardConformanceTLS",
            ],
            exclude: ["reconnect-across-switch.sh"],
            swiftSettings: strict
        ),
    ],
    swiftLanguageModes: [.v6]
)
