import Switchyard
import Synchronization
import Testing

/// What registering a connection with a ``Lifecycle`` costs the connection: no weak
/// reference (so no side table, which would put every retain and release of the
/// connection on the runtime's slow path), and no keeping it alive once it is gone.
@Suite("Lifecycle registration")
struct LifecycleRegistrationTests {
    @Test("Registering a connection takes no weak reference to it: its retains and releases stay on the fast path")
    func noSideTable() {
        let lifecycle = Lifecycle()
        let connection = InertConnection()
        #expect(!InertConnection.hasSideTable(connection))
        let registration = lifecycle.register(connection, policy: .close)
        #expect(!InertConnection.hasSideTable(connection))
        registration.cancel()
        // The probe sees a side table where there is one: a weak reference makes it.
        let probe = InertConnection()
        weak let weakProbe = probe
        #expect(InertConnection.hasSideTable(probe))
        withExtendedLifetime(weakProbe) {}
    }

    @Test("A registered connection that nothing else holds is dropped and freed by the next sweep; one still held stays and is closed on suspend")
    func goneConnectionsAreFreed() async {
        let lifecycle = Lifecycle(gracePeriod: .zero)
        let freed = Atomic<Int>(0)
        let kept = InertConnection()
        lifecycle.register(kept, policy: .close)
        for _ in 0..<10 {
            lifecycle.register(InertConnection(onDeinit: { freed.add(1, ordering: .relaxed) }), policy: .close)
        }
        // Held only by the lifecycle: alive until a sweep (registration or suspend).
        #expect(freed.load(ordering: .relaxed) == 0)
        await lifecycle.suspend()
        #expect(freed.load(ordering: .relaxed) == 10)
        #expect(kept.closes.load(ordering: .relaxed) == 1)
    }

    @Test("Cancelling a registration lets go of the connection at once")
    func cancelReleases() {
        let lifecycle = Lifecycle()
        let freed = Atomic<Int>(0)
        let registration = lifecycle.register(InertConnection(onDeinit: { freed.add(1, ordering: .relaxed) }), policy: .keep)
        #expect(freed.load(ordering: .relaxed) == 0)
        registration.cancel()
        #expect(freed.load(ordering: .relaxed) == 1)
    }
}

/// A connection that does nothing but count its closes (and say when it is freed).
private final class InertConnection: Connection {
    let closes = Atomic<Int>(0)
    private let onDeinit: @Sendable () -> Void
    init(onDeinit: @escaping @Sendable () -> Void = {}) { self.onDeinit = onDeinit }
    deinit { onDeinit() }

    var backendName: String { "inert" }
    var eventLoop: any TransportEventLoop { InertLoop.shared }
    var localAddress: Endpoint { Endpoint(host: "127.0.0.1", port: 1) }
    var remoteAddress: Endpoint { Endpoint(host: "127.0.0.1", port: 2) }
    var pendingWriteBytes: Int { 0 }
    func setHandler(_ handler: any ConnectionHandler) {}
    func startReading() {}
    func stopReading() {}
    func write(_ bytes: [UInt8], completion: WriteCompletion?) {}
    func write(borrowing bytes: UnsafeRawBufferPointer, completion: WriteCompletion?) {}
    func shutdownOutput(completion: WriteCompletion?) {}
    func close() { closes.add(1, ordering: .relaxed) }
    func reset() { close() }

    /// Whether the Swift runtime gave `object` a side table (what a weak reference to it
    /// does): the inline reference count word (the second word of the object) then holds
    /// the side table's address with its top two bits (UseSlowRC, SideTableMark) set.
    static func hasSideTable(_ object: AnyObject) -> Bool {
        let word = Unmanaged.passUnretained(object).toOpaque().load(fromByteOffset: MemoryLayout<UInt>.size, as: UInt64.self)
        return word >> 62 == 0b11
    }
}

private final class InertLoop: TransportEventLoop {
    static let shared = InertLoop()
    var inEventLoop: Bool { false }
    func execute(_ work: @escaping @Sendable () -> Void) { work() }
}
