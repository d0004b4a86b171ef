import Synchronization

/// What the servers received and what the clients saw acknowledged, per call.
///
/// Calls are numbered from 1 (``newCall()``); each has one slot in a table allocated and
/// written once at start, so the ledger adds nothing to the resident size during the
/// run and the RSS figures at start and end compare like with like.
///
/// A server records each message before it acknowledges it: the message's sequence
/// number must be the call's next one (0, 1, 2, ...), else it is a duplicate (lower) or a
/// gap (higher). A client records, when its call ends, how many messages were
/// acknowledged; at the end every call must have had at least that many delivered.
final class Ledger: Sendable {
    struct Slot {
        /// Messages delivered to the server in order: the next expected sequence number.
        var delivered: UInt32 = 0
        /// Messages the client saw acknowledged, written when its call ended.
        var acknowledged: UInt32 = 0
    }

    struct Table: ~Copyable {
        let slots: UnsafeMutablePointer<Slot>
        let capacity: Int
        var calls = 0
        var duplicates = 0
        var gaps = 0
        var corrupt = 0
        var unknownCalls = 0
        var delivered = 0
        var violations: [String] = []

        mutating func violation(_ text: String) {
            if violations.count < 20 { violations.append(text) }
        }
    }

    private let table: Mutex<Table>

    init(capacity: Int) {
        let slots = UnsafeMutablePointer<Slot>.allocate(capacity: capacity)
        slots.initialize(repeating: Slot(), count: capacity)
        table = Mutex(Table(slots: slots, capacity: capacity))
    }

    /// A new call's number, or nil when the table is full.
    func newCall() -> UInt32? {
        table.withLock { table in
            guard table.calls + 1 < table.capacity else { return nil }
            table.calls += 1
            return UInt32(table.calls)
        }
    }

    /// A server received message `sequence` of call `call`; `intact` says whether its
    /// payload matched the pattern.
    func received(call: UInt32, sequence: UInt32, intact: Bool) {
        table.withLock { table in
            guard call >= 1, Int(call) <= table.calls else {
                table.unknownCalls += 1
                table.violation("a message of unknown call \(call)")
                return
            }
            if !intact {
                table.corrupt += 1
                table.violation("call \(call), message \(sequence): payload differs from its pattern")
            }
            let expected = table.slots[Int(call)].delivered
            if sequence == expected {
                table.slots[Int(call)].delivered = expected + 1
                table.delivered += 1
            } else if sequence < expected {
                table.duplicates += 1
                table.violation("call \(call): message \(sequence) again (\(expected) delivered)")
            } else {
                table.gaps += 1
                table.violation("call \(call): message \(sequence) after \(expected) delivered (a gap)")
            }
        }
    }

    /// A client's call ended with `acknowledged` messages acknowledged.
    func ended(call: UInt32, acknowledged: UInt32) {
        table.withLock { $0.slots[Int(call)].acknowledged = acknowledged }
    }

    struct Summary {
        var calls = 0
        var delivered = 0
        var acknowledged = 0
        /// Calls with fewer messages delivered than acknowledged, and the messages missing.
        var shortCalls = 0
        var missing = 0
        var duplicates = 0
        var gaps = 0
        var corrupt = 0
        var unknownCalls = 0
        var violations: [String] = []
    }

    func summary() -> Summary {
        table.withLock { table in
            var summary = Summary(
                calls: table.calls, delivered: table.delivered, duplicates: table.duplicates, gaps: table.gaps,
                corrupt: table.corrupt, unknownCalls: table.unknownCalls, violations: table.violations)
            if table.calls > 0 {
                for call in 1...table.calls {
                    let slot = table.slots[call]
                    summary.acknowledged += Int(slot.acknowledged)
                    if slot.delivered < slot.acknowledged {
                        summary.shortCalls += 1
                        summary.missing += Int(slot.acknowledged - slot.delivered)
                        if summary.violations.count < 20 {
                            summary.violations.append("call \(call): \(slot.acknowledged) acknowledged, \(slot.delivered) delivered")
                        }
                    }
                }
            }
            return summary
        }
    }
}

/// Counts by name (reasons, kinds), for the report.
final class Tally: Sendable {
    private let counts = Mutex<[String: Int]>([:])

    func add(_ name: String, _ count: Int = 1) {
        counts.withLock { $0[name, default: 0] += count }
    }

    var all: [(String, Int)] {
        counts.withLock { $0.sorted { $0.value != $1.value ? $0.value > $1.value : $0.key < $1.key } }
    }

    func count(_ name: String) -> Int { counts.withLock { $0[name] ?? 0 } }
}

/// The message format: call number and sequence number (4 bytes each, big-endian), then
/// a payload whose bytes follow from both; the acknowledgement is the 8-byte header.
enum Message {
    static func make(call: UInt32, sequence: UInt32, size: Int) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: 8 + size)
        put(call, into: &bytes, at: 0)
        put(sequence, into: &bytes, at: 4)
        var state = seed(call, sequence)
        for index in 8..<bytes.count {
            state ^= state << 13
            state ^= state >> 17
            state ^= state << 5
            bytes[index] = UInt8(truncatingIfNeeded: state)
        }
        return bytes
    }

    /// The call, sequence number and whether the payload is intact; nil when too short.
    static func parse(_ bytes: [UInt8]) -> (call: UInt32, sequence: UInt32, intact: Bool)? {
        guard bytes.count >= 8 else { return nil }
        let call = get(bytes, at: 0), sequence = get(bytes, at: 4)
        var state = seed(call, sequence)
        var intact = true
        for index in 8..<bytes.count {
            state ^= state << 13
            state ^= state >> 17
            state ^= state << 5
            if bytes[index] != UInt8(truncatingIfNeeded: state) {
                intact = false
                break
            }
        }
        return (call, sequence, intact)
    }

    static func header(_ bytes: [UInt8]) -> (call: UInt32, sequence: UInt32)? {
        guard bytes.count == 8 else { return nil }
        return (get(bytes, at: 0), get(bytes, at: 4))
    }

    static func acknowledgement(call: UInt32, sequence: UInt32) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: 8)
        put(call, into: &bytes, at: 0)
        put(sequence, into: &bytes, at: 4)
        return bytes
    }

    private static func seed(_ call: UInt32, _ sequence: UInt32) -> UInt32 {
        (call &* 2_654_435_761) ^ (sequence &* 40503) | 1
    }

    private static func put(_ value: UInt32, into bytes: inout [UInt8], at offset: Int) {
        for index in 0..<4 { bytes[offset + index] = UInt8(truncatingIfNeeded: value >> (24 - 8 * index)) }
    }

    private static func get(_ bytes: [UInt8], at offset: Int) -> UInt32 {
        (0..<4).reduce(UInt32(0)) { $0 << 8 | UInt32(bytes[offset + $1]) }
    }
}
