// Microbenchmarks of Switchyard's hot pieces, run by package-benchmark
// (ordo-one/benchmark) and checked against Benchmarks/Thresholds/ by
// Benchmarks/check-thresholds:
//
// - the frame codec: `Frame.encode` and `FrameDecoder` (64 B and 64 KiB messages);
// - the flow-control state machine: `ManualFlowController` request/deliver cycles;
// - the syscall path: 64 B round trips over loopback through the BSD backend's raw
//   `Connection` (public API: `BSDTransport`, one event loop, both ends on it).
//
// Benchmark names carry no spaces, commas or slashes: package-benchmark writes threshold
// files under a shell-safe name but looks them up under the raw one.
//
// Metrics: allocation counts are exact and carry tight thresholds; wall clock
// carries a loose one (this runs on shared VMs), so a check fails on a real
// regression (an extra allocation or syscall per message, a 2x slowdown), not on noise.

import Benchmark
import Switchyard
import SwitchyardBSD

#if canImport(Glibc)
import Glibc
#endif

let benchmarks: @Sendable () -> Void = {
    // Tolerances for `thresholds check`: exact counts are held to a few units, times to
    // a factor (relative, in percent, of the checked-in p90).
    let countTolerance = BenchmarkThresholds(relative: [.p90: 5.0], absolute: [.p90: 2])
    let timeTolerance = BenchmarkThresholds(relative: [.p90: 60.0])

    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .mallocCountTotal],
        warmupIterations: 3,
        scalingFactor: .kilo,
        maxDuration: .seconds(2),
        maxIterations: .kilo(10),
        thresholds: [
            .wallClock: timeTolerance,
            .mallocCountTotal: countTolerance,
        ]
    )

    // MARK: Frame codec

    for size in [64, 64 * 1024] {
        let payload = [UInt8]((0..<size).map { UInt8(truncatingIfNeeded: $0) })
        let label = size == 64 ? "64B" : "64KiB"
        let scaling: BenchmarkScalingFactor = size == 64 ? .kilo : .one

        Benchmark("Frame.encode_\(label)", configuration: .init(scalingFactor: scaling)) { benchmark in
            for _ in benchmark.scaledIterations {
                blackHole(Frame.encode(.message, payload: payload))
            }
        }

        // Ten frames arriving in one read, decoded: the receive side of a busy call.
        let frames = (0..<10).flatMap { _ in Frame.encode(.message, payload: payload) }
        Benchmark("FrameDecoder_10x\(label)_oneRead", configuration: .init(scalingFactor: scaling)) { benchmark in
            var decoder = FrameDecoder(maximumMessageSize: 1 << 20)
            for _ in benchmark.scaledIterations {
                frames.withUnsafeBytes { decoder.append($0) }
                while let frame = try decoder.next() { blackHole(frame) }
            }
        }

        // The same bytes in 1,500-byte reads (a frame straddles reads).
        Benchmark("FrameDecoder_10x\(label)_1500BReads", configuration: .init(scalingFactor: scaling)) { benchmark in
            var decoder = FrameDecoder(maximumMessageSize: 1 << 20)
            for _ in benchmark.scaledIterations {
                try frames.withUnsafeBytes { all in
                    var offset = 0
                    while offset < all.count {
                        let end = min(offset + 1500, all.count)
                        decoder.append(UnsafeRawBufferPointer(rebasing: all[offset..<end]))
                        while let frame = try decoder.next() { blackHole(frame) }
                        offset = end
                    }
                }
            }
        }
    }

    // MARK: Flow control

    Benchmark("ManualFlowController_requestDeliver_x1000", configuration: .init(metrics: [.wallClock, .mallocCountTotal])) { benchmark in
        for _ in benchmark.scaledIterations {
            var controller = ManualFlowController()
            for _ in 0..<1000 {
                controller.request(1)
                if controller.mayDeliver { controller.didDeliver(bytes: 64) }
            }
            blackHole(controller)
        }
    }

    Benchmark("ManualFlowController_anyFlowController_x1000", configuration: .init(metrics: [.wallClock, .mallocCountTotal])) { benchmark in
        for _ in benchmark.scaledIterations {
            var controller: any FlowController = CallConfiguration(enableFlowControl: true).makeFlowController()
            for _ in 0..<1000 {
                controller.request(1)
                if controller.mayDeliver, controller.reportsWrites { controller.didDeliver(bytes: 64) }
            }
            blackHole(controller)
        }
    }

    // MARK: Syscall path

    // 100 sequential 64 B round trips per iteration, driven on the loop: the client's
    // handler writes the next message when the echo of the last one is back, the
    // server's handler echoes with `write(borrowing:)` (what echo-server's raw mode does).
    Benchmark(
        "BSDLoopback_roundTrip64B_x100",
        configuration: .init(
            metrics: [.wallClock, .mallocCountTotal],
            scalingFactor: .one,
            setup: { try await LoopbackPair.shared.start() },
            teardown: { await LoopbackPair.shared.stop() }
        )
    ) { benchmark in
        let pair = LoopbackPair.shared
        for _ in benchmark.scaledIterations {
            await pair.roundTrips(100)
        }
    }
}

/// A BSD transport with one loop, a listener, and one connected pair on it.
final class LoopbackPair: @unchecked Sendable {
    static let shared = LoopbackPair()

    private var transport: BSDTransport?
    private var listener: (any Listener)?
    private var client: (any Connection)?
    private var server: (any Connection)?
    private var clientHandler: PingHandler?

    func start() async throws {
        let transport = try BSDTransport(configuration: TransportConfiguration(eventLoopCount: 1))
        let listener = try await transport.listen(on: Endpoint(host: "127.0.0.1", port: 0))
        let accepted = AsyncStream<any Connection>.makeStream()
        listener.acceptConnections { connection in
            connection.setHandler(EchoHandler(connection))
            connection.startReading()
            accepted.continuation.yield(connection)
        }
        let client = try await transport.connect(to: listener.localAddress)
        var iterator = accepted.stream.makeAsyncIterator()
        server = await iterator.next()
        let handler = PingHandler(client)
        client.setHandler(handler)
        client.startReading()
        self.transport = transport
        self.listener = listener
        self.client = client
        self.clientHandler = handler
    }

    func roundTrips(_ count: Int) async {
        guard let client, let clientHandler else { return }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            client.eventLoop.execute { clientHandler.begin(count, continuation) }
        }
    }

    func stop() async {
        client?.close()
        server?.close()
        listener?.close()
        await transport?.shutdown(gracePeriod: .zero)
        transport = nil
        listener = nil
        client = nil
        server = nil
        clientHandler = nil
    }
}

/// Echoes what it reads (echo-server's raw handler without the pause logic: 64 B never
/// stays queued).
final class EchoHandler: ConnectionHandler, @unchecked Sendable {
    private var connection: (any Connection)?
    init(_ connection: any Connection) { self.connection = connection }
    func connectionDidRead(_ bytes: UnsafeRawBufferPointer) { connection?.write(borrowing: bytes, completion: nil) }
    func connectionDidReadEnd() { connection?.close() }
    func connectionDidClose(error: TransportError?) { connection = nil }
}

/// Sends 64 B, waits for all 64 back, repeats `count` times, then resumes the waiter.
/// Runs on the loop only.
final class PingHandler: ConnectionHandler, @unchecked Sendable {
    private var connection: (any Connection)?
    private var message = [UInt8](repeating: 0x5a, count: 64)
    private var remaining = 0
    private var received = 0
    private var waiter: CheckedContinuation<Void, Never>?

    init(_ connection: any Connection) { self.connection = connection }

    func begin(_ count: Int, _ continuation: CheckedContinuation<Void, Never>) {
        remaining = count
        waiter = continuation
        send()
    }

    private func send() {
        received = 0
        message.withUnsafeBytes { connection?.write(borrowing: $0, completion: nil) }
    }

    func connectionDidRead(_ bytes: UnsafeRawBufferPointer) {
        received += bytes.count
        guard received >= message.count else { return }
        remaining -= 1
        if remaining > 0 {
            send()
        } else {
            let waiter = self.waiter
            self.waiter = nil
            waiter?.resume()
        }
    }

    func connectionDidReadEnd() {}
    func connectionDidClose(error: TransportError?) { connection = nil }
}
