// doc-block begin (the guide to writing a backend shows this: SwitchyardConformance.docc)
/// What a backend built on ``CountingTransport`` does to its connections' writes: the
/// one place where `counted` and `lossy` differ. Everything else (connect, listen,
/// shutdown, reads, the handler's callbacks, the counting) is the decorator's, written
/// once.
public protocol WriteHook: Sendable {
    /// The name the backend is registered under.
    static var backendName: String { get }
    /// One line for listings.
    static var summary: String { get }
    /// How many of a write's `count` bytes, from the first, go on to `bsd`.
    static func bytesPassedOn(of count: Int) -> Int
}

/// `counted`: every byte goes on.
public enum CountedWrites: WriteHook {
    public static var backendName: String { "counted" }
    public static var summary: String { "bsd, counting the bytes each transport writes and reads" }
    public static func bytesPassedOn(of count: Int) -> Int { count }
}

/// `lossy`: every write loses its last byte, and still reports success. A broken
/// backend on purpose: the conformance kit must fail it.
public enum LossyWrites: WriteHook {
    public static var backendName: String { "lossy" }
    public static var summary: String { "bsd, losing the last byte of every write (broken on purpose)" }
    public static func bytesPassedOn(of count: Int) -> Int { max(count - 1, 0) }
}

/// The `counted` backend's transport.
public typealias CountedTransport = CountingTransport<CountedWrites>
/// The `lossy` backend's transport.
public typealias LossyTransport = CountingTransport<LossyWrites>
// doc-block end
