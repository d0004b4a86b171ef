import Glibc
import Switchyard
import Synchronization

/// The number of open descriptors of this process (entries of `/proc/self/fd`, less the
/// directory's own).
func openDescriptorCount() -> Int {
    guard let directory = opendir("/proc/self/fd") else { return -1 }
    defer { closedir(directory) }
    var count = 0
    while let entry = readdir(directory) {
        let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
            String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
        }
        if name != "." && name != ".." { count += 1 }
    }
    return count - 1
}

/// Waits (up to `seconds`) until the descriptor count is back to `expected`; returns the last count.
func settledDescriptorCount(_ expected: Int, seconds: Int = 2) async -> Int {
    var count = openDescriptorCount()
    let deadline = ContinuousClock.now + .seconds(seconds)
    while count > expected && ContinuousClock.now < deadline {
        try? await Task.sleep(for: .milliseconds(20))
        count = openDescriptorCount()
    }
    return count
}

/// Reads a whole text file, without Foundation.
func readTextFile(_ path: String) -> String? {
    guard let file = fopen(path, "r") else { return nil }
    defer { fclose(file) }
    var bytes: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 4096)
    while true {
        let count = fread(&buffer, 1, buffer.count, file)
        if count <= 0 { break }
        bytes += buffer[..<count]
    }
    return String(decoding: bytes, as: UTF8.self)
}

/// Deterministic bytes for content checks.
func pattern(count: Int, seed: UInt64) -> [UInt8] {
    var state = seed &* 0x9E37_79B9_7F4A_7C15 | 1
    var bytes = [UInt8](repeating: 0, count: count)
    for index in 0..<count {
        state ^= state << 13
        state ^= state >> 7
        state ^= state << 17
        bytes[index] = UInt8(truncatingIfNeeded: state)
    }
    return bytes
}

/// Runs `body` and returns the TransportError it threw, or nil.
func transportError(_ body: () async throws -> Void) async -> TransportError? {
    do {
        try await body()
        return nil
    } catch let error as TransportError {
        return error
    } catch {
        return TransportError(code: .unknown, reason: .init("not a TransportError"), message: "\(error)")
    }
}

/// A handler that records every event, from any thread.
final class RecordingHandler: ConnectionHandler {
    struct Events: Sendable {
        var bytes: [UInt8] = []
        var readEnds = 0
        var drains = 0
        var closes: [TransportError?] = []
        var offLoop = 0
    }
    private let events = Mutex(Events())
    private let loop: any TransportEventLoop

    init(on connection: any Connection) {
        loop = connection.eventLoop
        connection.setHandler(self)
    }

    var snapshot: Events { events.withLock { $0 } }

    private func check(_ events: inout Events) { if !loop.inEventLoop { events.offLoop += 1 } }
    func connectionDidRead(_ bytes: UnsafeRawBufferPointer) { events.withLock { check(&$0); $0.bytes += bytes } }
    func connectionDidReadEnd() { events.withLock { check(&$0); $0.readEnds += 1 } }
    func connectionDidDrainWrites() { events.withLock { check(&$0); $0.drains += 1 } }
    func connectionDidClose(error: TransportError?) { events.withLock { check(&$0); $0.closes.append(error) } }
}

/// Polls `condition` every 10 ms for up to `seconds`.
func eventually(seconds: Double = 5, _ condition: () -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
    while !condition() {
        if ContinuousClock.now > deadline { return false }
        try? await Task.sleep(for: .milliseconds(10))
    }
    return true
}
